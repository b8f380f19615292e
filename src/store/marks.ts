/** Heartbeat and telemetry instants (migration 005 `platform_marks`), one row per name. */
import type { Db } from "./db.js";

export const MARK = {
  heartbeatSent: "heartbeat_sent",
  heartbeatFailed: "heartbeat_failed",
  lastEvalAt: "last_eval_at",
  lastSetWeightsAt: "last_set_weights_at",
} as const;

export class PlatformMarksRepo {
  private readonly setStmt;
  private readonly getStmt;

  constructor(db: Db) {
    this.setStmt = db.prepare(
      `INSERT INTO platform_marks (name, at, detail) VALUES (?, ?, ?)
       ON CONFLICT(name) DO UPDATE SET at = excluded.at, detail = excluded.detail`,
    );
    this.getStmt = db.prepare<[string], { at: number; detail: string | null }>(
      "SELECT at, detail FROM platform_marks WHERE name = ?",
    );
  }

  set(name: string, atMs: number, detail?: string): void {
    this.setStmt.run(name, atMs, detail ?? null);
  }

  get(name: string): { at: number; detail: string | null } | undefined {
    return this.getStmt.get(name);
  }
}
