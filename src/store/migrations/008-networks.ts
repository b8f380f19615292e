import type { Migration } from "./migration.js";

/**
 * Every row the daemon keeps about a network carries that network (its genesis hash): scored
 * epochs, the outbox, log uploads, telemetry marks, the winner cache, weights attempts and the
 * epochs' evaluations (`eval`'s own evaluations belong to none: NULL). Keys that were one epoch per
 * hotkey become one epoch per hotkey per network.
 *
 * Rows from before carry no network, so (src/store/README.md, "Networks"):
 * - a verdict made on the built-in suite (spec 0: only ever posted on a local network, i.e. a
 *   rehearsal) → 'unknown', read by no network;
 * - the other scored epochs, outbox entries, log uploads and epoch evaluations → 'unclaimed', adopted
 *   by the first daemon that starts on finney or test (adoptUnclaimedRows);
 * - marks, the winner cache and weights attempts → 'unknown': nothing tells a rehearsal's from a real
 *   network's, and each is replaced by the next heartbeat, refresh or attempt.
 */
export const m008Networks: Migration = {
  version: 8,
  name: "networks",
  up: `
    CREATE TABLE scored_epochs_by_network (
      network TEXT NOT NULL,
      epoch_id INTEGER NOT NULL,
      validator_hotkey TEXT NOT NULL,
      challenger_hotkey TEXT,
      pack_hash TEXT,
      spec_number INTEGER,
      score REAL,
      qualified INTEGER,
      rejected INTEGER,
      scored_at INTEGER NOT NULL,
      PRIMARY KEY (network, epoch_id, validator_hotkey)
    );
    INSERT INTO scored_epochs_by_network
      SELECT CASE WHEN spec_number = 0 THEN 'unknown' ELSE 'unclaimed' END, epoch_id, validator_hotkey,
        challenger_hotkey, pack_hash, spec_number, score, qualified, rejected, scored_at
      FROM platform_scored_epochs;
    DROP TABLE platform_scored_epochs;
    ALTER TABLE scored_epochs_by_network RENAME TO platform_scored_epochs;

    CREATE TABLE outbox_by_network (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      network TEXT NOT NULL,
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
      UNIQUE (network, epoch_id, validator_hotkey)
    );
    INSERT INTO outbox_by_network
      SELECT id, CASE WHEN json_extract(payload, '$.spec_number') = 0 THEN 'unknown' ELSE 'unclaimed' END,
        epoch_id, validator_hotkey, payload, state, attempts, next_attempt_at, created_at, last_attempt_at,
        last_status, last_error, outcome, reason, delivered_at, abandoned_at
      FROM platform_outbox;
    DROP TABLE platform_outbox;
    ALTER TABLE outbox_by_network RENAME TO platform_outbox;
    CREATE INDEX platform_outbox_due ON platform_outbox (network, state, next_attempt_at);

    CREATE TABLE winner_cache_by_network (
      network TEXT PRIMARY KEY,
      payload TEXT NOT NULL,
      fetched_at INTEGER NOT NULL
    );
    INSERT INTO winner_cache_by_network SELECT 'unknown', payload, fetched_at FROM platform_winner_cache;
    DROP TABLE platform_winner_cache;
    ALTER TABLE winner_cache_by_network RENAME TO platform_winner_cache;

    CREATE TABLE marks_by_network (
      network TEXT NOT NULL,
      name TEXT NOT NULL,
      at INTEGER NOT NULL,
      detail TEXT,
      PRIMARY KEY (network, name)
    );
    INSERT INTO marks_by_network SELECT 'unknown', name, at, detail FROM platform_marks;
    DROP TABLE platform_marks;
    ALTER TABLE marks_by_network RENAME TO platform_marks;

    ALTER TABLE platform_log_uploads ADD COLUMN network TEXT NOT NULL DEFAULT 'unclaimed';
    UPDATE platform_log_uploads SET network = 'unknown' WHERE json_extract(meta, '$.spec_number') = 0;
    DROP INDEX platform_log_uploads_pending;
    CREATE INDEX platform_log_uploads_pending ON platform_log_uploads (network, state, created_at);

    ALTER TABLE weight_attempts ADD COLUMN network TEXT NOT NULL DEFAULT 'unknown';
    DROP INDEX weight_attempts_at;
    DROP INDEX weight_attempts_outcome;
    CREATE INDEX weight_attempts_at ON weight_attempts (network, netuid, at);
    CREATE INDEX weight_attempts_outcome ON weight_attempts (network, netuid, outcome, at);

    ALTER TABLE evaluations ADD COLUMN network TEXT;
    UPDATE evaluations SET network = CASE WHEN spec = 0 THEN 'unknown' ELSE 'unclaimed' END
      WHERE source = 'epoch';
    CREATE INDEX evaluations_network ON evaluations (network, status, created_at);
  `,
};
