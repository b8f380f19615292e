export { type Db, migrate, type OpenOptions, openDb } from "./db.js";
export {
  type EpisodeRow,
  type EpisodeRowStatus,
  EvaluationRepo,
  type EvaluationRow,
  type EvaluationStatus,
} from "./evaluations.js";
export { KvRepo } from "./kv.js";
export type { Migration } from "./migrations/index.js";
