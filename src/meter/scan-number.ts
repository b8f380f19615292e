/**
 * What Python's `json.dumps` prints for a JSON float, as upstream's estimate counts it (scan.ts):
 * `repr(float(literal))`, whose characters depend only on the shortest round-trip digits — how
 * many (k) and where the decimal point falls (x = 0.d₁…d_k × 10^decpt) — and the sign. Pure.
 *
 * Those two numbers come from the literal itself when it has at most 15 significant digits in the
 * normal range (a decimal of ≤ 15 digits survives the round trip through a double, and no shorter
 * decimal maps to the same double), so the common float costs no string and no conversion; any
 * other literal goes through the double (`Number`) and its shortest digits (`String`, the same
 * digits Python's repr picks). Linear in the literal's length either way.
 */

/** k and decpt of a finite, non-zero double's shortest round-trip digits. */
export function shortestShape(abs: number): [k: number, decpt: number] {
  const s = String(abs);
  const e = s.indexOf("e");
  if (e >= 0) {
    const mantissa = e - (s.indexOf(".") >= 0 ? 1 : 0);
    return [mantissa, Number(s.slice(e + 1)) + 1];
  }
  const dot = s.indexOf(".");
  if (dot < 0) {
    let t = s.length;
    while (s.charCodeAt(t - 1) === 0x30) t--;
    return [t, s.length];
  }
  if (s.charCodeAt(0) === 0x30) {
    let z = dot + 1;
    while (s.charCodeAt(z) === 0x30) z++;
    return [s.length - z, -(z - dot - 1)];
  }
  return [s.length - 1, dot];
}

/** Python's repr prints fixed notation for -4 < decpt ≤ 16, else scientific. */
const fixed = (decpt: number) => decpt > -4 && decpt <= 16;

/** Letters and digits of repr: the digits, padding zeros, and an exponent's 'e' and digits. */
export function reprPlain(k: number, decpt: number): number {
  if (fixed(decpt)) return decpt <= 0 ? 1 - decpt + k : decpt >= k ? decpt + 1 : k;
  const e = Math.abs(decpt - 1);
  return k + 1 + (e < 100 ? 2 : String(e).length);
}

/** Symbols of repr: the point (absent from a one-digit scientific form), the exponent's sign, a minus. */
export function reprDense(k: number, decpt: number, negative: boolean): number {
  const sign = negative ? 1 : 0;
  return fixed(decpt) ? 1 + sign : (k > 1 ? 1 : 0) + 1 + sign;
}

/** Significant digits of a literal past which its own digits are not its repr's. */
const MAX_LITERAL_DIGITS = 15;
/** Decimal exponents inside which every double is normal (and far from overflow). */
const MIN_SAFE_DECPT = -300;
const MAX_SAFE_DECPT = 300;
/** Beyond these a literal is Infinity or zero whatever its digits. */
const OVERFLOW_DECPT = 310;
const UNDERFLOW_DECPT = -330;

/** Where the counts go (the scanner itself: no allocation per number). */
export interface ClassSink {
  plain: number;
  dense: number;
}

/**
 * Add the classes of the float literal `b[start, end)` to `sink`: its sign, integer digits
 * `[intStart, intEnd)`, fraction digits `[fracStart, fracEnd)` and decimal exponent `exp`
 * (saturated by the caller).
 */
export function addFloatClasses(
  sink: ClassSink,
  b: Buffer,
  start: number,
  end: number,
  negative: boolean,
  intStart: number,
  intEnd: number,
  fracStart: number,
  fracEnd: number,
  exp: number,
): void {
  const nInt = intEnd - intStart;
  const nAll = nInt + (fracEnd - fracStart);
  let first = -1;
  let last = -1;
  for (let d = 0; d < nAll; d++) {
    const c = d < nInt ? b[intStart + d] : b[fracStart + d - nInt];
    if (c !== 0x30) {
      if (first < 0) first = d;
      last = d;
    }
  }
  const sign = negative ? 1 : 0;
  let k = last - first + 1;
  let decpt = nInt - first + exp;
  if (first >= 0 && k <= MAX_LITERAL_DIGITS && decpt >= MIN_SAFE_DECPT && decpt <= MAX_SAFE_DECPT) {
    sink.plain += reprPlain(k, decpt);
    sink.dense += reprDense(k, decpt, negative);
    return;
  }
  const x =
    first < 0 || decpt < UNDERFLOW_DECPT
      ? 0
      : decpt > OVERFLOW_DECPT
        ? Number.POSITIVE_INFINITY
        : Number(b.toString("latin1", start, end));
  if (x === 0) {
    sink.plain += 2; // 0.0, -0.0
    sink.dense += 1 + sign;
  } else if (!Number.isFinite(x)) {
    sink.plain += 8; // Infinity, -Infinity
    sink.dense += sign;
  } else {
    [k, decpt] = shortestShape(Math.abs(x));
    sink.plain += reprPlain(k, decpt);
    sink.dense += reprDense(k, decpt, negative);
  }
}
