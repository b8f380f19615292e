/**
 * Python's decimal rounding of a float, exactly: the one home of every rounded number a vote (and
 * the meter's budget) carries. Python's `round(x, n)` and `f"{x:.{n}f}"` round the EXACT binary
 * value of the double to n decimals, ties to even (CPython `float.__round__` and `format` go through
 * `_Py_dg_dtoa` mode 3, correctly rounded; `round` then reads the digits back with `_Py_dg_strtod`).
 * So 1/32 = 0.03125 exactly → 0.0312, and 3/160 (stored as 0.018749999999999999306…) → 0.0187.
 *
 * Why this is exact for every double:
 * - ECMAScript `Number.prototype.toFixed(f)` (ECMA-262 §21.1.3.3) is specified on the exact
 *   mathematical value of x (|x| < 1e21): the integer n with n/10^f − x closest to zero, the larger
 *   n when two are equally close. It therefore agrees with Python everywhere except on an exact tie,
 *   where it rounds away from zero and Python to even.
 * - An exact tie at f decimals means x·10^f = k + ½ exactly: the expansion of x terminates with
 *   f + 1 fractional digits, the last a 5. Then `toFixed(f + 1)` is that expansion itself (no
 *   rounding) and ends in "5". So whenever `toFixed(f + 1)` does not end in "5", x is no tie and
 *   `toFixed(f)` is Python's answer.
 * - Every other case (a possible tie, |x| ≥ 1e21) takes the exact route: x = m·2^e with m and e read
 *   from the IEEE-754 bits, x·10^f = m·10^f / 2^−e computed in BigInt, the remainder compared with
 *   one half, ties to the even quotient.
 * `round` returns the double nearest the rounded decimal, which is what `Number()` of the decimal
 * string gives (both are correctly rounded conversions). test/unit/precision.test.ts checks all of
 * it against python3: every k/n for n ≤ 256, sums of rounded scores, random doubles.
 */

/** IEEE-754 double as sign, integer mantissa and binary exponent: |x| = mant · 2^exp. Finite x only. */
function decompose(x: number): { negative: boolean; mant: bigint; exp: number } {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  const hi = view.getUint32(0);
  const lo = view.getUint32(4);
  const negative = hi >>> 31 === 1;
  const expBits = (hi >>> 20) & 0x7ff;
  let mant = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo);
  if (expBits === 0) return { negative, mant, exp: -1074 }; // subnormal (or zero)
  mant |= 1n << 52n;
  return { negative, mant, exp: expBits - 1075 };
}

/** The exact route: the binary value's decimal expansion rounded to `digits` places, ties to even. */
function exactFixed(x: number, digits: number): string {
  const { negative, mant, exp } = decompose(x);
  let q: bigint;
  if (exp >= 0) q = (mant << BigInt(exp)) * 10n ** BigInt(digits);
  else {
    const scaled = mant * 10n ** BigInt(digits);
    const shift = BigInt(-exp);
    q = scaled >> shift;
    const r = scaled - (q << shift);
    const half = 1n << (shift - 1n);
    if (r > half || (r === half && (q & 1n) === 1n)) q += 1n;
  }
  const s = q.toString().padStart(digits + 1, "0");
  const body = digits === 0 ? s : `${s.slice(0, -digits)}.${s.slice(-digits)}`;
  // Python keeps the sign of a negative value that rounds to zero ("-0.0000"), and of -0.0.
  return negative ? `-${body}` : body;
}

/** Python's `f"{x:.{digits}f}"` (`format(x, ".nf")`): the exact value rounded, ties to even. */
export function pyFixed(x: number, digits: number): string {
  if (!Number.isInteger(digits) || digits < 0 || digits > 100)
    throw new RangeError(`digits must be an integer in [0, 100], got ${digits}`);
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  if (Object.is(x, -0) || Math.abs(x) >= 1e21 || digits >= 100) return exactFixed(x, digits);
  const longer = x.toFixed(digits + 1);
  return longer.charCodeAt(longer.length - 1) === 0x35 ? exactFixed(x, digits) : x.toFixed(digits);
}

/** Python's `round(x, digits)` for a float: the double nearest the correctly rounded decimal. */
export function pyRound(x: number, digits: number): number {
  if (!Number.isFinite(x) || x === 0) return x; // float.__round__ returns these unchanged
  return Number(pyFixed(x, digits));
}

/**
 * The wire's precision: scores and qualities are compared, summed and sent at 4 decimal places,
 * as upstream's `round(x, 4)` (miner_eval.py judge entries, validator.py `_summarize_eval`).
 */
export const round4 = (x: number): number => pyRound(x, 4);

/** Python's `f"{x:.6f}"`: the meter's budget header (meter.py `x-trajrl-budget-remaining-usd`). */
export const pyFixed6 = (x: number): string => pyFixed(x, 6);

/** Python's `round(x, 6)`: dollars in JSON (meter.py `/v1/budget`, `EpisodeUsage.summary`, judge `cost_usd`). */
export const pyRound6 = (x: number): number => pyRound(x, 6);
