export { type Db, durably, migrate, type OpenOptions, openDb } from "./db.js";
export {
  type EpisodeRow,
  type EpisodeRowStatus,
  EvaluationRepo,
  type EvaluationRow,
  type EvaluationStatus,
} from "./evaluations.js";
export { KvRepo } from "./kv.js";
export type { Migration } from "./migrations/index.js";
export {
  type CachedWinner,
  type EnqueueVerdict,
  type LogUpload,
  type LogUploadKind,
  LogUploadRepo,
  type LogUploadState,
  MARK,
  PlatformMarksRepo,
  type ScoredEpoch,
  ScoredEpochRepo,
  VerdictOutboxRepo,
  WINNER_FALLBACK_TTL_MS,
  WinnerCacheRepo,
} from "./platform.js";
export { ReceiptRepo } from "./receipts.js";
export {
  type WeightAttempt,
  type WeightAttemptFinish,
  type WeightAttemptOutcome,
  type WeightAttemptStart,
  WeightsRepo,
} from "./weights.js";
