import type { Migration } from "./migration.js";

/**
 * Evaluations (one pack over one scenario set) and their episodes (one row per attempt).
 * A row is written when work starts and updated when it ends, so a killed process can tell
 * finished work (kept) from unfinished work (re-run) on restart.
 */
export const m003Evaluations: Migration = {
  version: 3,
  name: "evaluations",
  up: `
    CREATE TABLE evaluations (
      id TEXT PRIMARY KEY,
      resume_key TEXT NOT NULL,
      pack_hash TEXT NOT NULL,
      spec INTEGER NOT NULL,
      scenarios TEXT NOT NULL,            -- JSON array of scenario names, in order
      source TEXT NOT NULL,               -- 'local' | 'epoch'
      epoch_id TEXT,
      status TEXT NOT NULL,               -- running | scored | rejected | discarded | aborted
      reason TEXT,                        -- code for rejected/discarded/aborted
      verdict TEXT,                       -- JSON, set once when status leaves 'running'
      meta TEXT NOT NULL,                 -- JSON: provenance (price table hash, llm, versions, concurrency)
      created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
      finished_at TEXT
    );
    CREATE INDEX evaluations_resume ON evaluations (resume_key, status);
    CREATE INDEX evaluations_status ON evaluations (status, created_at);

    CREATE TABLE episodes (
      id TEXT PRIMARY KEY,
      evaluation_id TEXT NOT NULL REFERENCES evaluations(id) ON DELETE CASCADE,
      scenario TEXT NOT NULL,
      attempt INTEGER NOT NULL,
      status TEXT NOT NULL,               -- running | final | retry | unresolved | interrupted | aborted
      outcome TEXT,                       -- JSON EpisodeOutcome when finished
      quality REAL,
      failure_class TEXT,
      failure_code TEXT,
      cost_usd REAL,
      started_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
      finished_at TEXT,
      UNIQUE (evaluation_id, scenario, attempt)
    );
    CREATE INDEX episodes_eval ON episodes (evaluation_id, scenario);
  `,
};
