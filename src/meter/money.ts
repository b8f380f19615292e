/**
 * Money is integer pico-dollars (1e-12 USD) held in bigint: every price of the table (USD per 1M
 * tokens with up to six decimals) is then an exact integer per token, and sums never drift.
 * USD numbers exist only at the edges (JSON, headers, logs).
 */
export type Pico = bigint;

export const PICO_PER_USD = 1_000_000_000_000n;
const PICO_PER_MICRO = 1_000_000n;

/** A USD amount from configuration (a cap) to pico-dollars, rounded to the nearest pico. */
export function usdToPico(usd: number): Pico {
  if (!Number.isFinite(usd) || usd < 0) throw new RangeError(`not a non-negative USD amount: ${usd}`);
  // Through the decimal string so 0.3 becomes exactly 300_000_000_000, not 299_999_999_999.99997.
  return decimalToScaled(usd, 12, true);
}

/** USD per 1M tokens → pico-dollars per token (exact: the price may carry at most six decimals). */
export function pricePerMillionToPico(usdPerMillion: number): Pico {
  if (!Number.isFinite(usdPerMillion) || usdPerMillion < 0)
    throw new RangeError(`not a non-negative price: ${usdPerMillion}`);
  return decimalToScaled(usdPerMillion, 6, false);
}

/** For JSON and logs only: never feed the result back into arithmetic. */
export function picoToUsd(p: Pico): number {
  return Number(p) / 1e12;
}

/** Six decimals, floored (a remaining budget is never overstated), never negative. */
export function formatUsd6(p: Pico): string {
  if (p <= 0n) return "0.000000";
  const micro = p / PICO_PER_MICRO;
  const whole = micro / 1_000_000n;
  const frac = (micro % 1_000_000n).toString().padStart(6, "0");
  return `${whole}.${frac}`;
}

/**
 * x × 10^scale as an exact integer, from the shortest decimal representation of x (what the JSON
 * file or the flag said). With `round`, digits beyond the scale are rounded half-up; without, they
 * are an error (a price finer than a pico-dollar per token cannot be represented exactly).
 */
function decimalToScaled(x: number, scale: number, round: boolean): bigint {
  const [mantissa, expPart] = x.toExponential().split("e") as [string, string];
  const digits = mantissa.replace(".", "");
  // x = 0.<digits> × 10^(exp+1); shift by scale.
  const point = Number(expPart) + 1 + scale;
  if (point >= digits.length) return BigInt(digits + "0".repeat(point - digits.length));
  if (point <= 0) {
    if (!round && /[1-9]/.test(digits)) throw new RangeError(`${x} has more than ${scale} decimals`);
    return point === 0 && round && Number(digits[0]) >= 5 ? 1n : 0n;
  }
  const kept = BigInt(digits.slice(0, point));
  const rest = digits.slice(point);
  if (!round) {
    if (/[1-9]/.test(rest)) throw new RangeError(`${x} has more than ${scale} decimals`);
    return kept;
  }
  return Number(rest[0]) >= 5 ? kept + 1n : kept;
}

export function minPico(a: Pico, b: Pico): Pico {
  return a < b ? a : b;
}
