/**
 * The weight loop's pure core: from a chain snapshot and the cached winner to the u16 vector to
 * emit (or the reason not to emit now), and how long to wait after each kind of outcome.
 *
 * Version key: we send the subnet's own WeightsVersionKey read from the snapshot (the chain
 * accepts any key ≥ it, so its own value always passes and follows the subnet owner's bumps
 * without a release). WEIGHTS_VERSION_KEY overrides it for operators who must send another value.
 */
import type { PreflightProblem, SubnetSnapshot, WeightsErrorKind } from "../chain/index.js";
import { convertWeightsForEmit, preflightCheck } from "../chain/index.js";
import { type WeightEntry, type WeightsReason, weightsVector } from "../consensus/index.js";
import type { CachedWinner } from "../store/index.js";

/** Seconds per block on subtensor, to turn "blocks until allowed" into a wait. */
export const BLOCK_TIME_MS = 12_000;

export interface WeightsPlanInput {
  snapshot: SubnetSnapshot;
  /** Our hotkey (ss58). */
  hotkey: string;
  /** The cached /winner/current answer; undefined when there never was one (→ no seat). */
  cached: CachedWinner | undefined;
  /**
   * The subnet owner's stored weight row at the snapshot's block; undefined when it was not read
   * (a seat needs none) or could not be read. Copied when there is no seat.
   */
  ownerRow?: readonly WeightEntry[] | undefined;
  /** WEIGHTS_VERSION_KEY; undefined → the snapshot's WeightsVersionKey. */
  versionKeyOverride?: number;
  /** The winner cache's trust horizon (WINNER_CACHE_TTL_S). */
  maxCacheAgeMs: number;
}

export interface WinnerView {
  hotkey: string;
  /** The uid the platform gives the seat: the one weighted (as upstream). Null: not seated. */
  uid: number | null;
  /** The uid the chain gives this hotkey now, for the logs (undefined: it holds none). */
  chainUid: number | undefined;
}

export type WeightsPlan =
  | {
      kind: "set";
      uids: number[];
      weights: number[];
      versionKey: number;
      reason: WeightsReason;
      burn: boolean;
      myUid: number;
      winner: WinnerView | null;
    }
  /** The rate limit has not passed since our last weights: wait, nothing to send. */
  | { kind: "wait"; blocksUntilAllowed: number; versionKey: number; reason: WeightsReason }
  /** Something only the operator (or the subnet owner) can fix: alarm, back off, check again. */
  | {
      kind: "blocked";
      problems: PreflightProblem[];
      versionKey: number;
      reason: WeightsReason | null;
      uids: number[];
      weights: number[];
    };

export function planWeights(input: WeightsPlanInput): WeightsPlan {
  const snap = input.snapshot;
  const versionKey = input.versionKeyOverride ?? snap.weightsVersionKey;
  const seat = input.cached?.winner.winner ?? null;
  let winner: WinnerView | null = null;
  if (seat) {
    const idx = snap.neurons.findIndex((n) => n.hotkey === seat.hotkey);
    winner = { hotkey: seat.hotkey, uid: seat.uid, chainUid: idx >= 0 ? idx : undefined };
  }
  const base = {
    seat: seat ? { hotkey: seat.hotkey, uid: seat.uid } : null,
    // No cache at all counts as infinitely old.
    cacheAgeMs: input.cached ? input.cached.ageMs : Number.POSITIVE_INFINITY,
    maxCacheAgeMs: input.maxCacheAgeMs,
    ownerRow: input.ownerRow,
    neuronCount: snap.neurons.length,
  };
  let vector: ReturnType<typeof weightsVector>;
  if (snap.ownerUid !== undefined) {
    vector = weightsVector({ ...base, ownerUid: snap.ownerUid });
  } else {
    // Without an owner uid there is neither a row to copy nor a burn target; a fresh seat can still be paid.
    const trial = weightsVector({ ...base, ownerRow: undefined, ownerUid: 0 });
    if (trial.reason !== "winner")
      return {
        kind: "blocked",
        problems: [
          {
            code: "not_registered",
            kind: "permanent",
            message: `the subnet owner's hotkey holds no uid on subnet ${snap.netuid}: no burn target (${trial.reason})`,
          },
        ],
        versionKey,
        reason: trial.reason,
        uids: [],
        weights: [],
      };
    vector = { ...trial, burn: false };
  }
  // A uid the platform gives that no u16 can hold: nothing to send (upstream's call would fail too).
  const notU16 = vector.uids.find((u) => !Number.isInteger(u) || u < 0 || u > 0xffff);
  if (notU16 !== undefined)
    return {
      kind: "blocked",
      problems: [
        {
          code: "weights_invalid",
          kind: "permanent",
          message: `the platform's winner uid ${notU16} is not a u16`,
        },
      ],
      versionKey,
      reason: vector.reason,
      uids: [],
      weights: [],
    };
  const emit = convertWeightsForEmit(vector.uids, vector.weights);
  const pre = preflightCheck(snap, {
    hotkey: input.hotkey,
    uids: emit.uids,
    weights: emit.weights,
    versionKey,
  });
  const permanent = pre.problems.filter((p) => p.kind === "permanent");
  if (permanent.length > 0)
    return {
      kind: "blocked",
      problems: permanent,
      versionKey,
      reason: vector.reason,
      uids: emit.uids,
      weights: emit.weights,
    };
  if (pre.blocksUntilAllowed > 0)
    return { kind: "wait", blocksUntilAllowed: pre.blocksUntilAllowed, versionKey, reason: vector.reason };
  return {
    kind: "set",
    uids: emit.uids,
    weights: emit.weights,
    versionKey,
    reason: vector.reason,
    burn: vector.burn,
    myUid: pre.uid!,
    winner,
  };
}

/** What a weight tick ended with, for scheduling the next one. */
export type WeightsTickOutcome =
  | { kind: "included" }
  | { kind: "wait"; blocksUntilAllowed: number }
  | { kind: "failed"; errorKind: WeightsErrorKind }
  | { kind: "blocked" };

export interface WeightsBackoff {
  /** The loop's cadence (WEIGHTS_INTERVAL_S). */
  intervalMs: number;
  /** First retry after a transient failure. */
  transientBaseMs: number;
  /** Longest pause between checks while an operator-side problem persists. */
  permanentMaxMs: number;
}

export const DEFAULT_WEIGHTS_BACKOFF: Omit<WeightsBackoff, "intervalMs"> = {
  transientBaseMs: 5_000,
  permanentMaxMs: 10 * 60_000,
};

/**
 * Delay before the next weight tick. `failures` counts consecutive ticks with the same kind of
 * failure (≥ 1 when the outcome is a failure).
 * - included: the next check at the normal cadence (the rate limit then says how long to wait);
 * - wait: until the window opens (a block's time per block left), never longer than the cadence;
 * - transient failure: 5 s × 2^(n−1), at most the cadence, so a window is never skipped;
 * - rate_limited (SettingWeightsTooFast): the chain saw weights we did not: one cadence, and the
 *   next snapshot's LastUpdate says when the window opens;
 * - permanent / blocked: cadence × 2^(n−1), at most 10 min (still checking: the operator may fix it).
 */
export function nextWeightsDelayMs(outcome: WeightsTickOutcome, failures: number, b: WeightsBackoff): number {
  const n = Math.max(1, Math.floor(failures));
  switch (outcome.kind) {
    case "included":
      return b.intervalMs;
    case "wait":
      return Math.min(b.intervalMs, Math.max(1_000, outcome.blocksUntilAllowed * BLOCK_TIME_MS));
    case "failed":
      if (outcome.errorKind === "transient")
        return Math.min(b.intervalMs, b.transientBaseMs * 2 ** Math.min(n - 1, 20));
      if (outcome.errorKind === "rate_limited") return b.intervalMs;
      return permanentDelay(n, b);
    case "blocked":
      return permanentDelay(n, b);
  }
}

function permanentDelay(n: number, b: WeightsBackoff): number {
  const cap = Math.max(b.intervalMs, b.permanentMaxMs);
  return Math.min(cap, b.intervalMs * 2 ** Math.min(n - 1, 20));
}
