/**
 * Repositories for the platform protocol's state (migration 005). Typed classes over prepared
 * statements; synchronous like the rest of the store. Times are unix ms passed in by the caller, so
 * tests control the clock and nothing here reads it.
 */
import type { OutboxEntry, OutboxOutcome, OutboxState, OutboxTransition } from "../platform/outbox.js";
// Pure zod schemas (no I/O): stored JSON is re-validated on the way out, as any outside input is.
import {
  type ScoreVerdict,
  scoreVerdictSchema,
  type WinnerCurrent,
  winnerCurrentSchema,
} from "../platform/schemas.js";
import { type Db, durably } from "./db.js";

// ---------------------------------------------------------------------------------------------
// Scored epochs
// ---------------------------------------------------------------------------------------------

export interface ScoredEpoch {
  epochId: number;
  validatorHotkey: string;
  challengerHotkey: string | null;
  packHash: string | null;
  specNumber: number | null;
  score: number | null;
  qualified: boolean | null;
  rejected: boolean | null;
  scoredAt: number;
}

interface ScoredRow {
  epoch_id: number;
  validator_hotkey: string;
  challenger_hotkey: string | null;
  pack_hash: string | null;
  spec_number: number | null;
  score: number | null;
  qualified: number | null;
  rejected: number | null;
  scored_at: number;
}

const bool = (v: number | null) => (v === null ? null : v !== 0);
const toScored = (r: ScoredRow): ScoredEpoch => ({
  epochId: r.epoch_id,
  validatorHotkey: r.validator_hotkey,
  challengerHotkey: r.challenger_hotkey,
  packHash: r.pack_hash,
  specNumber: r.spec_number,
  score: r.score,
  qualified: bool(r.qualified),
  rejected: bool(r.rejected),
  scoredAt: r.scored_at,
});

/** Epochs this validator has judged: the eval loop skips them, across restarts. */
export class ScoredEpochRepo {
  private readonly db: Db;
  private readonly getStmt;
  private readonly insertStmt;
  private readonly latestStmt;

  constructor(db: Db) {
    this.db = db;
    this.getStmt = db.prepare<[number, string], ScoredRow>(
      "SELECT * FROM platform_scored_epochs WHERE epoch_id = ? AND validator_hotkey = ?",
    );
    this.insertStmt = db.prepare(
      `INSERT OR IGNORE INTO platform_scored_epochs
         (epoch_id, validator_hotkey, challenger_hotkey, pack_hash, spec_number, score, qualified, rejected, scored_at)
       VALUES (@epochId, @validatorHotkey, @challengerHotkey, @packHash, @specNumber, @score, @qualified, @rejected, @scoredAt)`,
    );
    this.latestStmt = db.prepare<[string], ScoredRow>(
      "SELECT * FROM platform_scored_epochs WHERE validator_hotkey = ? ORDER BY epoch_id DESC LIMIT 1",
    );
  }

  has(epochId: number, validatorHotkey: string): boolean {
    return this.getStmt.get(epochId, validatorHotkey) !== undefined;
  }

  get(epochId: number, validatorHotkey: string): ScoredEpoch | undefined {
    const r = this.getStmt.get(epochId, validatorHotkey);
    return r ? toScored(r) : undefined;
  }

  /** true when newly recorded; false when the epoch was already marked (the first record wins). */
  mark(
    e: Omit<
      ScoredEpoch,
      "challengerHotkey" | "packHash" | "specNumber" | "score" | "qualified" | "rejected"
    > &
      Partial<ScoredEpoch>,
  ): boolean {
    const info = durably(this.db, () =>
      this.insertStmt.run({
        epochId: e.epochId,
        validatorHotkey: e.validatorHotkey,
        challengerHotkey: e.challengerHotkey ?? null,
        packHash: e.packHash ?? null,
        specNumber: e.specNumber ?? null,
        score: e.score ?? null,
        qualified: e.qualified == null ? null : e.qualified ? 1 : 0,
        rejected: e.rejected == null ? null : e.rejected ? 1 : 0,
        scoredAt: e.scoredAt,
      }),
    );
    return info.changes === 1;
  }

  latest(validatorHotkey: string): ScoredEpoch | undefined {
    const r = this.latestStmt.get(validatorHotkey);
    return r ? toScored(r) : undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// Verdict outbox
// ---------------------------------------------------------------------------------------------

interface OutboxRow {
  id: number;
  epoch_id: number;
  validator_hotkey: string;
  payload: string;
  state: OutboxState;
  attempts: number;
  next_attempt_at: number;
  created_at: number;
  last_attempt_at: number | null;
  last_status: number | null;
  last_error: string | null;
  outcome: OutboxOutcome | null;
  reason: string | null;
  delivered_at: number | null;
  abandoned_at: number | null;
}

function toEntry(r: OutboxRow): OutboxEntry {
  return {
    id: r.id,
    epochId: r.epoch_id,
    validatorHotkey: r.validator_hotkey,
    verdict: scoreVerdictSchema.parse(JSON.parse(r.payload)),
    state: r.state,
    attempts: r.attempts,
    nextAttemptAt: r.next_attempt_at,
    createdAt: r.created_at,
    lastAttemptAt: r.last_attempt_at,
    lastStatus: r.last_status,
    lastError: r.last_error,
    outcome: r.outcome,
    reason: r.reason,
    deliveredAt: r.delivered_at,
    abandonedAt: r.abandoned_at,
  };
}

export interface EnqueueVerdict {
  epochId: number;
  validatorHotkey: string;
  verdict: ScoreVerdict;
  nowMs: number;
  /** Recorded with the scored-epoch mark (the server stamps these itself; we keep them for the status page). */
  challengerHotkey?: string;
  packHash?: string;
}

/**
 * Verdicts waiting to be POSTed. One per (epoch, hotkey): enqueueing twice keeps the first, so a
 * re-run can never produce a second, different vote. Enqueueing also marks the epoch scored, in the
 * same transaction: once a verdict exists the epoch is never evaluated again.
 */
export class VerdictOutboxRepo {
  private readonly db: Db;
  private readonly scored: ScoredEpochRepo;
  private readonly insertStmt;
  private readonly getStmt;
  private readonly byIdStmt;
  private readonly dueStmt;
  private readonly attemptStmt;
  private readonly deliveredStmt;
  private readonly abandonStmt;
  private readonly retryStmt;
  private readonly closeBeforeStmt;
  private readonly countStmt;
  private readonly listStmt;

  constructor(db: Db) {
    this.db = db;
    this.scored = new ScoredEpochRepo(db);
    this.insertStmt = db.prepare(
      `INSERT OR IGNORE INTO platform_outbox (epoch_id, validator_hotkey, payload, next_attempt_at, created_at)
       VALUES (?, ?, ?, ?, ?)`,
    );
    this.getStmt = db.prepare<[number, string], OutboxRow>(
      "SELECT * FROM platform_outbox WHERE epoch_id = ? AND validator_hotkey = ?",
    );
    this.byIdStmt = db.prepare<[number], OutboxRow>("SELECT * FROM platform_outbox WHERE id = ?");
    this.dueStmt = db.prepare<[string, number, number], OutboxRow>(
      `SELECT * FROM platform_outbox WHERE state = 'pending' AND validator_hotkey = ? AND next_attempt_at <= ?
       ORDER BY next_attempt_at, id LIMIT ?`,
    );
    this.attemptStmt = db.prepare(
      "UPDATE platform_outbox SET attempts = attempts + 1, last_attempt_at = ? WHERE id = ? AND state = 'pending'",
    );
    this.deliveredStmt = db.prepare(
      `UPDATE platform_outbox SET state = 'delivered', outcome = ?, reason = ?, last_status = ?, delivered_at = ?
       WHERE id = ? AND state = 'pending'`,
    );
    this.abandonStmt = db.prepare(
      `UPDATE platform_outbox SET state = 'abandoned', outcome = ?, reason = ?, last_status = coalesce(?, last_status),
         abandoned_at = ? WHERE id = ? AND state = 'pending'`,
    );
    this.retryStmt = db.prepare(
      `UPDATE platform_outbox SET next_attempt_at = ?, last_status = ?, last_error = ?
       WHERE id = ? AND state = 'pending'`,
    );
    this.closeBeforeStmt = db.prepare(
      `UPDATE platform_outbox SET state = 'abandoned', outcome = 'epoch_closed', reason = ?, abandoned_at = ?
       WHERE state = 'pending' AND validator_hotkey = ? AND epoch_id < ?`,
    );
    this.countStmt = db.prepare<[], { state: OutboxState; n: number }>(
      "SELECT state, count(*) AS n FROM platform_outbox GROUP BY state",
    );
    this.listStmt = db.prepare<[number], OutboxRow>("SELECT * FROM platform_outbox ORDER BY id DESC LIMIT ?");
  }

  /** Queue a verdict (validated here, so a bad one fails now and not at send time). */
  enqueue(v: EnqueueVerdict): { entry: OutboxEntry; created: boolean } {
    const verdict = scoreVerdictSchema.parse(v.verdict);
    const created = durably(this.db, () => {
      const info = this.insertStmt.run(
        v.epochId,
        v.validatorHotkey,
        JSON.stringify(verdict),
        v.nowMs,
        v.nowMs,
      );
      this.scored.mark({
        epochId: v.epochId,
        validatorHotkey: v.validatorHotkey,
        challengerHotkey: v.challengerHotkey,
        packHash: v.packHash,
        specNumber: verdict.spec_number,
        score: verdict.challenger.score,
        qualified: verdict.challenger.qualified,
        rejected: verdict.challenger.rejected ?? false,
        scoredAt: v.nowMs,
      });
      return info.changes === 1;
    });
    return { entry: this.get(v.epochId, v.validatorHotkey)!, created };
  }

  get(epochId: number, validatorHotkey: string): OutboxEntry | undefined {
    const r = this.getStmt.get(epochId, validatorHotkey);
    return r ? toEntry(r) : undefined;
  }

  byId(id: number): OutboxEntry | undefined {
    const r = this.byIdStmt.get(id);
    return r ? toEntry(r) : undefined;
  }

  /** Pending entries of this hotkey whose next attempt is due, oldest first. */
  due(validatorHotkey: string, nowMs: number, limit = 16): OutboxEntry[] {
    return this.dueStmt.all(validatorHotkey, nowMs, limit).map(toEntry);
  }

  /** Count an attempt before sending it: a crash mid-POST still shows in `attempts`. */
  markAttempt(id: number, nowMs: number): void {
    durably(this.db, () => this.attemptStmt.run(nowMs, id));
  }

  /**
   * Apply an attempt's transition. Only a pending entry changes, so an outcome applied twice
   * (or a late answer after the epoch was closed) cannot count a delivery twice. Returns whether it changed.
   */
  apply(id: number, t: OutboxTransition, nowMs: number, status: number | null = null): boolean {
    return durably(this.db, () => {
      switch (t.state) {
        case "delivered":
          return this.deliveredStmt.run(t.outcome, t.reason, status, nowMs, id).changes === 1;
        case "abandoned":
          return this.abandonStmt.run(t.outcome, t.reason, status, nowMs, id).changes === 1;
        case "pending":
          return this.retryStmt.run(t.nextAttemptAt, status, t.reason, id).changes === 1;
      }
    });
  }

  /** Stop retrying verdicts of epochs before `currentEpochId`: a newer epoch opens only after the old one finalized. */
  closeEpochsBefore(validatorHotkey: string, currentEpochId: number, nowMs: number): number {
    return durably(
      this.db,
      () =>
        this.closeBeforeStmt.run(
          `superseded by epoch ${currentEpochId}`,
          nowMs,
          validatorHotkey,
          currentEpochId,
        ).changes,
    );
  }

  counts(): Record<OutboxState, number> {
    const out: Record<OutboxState, number> = { pending: 0, delivered: 0, abandoned: 0 };
    for (const r of this.countStmt.all()) out[r.state] = r.n;
    return out;
  }

  recent(limit = 50): OutboxEntry[] {
    return this.listStmt.all(limit).map(toEntry);
  }
}

// ---------------------------------------------------------------------------------------------
// Winner cache
// ---------------------------------------------------------------------------------------------

/** docs/API.md "WINNER_FALLBACK_TTL (24 h)"; config.platform.winnerCacheTtlMs overrides. */
export const WINNER_FALLBACK_TTL_MS = 24 * 60 * 60 * 1000;

export interface CachedWinner {
  winner: WinnerCurrent;
  fetchedAt: number;
  ageMs: number;
  /** false once older than the TTL: the weight loop must then burn instead of trusting it. */
  fresh: boolean;
}

/** The last good /api/v2/winner/current answer (one row; each refresh replaces it). */
export class WinnerCacheRepo {
  private readonly putStmt;
  private readonly getStmt;

  constructor(db: Db) {
    this.putStmt = db.prepare(
      `INSERT INTO platform_winner_cache (id, payload, fetched_at) VALUES (1, ?, ?)
       ON CONFLICT(id) DO UPDATE SET payload = excluded.payload, fetched_at = excluded.fetched_at`,
    );
    this.getStmt = db.prepare<[], { payload: string; fetched_at: number }>(
      "SELECT payload, fetched_at FROM platform_winner_cache WHERE id = 1",
    );
  }

  put(winner: WinnerCurrent, fetchedAtMs: number): void {
    this.putStmt.run(JSON.stringify(winner), fetchedAtMs);
  }

  /**
   * The cached answer with its age; undefined when nothing was ever cached or the stored payload no
   * longer parses (treated as no cache: the weight loop then burns, the safe side).
   */
  read(nowMs: number, ttlMs: number = WINNER_FALLBACK_TTL_MS): CachedWinner | undefined {
    const row = this.getStmt.get();
    if (!row) return undefined;
    let json: unknown;
    try {
      json = JSON.parse(row.payload);
    } catch {
      return undefined;
    }
    const parsed = winnerCurrentSchema.safeParse(json);
    if (!parsed.success) return undefined;
    const ageMs = Math.max(0, nowMs - row.fetched_at);
    return { winner: parsed.data, fetchedAt: row.fetched_at, ageMs, fresh: ageMs <= ttlMs };
  }
}

// ---------------------------------------------------------------------------------------------
// Pending log uploads
// ---------------------------------------------------------------------------------------------

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

  constructor(db: Db) {
    this.insertStmt = db.prepare(
      `INSERT OR IGNORE INTO platform_log_uploads (kind, eval_id, epoch_id, meta, archive_path, size_bytes, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
    );
    this.getStmt = db.prepare<[LogUploadKind, string], LogRow>(
      "SELECT * FROM platform_log_uploads WHERE kind = ? AND eval_id = ?",
    );
    this.pendingStmt = db.prepare<[number, number], LogRow>(
      `SELECT * FROM platform_log_uploads WHERE state = 'pending' AND created_at >= ? ORDER BY created_at, id LIMIT ?`,
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
    return this.pendingStmt.all(sinceMs, limit).map(toLog);
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

// ---------------------------------------------------------------------------------------------
// Marks (heartbeat and telemetry instants)
// ---------------------------------------------------------------------------------------------

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
