import type { Migration } from "./migration.js";

export const m001Core: Migration = {
  version: 1,
  name: "core",
  up: `
    CREATE TABLE kv (
      key TEXT PRIMARY KEY,
      value TEXT NOT NULL,
      updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
    );
  `,
};
