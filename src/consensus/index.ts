/** Pure consensus core: aggregation of votes, the takeover margin, the weights vector. No I/O. */
export {
  type Aggregate,
  type AggregateOptions,
  aggregate,
  type Vote,
  WINSORIZE_MIN_VOTES,
  winsorize,
} from "./aggregate.js";
export {
  TAKEOVER_BASE_DELTA,
  TAKEOVER_TAPER_FROM,
  TAKEOVER_TAPER_SPEC,
  type Takeover,
  takeover,
  takeoverDelta,
  takeoverThreshold,
} from "./takeover.js";
export {
  DEFAULT_MAX_WINNER_CACHE_AGE_MS,
  type WeightsInput,
  type WeightsReason,
  type WeightsVector,
  weightsVector,
} from "./weights.js";
