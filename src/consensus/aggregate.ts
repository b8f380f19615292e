/**
 * Aggregation of validator votes on one pack (DESIGN.md "Verdict and consensus").
 * Pure: no I/O, no clock. Inputs are validated by the caller at the boundary.
 */

export interface Vote {
  validator_hotkey: string;
  /** The validator's stake, frozen when the vote was cast (any unit; only ratios matter). */
  stake: number;
  score: number;
  qualified: boolean;
  /** A vote the platform or a filter rejected: it neither counts nor weighs. */
  rejected?: boolean;
}

export interface AggregateOptions {
  /** Default true. False reproduces the platform's equal weighting. */
  stakeWeighted?: boolean;
}

export interface Aggregate {
  /** Head-count majority (> 50 %) of the counted votes said qualified. */
  qualified: boolean;
  /** Mean over the qualified votes (Winsorized when there are ≥ 4); null when none qualified. */
  score: number | null;
  /** Votes that counted (not rejected, positive finite stake). */
  counted: number;
  /** Counted votes that said qualified. */
  qualifiedVotes: number;
  /** Votes dropped: rejected, or without a positive finite stake. */
  dropped: number;
  winsorized: boolean;
  stakeWeighted: boolean;
}

/** Winsorization kicks in at this many qualified votes. */
export const WINSORIZE_MIN_VOTES = 4;

function counts(v: Vote): boolean {
  return v.rejected !== true && Number.isFinite(v.stake) && v.stake > 0 && Number.isFinite(v.score);
}

/**
 * Replace the single lowest value by the second lowest and the single highest by the second
 * highest. Each value keeps its own weight: winsorizing moves a value, never a validator's stake.
 */
export function winsorize(values: readonly number[]): number[] {
  if (values.length < WINSORIZE_MIN_VOTES) return [...values];
  const order = values.map((_, i) => i).sort((a, b) => values[a]! - values[b]! || a - b);
  const out = [...values];
  const lo = order[0]!;
  const hi = order[order.length - 1]!;
  out[lo] = values[order[1]!]!;
  out[hi] = values[order[order.length - 2]!]!;
  return out;
}

export function aggregate(votes: readonly Vote[], opts: AggregateOptions = {}): Aggregate {
  const stakeWeighted = opts.stakeWeighted ?? true;
  const counted = votes.filter(counts);
  const yes = counted.filter((v) => v.qualified);
  // Strictly more than half of the heads; stake plays no part in the qualified flag.
  const qualified = counted.length > 0 && yes.length * 2 > counted.length;
  const base = {
    qualified,
    counted: counted.length,
    qualifiedVotes: yes.length,
    dropped: votes.length - counted.length,
    stakeWeighted,
  };
  if (yes.length === 0) return { ...base, score: null, winsorized: false };
  const winsorized = yes.length >= WINSORIZE_MIN_VOTES;
  const values = winsorize(yes.map((v) => v.score));
  let num = 0;
  let den = 0;
  for (let i = 0; i < yes.length; i++) {
    const w = stakeWeighted ? yes[i]!.stake : 1;
    num += w * values[i]!;
    den += w;
  }
  // A mean can drift a hair outside [min, max] in floating point; clamp it back.
  const lo = Math.min(...values);
  const hi = Math.max(...values);
  const score = Math.min(hi, Math.max(lo, num / den));
  return { ...base, score, winsorized };
}
