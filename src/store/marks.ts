/** Heartbeat and telemetry instants (migration 005 `platform_marks`), one row per name and network. */
import type { Db } from "./db.js";
import type { NetworkId } from "./networks.js";

export const MARK = {
  heartbeatSent: "heartbeat_sent",
  heartbeatFailed: "heartbeat_failed",
  lastEvalAt: "last_eval_at",
  lastSetWeightsAt: "last_set_weights_at",
} as const;

export class PlatformMarksRepo {
  private readonly setStmt;
  private readonly getStmt;

  constructor(
    db: Db,
    private readonly network: NetworkId,
  ) {
    this.setStmt = db.prepare(
      `INSERT INTO platform_marks (network, name, at, detail) VALUES (?, ?, ?, ?)
       ON CONFLICT(network, name) DO UPDATE SET at = excluded.at, detail = excluded.detail`,
    );
    this.getStmt = db.prepare<[string, string], { at: number; detail: string | null }>(
      "SELECT at, detail FROM platform_marks WHERE network = ? AND name = ?",
    );
  }

  set(name: string, atMs: number, detail?: string): void {
    this.setStmt.run(this.network, name, atMs, detail ?? null);
  }

  get(name: string): { at: number; detail: string | null } | undefined {
    return this.getStmt.get(this.network, name);
  }
}
