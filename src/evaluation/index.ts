export { type EvaluateOptions, evaluate, newEvaluationId, resumeKeyOf, SHUTDOWN } from "./evaluate.js";
export { outcomeOf } from "./outcome.js";
export {
  evaluatePack,
  type PackEvaluation,
  type PackEvaluationRequest,
  resolveRequest,
} from "./pack-evaluation.js";
export {
  fmtSecs,
  fmtUsd,
  type LeaderboardEntry,
  leaderboard,
  ProgressView,
  sessionCosts,
  table,
  verdictTable,
} from "./render.js";
export { renderReport } from "./report.js";
export { toScoreVerdict } from "./score-verdict.js";
export type * from "./types.js";
export {
  backoffMs,
  buildVerdict,
  chargedToPack,
  type Disposition,
  discardReason,
  dispose,
  followsThePack,
  looksLikeProviderFailure,
  MAX_ATTEMPTS,
  mergeUsage,
  PROVIDER_HANG_S,
  providerBilled,
  providerFailureMessage,
  rejectionVerdict,
  retryReason,
  scenarioVerdict,
  TRUNCATED,
} from "./verdict.js";
