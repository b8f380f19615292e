/**
 * Aggregation of validator votes on one pack, as the platform finalizes an epoch and as upstream's
 * winner_state.py `aggregate_challenger_score` re-derives it (DESIGN.md "Verdict and consensus").
 * Pure: no I/O, no clock. Inputs are validated by the caller at the boundary.
 *
 * Upstream's rule: a vote counts when it is not rejected and its frozen stake is positive (stake
 * only decides eligibility); qualified = strictly more than half of the counted votes said so, by
 * head count; score = the mean of the qualified votes' scores — plain before spec 16, Winsorized
 * from spec 16 (the caller says which). A qualified vote without a usable score still counts in
 * the head count but adds nothing to the mean. Stake weighting of the mean is an opt-in of ours.
 */

export interface Vote {
  validator_hotkey: string;
  /** The validator's stake, frozen when the vote was cast (any unit; only ratios matter). */
  stake: number;
  /** NaN (or any non-finite value) when the vote carries no usable score. */
  score: number;
  qualified: boolean;
  /** A vote the platform or a filter rejected: it neither counts nor weighs. */
  rejected?: boolean;
}

export interface AggregateOptions {
  /** Default false: every vote weighs the same, as the platform and upstream aggregate. */
  stakeWeighted?: boolean;
  /**
   * Default true: the Winsorized mean from 4 scores on (spec ≥ 16). False: the plain mean, as the
   * platform aggregated epochs before spec 16.
   */
  winsorize?: boolean;
}

export interface Aggregate {
  /** Head-count majority (> 50 %) of the counted votes said qualified. */
  qualified: boolean;
  /** Mean over the qualified votes' scores; null when no qualified vote carries a score. */
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

/** Winsorization kicks in at this many qualified scores. */
export const WINSORIZE_MIN_VOTES = 4;

function counts(v: Vote): boolean {
  return v.rejected !== true && Number.isFinite(v.stake) && v.stake > 0;
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
  const stakeWeighted = opts.stakeWeighted ?? false;
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
  const scored = yes.filter((v) => Number.isFinite(v.score));
  if (scored.length === 0) return { ...base, score: null, winsorized: false };
  const winsorized = (opts.winsorize ?? true) && scored.length >= WINSORIZE_MIN_VOTES;
  const raw = scored.map((v) => v.score);
  const values = winsorized ? winsorize(raw) : raw;
  let num = 0;
  let den = 0;
  for (let i = 0; i < scored.length; i++) {
    const w = stakeWeighted ? scored[i]!.stake : 1;
    num += w * values[i]!;
    den += w;
  }
  // A mean can drift a hair outside [min, max] in floating point; clamp it back.
  const lo = Math.min(...values);
  const hi = Math.max(...values);
  const score = Math.min(hi, Math.max(lo, num / den));
  return { ...base, score, winsorized };
}
