export { backupDatabase } from "./backup.js";
export { type Db, durably, migrate, type OpenOptions, openDb } from "./db.js";
export {
  type EpisodeRow,
  type EpisodeRowStatus,
  EvaluationRepo,
  type EvaluationRow,
  type EvaluationStatus,
} from "./evaluations.js";
export { EvidenceIndex, type EvidenceListing } from "./evidence-index.js";
export { KvRepo } from "./kv.js";
export {
  type LogUpload,
  type LogUploadKind,
  LogUploadRepo,
  type LogUploadState,
} from "./log-uploads.js";
export { MARK, PlatformMarksRepo } from "./marks.js";
export { MIGRATIONS, type Migration } from "./migrations/index.js";
export {
  adoptUnclaimedRows,
  type LastNetwork,
  lastNetwork,
  type NetworkId,
  NO_NETWORK,
  networkOf,
  recordLastNetwork,
  UNCLAIMED_NETWORK,
  UNKNOWN_NETWORK,
} from "./networks.js";
export { type EnqueueVerdict, VerdictOutboxRepo } from "./outbox.js";
export { ReceiptRepo } from "./receipts.js";
export { type ScoredEpoch, ScoredEpochRepo } from "./scored-epochs.js";
export {
  type WeightAttempt,
  type WeightAttemptFinish,
  type WeightAttemptOutcome,
  type WeightAttemptStart,
  WeightsRepo,
} from "./weights.js";
export { type CachedWinner, WINNER_FALLBACK_TTL_MS, WinnerCacheRepo } from "./winner-cache.js";
