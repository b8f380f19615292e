import type { Migration } from "./migration.js";

/**
 * Recent durations per scenario (the evaluation dispatches the longest episodes first): finished
 * episodes of one scenario, newest first, without scanning every evaluation's rows.
 */
export const m006EpisodeHistory: Migration = {
  version: 6,
  name: "episode-history",
  up: `
    CREATE INDEX episodes_history ON episodes (scenario, status, finished_at);
  `,
};
