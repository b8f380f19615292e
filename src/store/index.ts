export { type Db, migrate, type OpenOptions, openDb } from "./db.js";
export { KvRepo } from "./kv.js";
export type { Migration } from "./migrations/index.js";
