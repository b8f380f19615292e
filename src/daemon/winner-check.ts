/**
 * The winner cross-checks (advisory: the platform's seat is adopted regardless). Pure.
 *
 * 1. Score (winner_state.py `derive_winner_state`): when the finalized epoch replaced the winner,
 *    re-derive its consensus from `submissions[]` — equal weights, the plain mean before spec 16
 *    and the Winsorized mean from it — and compare with the seat's score (tolerance 0.01).
 * 2. Decision (ours; INCENTIVE_MECHANISM.md v6.3): from the same votes, the seat before the epoch
 *    and the seat's age, decide "replaced" or "held" with the platform's takeover bar (δ(s) and
 *    the seat-age decay, src/consensus) and compare with the platform's `winner_replaced`.
 */
import {
  type Aggregate,
  aggregate,
  type Vote as ConsensusVote,
  type SeatDecision,
  seatAge,
  seatDecision,
  seatedEpochAfter,
} from "../consensus/index.js";
import type { WinnerCurrent } from "../platform/index.js";

/** winner_state.py `_DIVERGENCE_TOLERANCE`. */
export const DIVERGENCE_TOLERANCE = 0.01;
/** From this spec the server's consensus is the Winsorized mean (winner_state.py `_NOISE_AWARE_SEATING_MIN_SPEC`). */
export const NOISE_AWARE_SEATING_MIN_SPEC = 16;

/** The finalized epoch's consensus over `submissions[]`, as the platform aggregates it for that spec. */
export function epochConsensus(wc: WinnerCurrent, opts: { stakeWeighted?: boolean } = {}): Aggregate {
  const spec = wc.finalized_epoch?.spec_number ?? null;
  const votes: ConsensusVote[] = wc.submissions.map((s) => ({
    validator_hotkey: s.validator_hotkey,
    stake: s.validator_stake ?? 0,
    qualified: s.challenger_qualified === true,
    // A qualified vote without a score counts in the head count and adds nothing to the mean.
    score: s.challenger_score ?? Number.NaN,
    rejected: s.challenger_rejected === true,
  }));
  return aggregate(votes, {
    stakeWeighted: opts.stakeWeighted ?? false,
    winsorize: spec !== null && spec >= NOISE_AWARE_SEATING_MIN_SPEC,
  });
}

export type CrossCheck =
  | { kind: "agree"; epochId: number; local: number; server: number }
  | { kind: "diverge"; epochId: number; local: number; server: number; delta: number }
  | { kind: "not_applicable"; reason: "no_seat" | "winner_held" | "no_votes" | "no_server_score" };

/**
 * The score check. Only when the epoch replaced the winner (otherwise the seat's score comes from
 * an older epoch); no qualified score reads 0, as upstream's aggregate does.
 */
export function crossCheckWinner(wc: WinnerCurrent, opts: { stakeWeighted: boolean }): CrossCheck {
  const fin = wc.finalized_epoch;
  if (!wc.winner || !fin) return { kind: "not_applicable", reason: "no_seat" };
  if (!fin.winner_replaced) return { kind: "not_applicable", reason: "winner_held" };
  if (wc.winner.score === null) return { kind: "not_applicable", reason: "no_server_score" };
  const agg = epochConsensus(wc, opts);
  if (agg.counted === 0) return { kind: "not_applicable", reason: "no_votes" };
  const local = agg.score ?? 0;
  const server = wc.winner.score;
  const delta = Math.abs(local - server);
  const epochId = fin.challenge_epoch_id;
  return delta > DIVERGENCE_TOLERANCE
    ? { kind: "diverge", epochId, local, server, delta }
    : { kind: "agree", epochId, local, server };
}

// ---------------------------------------------------------------------------------------------
// The seat and its clock
// ---------------------------------------------------------------------------------------------

/** What the daemon knows of the seat after one /winner/current answer. */
export interface SeatClock {
  seat: { hotkey: string; score: number | null; seatedEpochId: number | null } | null;
  /** The finalized epoch that answer reported (null: none had finalized yet). */
  asOfEpochId: number | null;
}

/**
 * The seat after this answer, with its clock: the same hotkey keeps the clock it had (a
 * resubmission never resets it); a different hotkey that we saw take the seat at epoch E starts it
 * at E; otherwise the platform's `since_epoch_id`.
 */
export function seatClockOf(wc: WinnerCurrent, before: SeatClock | undefined): SeatClock {
  const fin = wc.finalized_epoch;
  const epochId = fin?.challenge_epoch_id ?? null;
  const w = wc.winner;
  if (!w) return { seat: null, asOfEpochId: epochId };
  let seatedEpochId = w.since_epoch_id;
  const prev = before?.seat ?? null;
  if (prev && prev.hotkey === w.hotkey && prev.seatedEpochId !== null) seatedEpochId = prev.seatedEpochId;
  else if (
    fin?.winner_replaced &&
    epochId !== null &&
    before !== undefined &&
    before.asOfEpochId !== null &&
    before.asOfEpochId === epochId - 1
  )
    seatedEpochId = seatedEpochAfter(
      prev && prev.seatedEpochId !== null ? { hotkey: prev.hotkey, seatedEpochId: prev.seatedEpochId } : null,
      { hotkey: w.hotkey },
      epochId,
    );
  return { seat: { hotkey: w.hotkey, score: w.score, seatedEpochId }, asOfEpochId: epochId };
}

export type SeatCheck =
  | {
      kind: "agree" | "diverge";
      epochId: number;
      /** The platform's decision. */
      replaced: boolean;
      /** Ours on the same inputs. */
      local: SeatDecision;
      consensus: { qualified: boolean; score: number };
      ageEpochs: number | null;
    }
  | {
      kind: "not_applicable";
      reason:
        | "no_finalized_epoch"
        | "no_spec"
        | "unknown_max_score"
        | "no_votes"
        | "seat_before_unknown"
        | "no_seat_score"
        | "no_seat_clock";
    };

/**
 * The decision check for the finalized epoch in `wc`, given the seat as the previous answer left
 * it (`before`). A held seat is the current one; a replaced seat must be the one we saw right
 * before (the previous answer reported epoch E − 1, or no finalized epoch at all with an empty
 * seat); otherwise we cannot know what the challenger faced.
 */
export function crossCheckSeat(
  wc: WinnerCurrent,
  before: SeatClock | undefined,
  opts: { maxScoreOf(spec: number): number | undefined },
): SeatCheck {
  const fin = wc.finalized_epoch;
  if (!fin) return { kind: "not_applicable", reason: "no_finalized_epoch" };
  if (fin.spec_number === null) return { kind: "not_applicable", reason: "no_spec" };
  const maxScore = opts.maxScoreOf(fin.spec_number);
  if (maxScore === undefined || !(maxScore > 0))
    return { kind: "not_applicable", reason: "unknown_max_score" };
  const agg = epochConsensus(wc);
  if (agg.counted === 0) return { kind: "not_applicable", reason: "no_votes" };
  const E = fin.challenge_epoch_id;
  let seat: SeatClock["seat"];
  if (!fin.winner_replaced) {
    // Held: the seat after is the seat before.
    seat = seatClockOf(wc, before).seat;
  } else if (
    before &&
    (before.asOfEpochId === E - 1 || (before.asOfEpochId === null && before.seat === null))
  ) {
    seat = before.seat;
  } else {
    return { kind: "not_applicable", reason: "seat_before_unknown" };
  }
  if (seat && seat.score === null) return { kind: "not_applicable", reason: "no_seat_score" };
  if (seat && seat.seatedEpochId === null) return { kind: "not_applicable", reason: "no_seat_clock" };
  const consensus = { qualified: agg.qualified, score: agg.score ?? 0 };
  const local = seatDecision({
    seat: seat ? { hotkey: seat.hotkey, score: seat.score!, seatedEpochId: seat.seatedEpochId! } : null,
    epochId: E,
    specNumber: fin.spec_number,
    maxScore,
    consensus,
  });
  return {
    kind: local.replaced === fin.winner_replaced ? "agree" : "diverge",
    epochId: E,
    replaced: fin.winner_replaced,
    local,
    consensus,
    ageEpochs: seat ? seatAge(E, seat.seatedEpochId!) : null,
  };
}
