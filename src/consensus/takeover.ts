/**
 * The takeover rule the platform applies when it finalizes an epoch (INCENTIVE_MECHANISM.md v6.3,
 * "Winner Protection"): a qualified challenger takes the seat only when
 *
 *   challenger > bar,   bar = w · (1 + δ(s)·f(age) − H·(1 − f(age))),   s = w / maxScore
 *
 * - δ(s), the protection premium: 3 % up to s = 0.70, falling linearly to 0 at s = 1 (so a perfect
 *   score can always take the seat from an imperfect incumbent); a flat 3 % before spec 16.
 * - f(age), the seat-age factor (anti-camping): 1 for a seat at most 5 epochs old (grace), then
 *   linear to 0 at 40 epochs (~3 days), 0 after. Past grace the bar sheds the premium, crosses the
 *   incumbent's own score at f = H/(δ+H) and ends at the terminal handicap w · (1 − H), H = 3 %:
 *   a fully aged seat is taken by a challenger scoring up to 3 % under it.
 * - age: epochs since the current hotkey took the seat. Only a different hotkey seating resets the
 *   clock; the seated winner's own better pack raises w but keeps the clock (see seatedEpochAfter).
 *
 * Pure. The platform's code is the source of truth (its `seat-decay.ts` is not public); the
 * published document is what this follows, and the constants are its named parameters.
 */

export const TAKEOVER_BASE_DELTA = 0.03;
export const TAKEOVER_TAPER_FROM = 0.7;
/** First spec number with the tapering δ(s). */
export const TAKEOVER_TAPER_SPEC = 16;
/** Seat-decay GRACE_EPOCHS: up to this age the bar keeps its full premium. */
export const SEAT_GRACE_EPOCHS = 5;
/** Seat-decay DECAY_END_EPOCHS: from this age on the bar sits at the terminal handicap. */
export const SEAT_DECAY_END_EPOCHS = 40;
/** TERMINAL_HANDICAP H: a fully aged seat's bar is w · (1 − H). */
export const TERMINAL_HANDICAP = 0.03;

/** The margin δ for an incumbent at fraction s of the maximum score. */
export function takeoverDelta(s: number, specNumber: number): number {
  if (specNumber < TAKEOVER_TAPER_SPEC) return TAKEOVER_BASE_DELTA;
  if (s <= TAKEOVER_TAPER_FROM) return TAKEOVER_BASE_DELTA;
  if (s >= 1) return 0;
  return (TAKEOVER_BASE_DELTA * (1 - s)) / (1 - TAKEOVER_TAPER_FROM);
}

/**
 * f(age): 1 through the grace period, linear from 1 at GRACE to 0 at DECAY_END, 0 beyond. A
 * negative or non-finite age (a seat newer than the epoch, a broken input) counts as a fresh seat.
 */
export function seatDecayFactor(ageEpochs: number): number {
  if (!(ageEpochs > SEAT_GRACE_EPOCHS)) return 1;
  if (ageEpochs >= SEAT_DECAY_END_EPOCHS) return 0;
  return (SEAT_DECAY_END_EPOCHS - ageEpochs) / (SEAT_DECAY_END_EPOCHS - SEAT_GRACE_EPOCHS);
}

/** Epochs between the seat's seating and the epoch being finalized (never negative). */
export function seatAge(epochId: number, seatedEpochId: number): number {
  return Math.max(0, epochId - seatedEpochId);
}

/**
 * The seat clock after an epoch: a different hotkey taking the seat starts it at that epoch; the
 * same hotkey keeps its clock (a resubmission never resets it); an empty seat has none.
 */
export function seatedEpochAfter(
  before: { hotkey: string; seatedEpochId: number } | null,
  after: { hotkey: string } | null,
  epochId: number,
): number | null {
  if (!after) return null;
  if (before && before.hotkey === after.hotkey) return before.seatedEpochId;
  return epochId;
}

export interface Takeover {
  takesOver: boolean;
  /** The score the challenger had to beat (strictly). */
  threshold: number;
  /** δ(s), before the seat-age factor. */
  delta: number;
  /** s = incumbent / maxScore. */
  s: number;
  /** f(age): 1 = full premium, 0 = terminal handicap. */
  decay: number;
  ageEpochs: number;
}

/**
 * The bar a challenger must beat. `ageEpochs` defaults to 0 (a fresh seat: the bar of the
 * document's v6.1, w · (1 + δ(s))).
 */
export function takeoverThreshold(
  incumbent: number,
  maxScore: number,
  specNumber: number,
  ageEpochs = 0,
): Takeover {
  if (!(maxScore > 0)) throw new RangeError(`maxScore must be positive, got ${maxScore}`);
  const s = incumbent / maxScore;
  const delta = takeoverDelta(s, specNumber);
  const decay = seatDecayFactor(ageEpochs);
  // Fresh seat: exactly w + w·δ. Written as w + w·m rather than w·(1+m): near s = 1 the margin is
  // below an ulp of w and must not round the threshold up to a perfect score.
  const margin = decay === 1 ? delta : delta * decay - TERMINAL_HANDICAP * (1 - decay);
  return { takesOver: false, threshold: incumbent + incumbent * margin, delta, s, decay, ageEpochs };
}

/** Does the challenger's score take the seat from the incumbent's? Strict >. */
export function takeover(
  challenger: number,
  incumbent: number,
  maxScore: number,
  specNumber: number,
  ageEpochs = 0,
): Takeover {
  const t = takeoverThreshold(incumbent, maxScore, specNumber, ageEpochs);
  return { ...t, takesOver: challenger > t.threshold };
}

export interface SeatDecisionInput {
  /** The seat before this epoch; null when nobody held it. */
  seat: { hotkey: string; score: number; seatedEpochId: number } | null;
  epochId: number;
  specNumber: number;
  maxScore: number;
  /** The epoch's consensus on the challenger. */
  consensus: { qualified: boolean; score: number };
}

export interface SeatDecision {
  replaced: boolean;
  /** The bar the challenger had to beat; null for an empty seat (any qualified challenger seats). */
  bar: Takeover | null;
}

/**
 * The finalize decision (INCENTIVE_MECHANISM.md "Challenge Epoch Lifecycle"): an empty seat goes
 * to a qualified challenger; a held seat to a qualified challenger above the age-decayed bar.
 */
export function seatDecision(i: SeatDecisionInput): SeatDecision {
  if (!i.seat) return { replaced: i.consensus.qualified, bar: null };
  const bar = takeover(
    i.consensus.score,
    i.seat.score,
    i.maxScore,
    i.specNumber,
    seatAge(i.epochId, i.seat.seatedEpochId),
  );
  return { replaced: i.consensus.qualified && bar.takesOver, bar };
}
