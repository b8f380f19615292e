/** Log archives waiting for upload (migration 005 `platform_log_uploads`; per network since 008). */
import type { Db } from "./db.js";
import type { NetworkId } from "./networks.js";

export type LogUploadKind = "eval" | "cycle";
export type LogUploadState = "pending" | "uploaded" | "abandoned";

export interface LogUpload {
  id: number;
  kind: LogUploadKind;
  evalId: string;
  epochId: number | null;
  /** The multipart fields other than the signing ones (miner_hotkey, miner_uid, block_height, …). */
  meta: Record<string, string | number>;
  archivePath: string;
  sizeBytes: number;
  state: LogUploadState;
  attempts: number;
  lastError: string | null;
  createdAt: number;
  uploadedAt: number | null;
}

interface LogRow {
  id: number;
  kind: LogUploadKind;
  eval_id: string;
  epoch_id: number | null;
  meta: string;
  archive_path: string;
  size_bytes: number;
  state: LogUploadState;
  attempts: number;
  last_error: string | null;
  created_at: number;
  uploaded_at: number | null;
}

const toLog = (r: LogRow): LogUpload => ({
  id: r.id,
  kind: r.kind,
  evalId: r.eval_id,
  epochId: r.epoch_id,
  meta: JSON.parse(r.meta) as Record<string, string | number>,
  archivePath: r.archive_path,
  sizeBytes: r.size_bytes,
  state: r.state,
  attempts: r.attempts,
  lastError: r.last_error,
  createdAt: r.created_at,
  uploadedAt: r.uploaded_at,
});

/** Log archives written to disk and waiting for upload; replayed at start (like the Python daemon's markers). */
export class LogUploadRepo {
  private readonly insertStmt;
  private readonly getStmt;
  private readonly pendingStmt;
  private readonly uploadedStmt;
  private readonly failedStmt;
  private readonly abandonStmt;

  constructor(
    db: Db,
    private readonly network: NetworkId,
  ) {
    this.insertStmt = db.prepare(
      `INSERT OR IGNORE INTO platform_log_uploads (network, kind, eval_id, epoch_id, meta, archive_path, size_bytes, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.getStmt = db.prepare<[LogUploadKind, string], LogRow>(
      "SELECT * FROM platform_log_uploads WHERE kind = ? AND eval_id = ?",
    );
    this.pendingStmt = db.prepare<[string, number, number], LogRow>(
      `SELECT * FROM platform_log_uploads WHERE network = ? AND state = 'pending' AND created_at >= ?
       ORDER BY created_at, id LIMIT ?`,
    );
    this.uploadedStmt = db.prepare(
      "UPDATE platform_log_uploads SET state = 'uploaded', uploaded_at = ?, attempts = attempts + 1 WHERE id = ? AND state = 'pending'",
    );
    this.failedStmt = db.prepare(
      "UPDATE platform_log_uploads SET attempts = attempts + 1, last_error = ? WHERE id = ? AND state = 'pending'",
    );
    this.abandonStmt = db.prepare(
      "UPDATE platform_log_uploads SET state = 'abandoned', last_error = ? WHERE id = ? AND state = 'pending'",
    );
  }

  /** Record an archive to upload; the same (kind, eval_id) twice keeps the first. */
  enqueue(u: {
    kind: LogUploadKind;
    evalId: string;
    epochId?: number | null;
    meta: Record<string, string | number>;
    archivePath: string;
    sizeBytes: number;
    nowMs: number;
  }): LogUpload {
    this.insertStmt.run(
      this.network,
      u.kind,
      u.evalId,
      u.epochId ?? null,
      JSON.stringify(u.meta),
      u.archivePath,
      u.sizeBytes,
      u.nowMs,
    );
    return toLog(this.getStmt.get(u.kind, u.evalId)!);
  }

  /** Pending uploads created at or after `sinceMs` (the Python daemon replays the last 2 days), oldest first. */
  pending(sinceMs = 0, limit = 100): LogUpload[] {
    return this.pendingStmt.all(this.network, sinceMs, limit).map(toLog);
  }

  markUploaded(id: number, nowMs: number): boolean {
    return this.uploadedStmt.run(nowMs, id).changes === 1;
  }

  markFailed(id: number, error: string): void {
    this.failedStmt.run(error, id);
  }

  abandon(id: number, reason: string): boolean {
    return this.abandonStmt.run(reason, id).changes === 1;
  }
}
