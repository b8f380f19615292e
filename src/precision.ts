/**
 * The wire's precision: scores and qualities are compared, summed and sent at 4 decimal places.
 * The epsilon rounds a half that binary floating point stores just below it up, as the decimal
 * value it stands for would be.
 */
export function round4(x: number): number {
  return Math.round((x + Number.EPSILON) * 10_000) / 10_000;
}
