import type { Migration } from "./migration.js";

/** The meter's per-call receipts (src/meter/receipt.ts). Money is exact: integer pico-dollars. */
export const m002Receipts: Migration = {
  version: 2,
  name: "receipts",
  up: `
    CREATE TABLE receipts (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      episode_id TEXT NOT NULL,
      seq INTEGER NOT NULL,
      started_at TEXT NOT NULL,
      model TEXT NOT NULL,
      status INTEGER NOT NULL,
      upstream_status INTEGER,
      stream INTEGER NOT NULL,
      prompt_tokens INTEGER NOT NULL,
      cached_tokens INTEGER NOT NULL,
      completion_tokens INTEGER NOT NULL,
      usd_pico INTEGER NOT NULL,
      reserved_pico INTEGER NOT NULL,
      max_tokens INTEGER,
      clamped INTEGER NOT NULL,
      retries INTEGER NOT NULL,
      ttfb_ms REAL,
      duration_ms REAL NOT NULL,
      request_id TEXT,
      content_sha TEXT,
      tool_sha TEXT,
      tool_calls INTEGER NOT NULL,
      finish_reason TEXT,
      truncated INTEGER NOT NULL,
      usage_estimated INTEGER NOT NULL,
      error_code TEXT
    );
    -- Not unique: an episode id re-run after a restart appends a second series.
    CREATE INDEX receipts_episode ON receipts (episode_id, seq);
  `,
};
