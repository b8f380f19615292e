import type { Migration } from "./migration.js";

/**
 * The platform protocol's durable state. Times are unix ms (wall clock): they must survive restarts.
 * - platform_scored_epochs: a challenge epoch this validator has judged is never evaluated again.
 * - platform_outbox: verdicts to POST, re-sent with backoff until delivered or the epoch closes.
 *   `payload` is the unsigned verdict; signatures are made per attempt (the server allows ±5 min).
 * - platform_winner_cache: the last /winner/current answer, trusted for 24 h when the platform is down.
 * - platform_log_uploads: per-evaluation log archives not yet uploaded (replayed at start).
 * - platform_marks: telemetry instants (heartbeat sent, last eval, last set_weights).
 */
export const m005Platform: Migration = {
  version: 5,
  name: "platform",
  up: `
    CREATE TABLE platform_scored_epochs (
      epoch_id INTEGER NOT NULL,
      validator_hotkey TEXT NOT NULL,
      challenger_hotkey TEXT,
      pack_hash TEXT,
      spec_number INTEGER,
      score REAL,
      qualified INTEGER,
      rejected INTEGER,
      scored_at INTEGER NOT NULL,
      PRIMARY KEY (epoch_id, validator_hotkey)
    );

    CREATE TABLE platform_outbox (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      epoch_id INTEGER NOT NULL,
      validator_hotkey TEXT NOT NULL,
      payload TEXT NOT NULL,
      state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'abandoned')),
      attempts INTEGER NOT NULL DEFAULT 0,
      next_attempt_at INTEGER NOT NULL,
      created_at INTEGER NOT NULL,
      last_attempt_at INTEGER,
      last_status INTEGER,
      last_error TEXT,
      outcome TEXT CHECK (outcome IS NULL OR outcome IN
        ('delivered', 'duplicate', 'finalized', 'rejected', 'expired', 'epoch_closed')),
      reason TEXT,
      delivered_at INTEGER,
      abandoned_at INTEGER,
      UNIQUE (epoch_id, validator_hotkey)
    );
    CREATE INDEX platform_outbox_due ON platform_outbox (state, next_attempt_at);

    CREATE TABLE platform_winner_cache (
      id INTEGER PRIMARY KEY CHECK (id = 1),
      payload TEXT NOT NULL,
      fetched_at INTEGER NOT NULL
    );

    CREATE TABLE platform_log_uploads (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      kind TEXT NOT NULL CHECK (kind IN ('eval', 'cycle')),
      eval_id TEXT NOT NULL,
      epoch_id INTEGER,
      meta TEXT NOT NULL,
      archive_path TEXT NOT NULL,
      size_bytes INTEGER NOT NULL,
      state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'uploaded', 'abandoned')),
      attempts INTEGER NOT NULL DEFAULT 0,
      last_error TEXT,
      created_at INTEGER NOT NULL,
      uploaded_at INTEGER,
      UNIQUE (kind, eval_id)
    );
    CREATE INDEX platform_log_uploads_pending ON platform_log_uploads (state, created_at);

    CREATE TABLE platform_marks (
      name TEXT PRIMARY KEY,
      at INTEGER NOT NULL,
      detail TEXT
    );
  `,
};
