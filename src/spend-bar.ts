/** How much of a cap is spent, as the status page, `status` and the `eval` progress draw it. Pure. */

/** spent / cap clamped to [0, 1] (0 for no cap). */
export function spendFraction(spent: number, cap: number): number {
  return cap > 0 ? Math.max(0, Math.min(1, spent / cap)) : 0;
}

/** `[####......]`: the spent fraction in `width` cells. */
export function textSpendBar(spent: number, cap: number, width = 10): string {
  const n = Math.round(spendFraction(spent, cap) * width);
  return `[${"#".repeat(n)}${".".repeat(width - n)}]`;
}
