/** Pure consensus core: aggregation of votes, the takeover bar, the weights vector. No I/O. */
export {
  type Aggregate,
  type AggregateOptions,
  aggregate,
  type Vote,
  WINSORIZE_MIN_VOTES,
  winsorize,
} from "./aggregate.js";
export {
  SEAT_DECAY_END_EPOCHS,
  SEAT_GRACE_EPOCHS,
  type SeatDecision,
  type SeatDecisionInput,
  seatAge,
  seatDecayFactor,
  seatDecision,
  seatedEpochAfter,
  TAKEOVER_BASE_DELTA,
  TAKEOVER_TAPER_FROM,
  TAKEOVER_TAPER_SPEC,
  type Takeover,
  TERMINAL_HANDICAP,
  takeover,
  takeoverDelta,
  takeoverThreshold,
} from "./takeover.js";
export {
  DEFAULT_MAX_WINNER_CACHE_AGE_MS,
  float32PairwiseSum,
  isSeated,
  needsOwnerRow,
  ownerRowWeights,
  type WeightEntry,
  type WeightsInput,
  type WeightsReason,
  type WeightsVector,
  weightsVector,
} from "./weights.js";
