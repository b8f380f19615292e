import type { Migration } from "./migration.js";

/**
 * Every set_weights (or timelocked commit) attempt, for audit. A row is written before the
 * extrinsic is sent (outcome 'pending') and completed with what the chain said, so a process
 * killed mid-send leaves evidence of what it may have sent.
 */
export const m004Weights: Migration = {
  version: 4,
  name: "weights",
  up: `
    CREATE TABLE weight_attempts (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
      netuid INTEGER NOT NULL,
      block INTEGER,                      -- chain head when the attempt started
      mode TEXT NOT NULL,                 -- set_weights | commit_timelocked_weights | commit_crv3_weights
      reason TEXT,                        -- why these weights: winner | no_seat | winner_deregistered | stale_winner_cache
      uids TEXT NOT NULL,                 -- JSON array of u16
      weights TEXT NOT NULL,              -- JSON array of u16, as emitted
      version_key INTEGER NOT NULL,
      outcome TEXT NOT NULL DEFAULT 'pending', -- pending | included | failed | rejected | timeout | aborted | skipped
      error_name TEXT,                    -- chain error by name (SettingWeightsTooFast, …) or preflight code
      error_kind TEXT,                    -- rate_limited | permanent | transient
      message TEXT,
      tx_hash TEXT,
      block_hash TEXT,
      included_block INTEGER,
      nonce INTEGER,
      resubmissions INTEGER NOT NULL DEFAULT 0,
      reveal_round INTEGER,
      finished_at TEXT
    );
    CREATE INDEX weight_attempts_at ON weight_attempts (netuid, at);
    CREATE INDEX weight_attempts_outcome ON weight_attempts (netuid, outcome, at);
  `,
};
