export { type EvaluateOptions, evaluate, newEvaluationId, resumeKeyOf, SHUTDOWN } from "./evaluate.js";
export type * from "./types.js";
export {
  backoffMs,
  buildVerdict,
  type Disposition,
  discardReason,
  dispose,
  MAX_ATTEMPTS,
  mergeUsage,
  rejectionVerdict,
  round4,
  scenarioVerdict,
} from "./verdict.js";
