/**
 * The daemon's public face: `Daemon` (start/stop), the log tap for per-evaluation archives, and the
 * pure decisions of its loops (exported for tests and the status page). See ./README.md.
 */
export { Daemon, type DaemonOptions } from "./daemon.js";
export {
  discardRetryDelayMs,
  type EpochFacts,
  type EpochPlan,
  evalIdOf,
  type ProgressContext,
  ProgressTracker,
  packFetchRejection,
  planEpoch,
  progressStateOf,
} from "./decide.js";
export { ALARM } from "./eval-loop.js";
export { heartbeatInfo } from "./heartbeat.js";
export {
  type HeldStart,
  HOLD_RECHECK_MS,
  holdMessage,
  type StartOrHoldOptions,
  startOrHold,
} from "./hold.js";
export {
  type ArchiveEntry,
  type BuiltArchive,
  buildArchive,
  collectFiles,
  LogRecording,
  LogTap,
  METER_ROWS_MAX,
  planTruncation,
  upstreamEpisodeFiles,
  upstreamMeterJson,
  upstreamPolicyLog,
} from "./log-archive.js";
export { archiveEvaluation, LogUploader, MAX_UPLOAD_ATTEMPTS, REPLAY_WINDOW_MS } from "./log-uploads.js";
export { Loop, type LoopSpec, loopBackoffMs } from "./loop.js";
export { isKnownNetwork, networkIdFor } from "./network.js";
export {
  loadPipeline,
  type OpenedEnvironment,
  type PackEvaluation,
  type PackEvaluationRequest,
  type Pipeline,
} from "./pipeline.js";
export { assertSubnetRules, benchFor, evaluatesOnSimulator } from "./subnet-rules.js";
export { type DaemonTiming, DEFAULT_TIMING, UPSTREAM_OWNER_UID } from "./timing.js";
export {
  BLOCK_TIME_MS,
  DEFAULT_WEIGHTS_BACKOFF,
  nextWeightsDelayMs,
  planWeights,
  type WeightsBackoff,
  type WeightsPlan,
  type WeightsPlanInput,
  type WeightsTickOutcome,
  type WinnerView,
} from "./weights-plan.js";
export {
  type CrossCheck,
  crossCheckSeat,
  crossCheckWinner,
  DIVERGENCE_TOLERANCE,
  epochConsensus,
  NOISE_AWARE_SEATING_MIN_SPEC,
  type SeatCheck,
  type SeatClock,
  seatClockOf,
} from "./winner-check.js";
export { WinnerRefresher, type WinnerRefresherDeps } from "./winner-loop.js";
