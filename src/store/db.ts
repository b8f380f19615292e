/**
 * SQLite via better-sqlite3: one file, WAL mode, numbered migrations applied at open.
 * Synchronous by design: every statement is a short local write; nothing here awaits.
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import { InfraError } from "../errors.js";
import type { Logger } from "../log.js";
import { MIGRATIONS, type Migration } from "./migrations/index.js";

export type Db = Database.Database;

export interface OpenOptions {
  log?: Logger;
  /** For tests of the migration runner; production uses the project's list. */
  migrations?: readonly Migration[];
  readonly?: boolean;
}

export function openDb(path: string, opts: OpenOptions = {}): Db {
  if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
  let db: Db;
  try {
    db = new Database(path, { readonly: opts.readonly ?? false, timeout: 5000 });
  } catch (err) {
    throw new InfraError("db_open_failed", `cannot open database ${path}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  if (!opts.readonly) {
    db.pragma("journal_mode = WAL");
    // NORMAL is durable against process crashes in WAL mode (only an OS crash or power loss can lose
    // the last commits); the writes that must survive those too go through `durably`.
    db.pragma("synchronous = NORMAL");
    db.pragma("foreign_keys = ON");
    migrate(db, opts.migrations ?? MIGRATIONS, opts.log);
  }
  return db;
}

/**
 * Run `fn` as one transaction committed with `synchronous = FULL`: the WAL is fsynced before the
 * commit returns, so what `fn` wrote survives an OS crash or a power cut, not only a process crash.
 * For the few writes that are votes (the verdict outbox, the scored-epoch mark, a finished
 * evaluation's verdict); everything else keeps NORMAL. Inside a caller's transaction it only runs
 * `fn`: the outer commit decides (wrap the outer one instead).
 */
export function durably<T>(db: Db, fn: () => T): T {
  if (db.inTransaction) return fn();
  const before = db.pragma("synchronous", { simple: true }) as number;
  db.pragma("synchronous = FULL");
  try {
    return db.transaction(fn)();
  } finally {
    db.pragma(`synchronous = ${before}`);
  }
}

export function migrate(db: Db, migrations: readonly Migration[], log?: Logger): number {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
  )`);
  const applied = new Set(
    (db.prepare("SELECT version FROM schema_migrations").all() as { version: number }[]).map(
      (r) => r.version,
    ),
  );
  const sorted = [...migrations].sort((a, b) => a.version - b.version);
  for (let k = 1; k < sorted.length; k++) {
    if (sorted[k]!.version === sorted[k - 1]!.version) {
      throw new InfraError("db_migration_conflict", `two migrations share version ${sorted[k]!.version}`);
    }
  }
  const newest = sorted.at(-1)?.version ?? 0;
  const maxApplied = Math.max(0, ...applied);
  if (maxApplied > newest) {
    throw new InfraError(
      "db_newer_than_code",
      `database schema version ${maxApplied} is newer than this validator (${newest}); upgrade the validator`,
      { retryable: false },
    );
  }
  let count = 0;
  for (const m of sorted) {
    if (applied.has(m.version)) continue;
    db.transaction(() => {
      if (typeof m.up === "string") db.exec(m.up);
      else m.up(db);
      db.prepare("INSERT INTO schema_migrations (version, name) VALUES (?, ?)").run(m.version, m.name);
    })();
    log?.info({ version: m.version, name: m.name }, "db.migrated");
    count++;
  }
  return count;
}
