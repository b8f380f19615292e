/**
 * The order an evaluation dispatches its episodes in: longest first (LPT). With fewer slots than
 * episodes, a long episode started last leaves every other slot idle while it finishes; started
 * first, it runs while the short ones fill the other slots. Pure: the caller supplies what is known
 * of each scenario's duration. Results are reported in spec order whatever the dispatch order.
 */

export interface DurationHints {
  /** Wall times (ms) of this scenario's recent finished episodes, any order. */
  history: ReadonlyMap<string, readonly number[]>;
  /** A stand-in when there is no history: the scenario's time limits (agent + verifier), ms. */
  limitsMs: ReadonlyMap<string, number>;
}

export function median(xs: readonly number[]): number | undefined {
  const v = xs.filter((x) => Number.isFinite(x) && x >= 0).sort((a, b) => a - b);
  if (v.length === 0) return undefined;
  const mid = v.length >> 1;
  return v.length % 2 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2;
}

/**
 * `scenarios` longest first. Measured durations rank only when every scenario has one (a measured
 * minute and a time limit are not comparable); otherwise the time limits rank. Ties, and scenarios
 * with nothing known, keep their given order.
 */
export function longestFirst(scenarios: readonly string[], hints: DurationHints): string[] {
  const measured = scenarios.map((s) => median(hints.history.get(s) ?? []));
  const all = measured.every((m) => m !== undefined);
  const key = (s: string, i: number) => (all ? measured[i]! : (hints.limitsMs.get(s) ?? 0));
  return scenarios
    .map((s, i) => ({ s, i, k: key(s, i) }))
    .sort((a, b) => b.k - a.k || a.i - b.i)
    .map((x) => x.s);
}
