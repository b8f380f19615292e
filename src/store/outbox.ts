/**
 * The verdict outbox (migration 005 `platform_outbox`, per network since 008): src/platform's
 * OutboxPort, in SQLite. Every write commits durably (synchronous=FULL): a queued vote survives an
 * OS crash.
 */
import {
  type DeliveryTransition,
  type OutboxEntry,
  type OutboxOutcome,
  type OutboxPort,
  type OutboxState,
  type ScoreVerdict,
  scoreVerdictSchema,
} from "../platform/index.js";
import { type Db, durably } from "./db.js";
import type { NetworkId } from "./networks.js";
import { ScoredEpochRepo } from "./scored-epochs.js";

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
 * Verdicts waiting to be POSTed, of one network. One per (epoch, hotkey): enqueueing twice keeps the
 * first, so a re-run can never produce a second, different vote. Enqueueing also marks the epoch
 * scored, in the same transaction: once a verdict exists the epoch is never evaluated again.
 */
export class VerdictOutboxRepo implements OutboxPort {
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

  constructor(
    db: Db,
    private readonly network: NetworkId,
  ) {
    this.db = db;
    this.scored = new ScoredEpochRepo(db, network);
    this.insertStmt = db.prepare(
      `INSERT OR IGNORE INTO platform_outbox (network, epoch_id, validator_hotkey, payload, next_attempt_at, created_at)
       VALUES (?, ?, ?, ?, ?, ?)`,
    );
    this.getStmt = db.prepare<[string, number, string], OutboxRow>(
      "SELECT * FROM platform_outbox WHERE network = ? AND epoch_id = ? AND validator_hotkey = ?",
    );
    this.byIdStmt = db.prepare<[number, string], OutboxRow>(
      "SELECT * FROM platform_outbox WHERE id = ? AND network = ?",
    );
    this.dueStmt = db.prepare<[string, string, number, number], OutboxRow>(
      `SELECT * FROM platform_outbox WHERE network = ? AND state = 'pending' AND validator_hotkey = ?
         AND next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT ?`,
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
       WHERE network = ? AND state = 'pending' AND validator_hotkey = ? AND epoch_id < ?`,
    );
    this.countStmt = db.prepare<[string], { state: OutboxState; n: number }>(
      "SELECT state, count(*) AS n FROM platform_outbox WHERE network = ? GROUP BY state",
    );
    this.listStmt = db.prepare<[string, number], OutboxRow>(
      "SELECT * FROM platform_outbox WHERE network = ? ORDER BY id DESC LIMIT ?",
    );
  }

  /** Queue a verdict (validated here, so a bad one fails now and not at send time). */
  enqueue(v: EnqueueVerdict): { entry: OutboxEntry; created: boolean } {
    const verdict = scoreVerdictSchema.parse(v.verdict);
    const created = durably(this.db, () => {
      const info = this.insertStmt.run(
        this.network,
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
    const r = this.getStmt.get(this.network, epochId, validatorHotkey);
    return r ? toEntry(r) : undefined;
  }

  byId(id: number): OutboxEntry | undefined {
    const r = this.byIdStmt.get(id, this.network);
    return r ? toEntry(r) : undefined;
  }

  /** Pending entries of this hotkey whose next attempt is due, oldest first. */
  due(validatorHotkey: string, nowMs: number, limit = 16): OutboxEntry[] {
    return this.dueStmt.all(this.network, validatorHotkey, nowMs, limit).map(toEntry);
  }

  /** Count an attempt before sending it: a crash mid-POST still shows in `attempts`. */
  markAttempt(id: number, nowMs: number): void {
    durably(this.db, () => this.attemptStmt.run(nowMs, id));
  }

  /**
   * Apply an attempt's transition. Only a pending entry changes, so an outcome applied twice
   * (or a late answer after the epoch was closed) cannot count a delivery twice. Returns whether it changed.
   */
  apply(id: number, t: DeliveryTransition, nowMs: number, status: number | null = null): boolean {
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
          this.network,
          validatorHotkey,
          currentEpochId,
        ).changes,
    );
  }

  counts(): Record<OutboxState, number> {
    const out: Record<OutboxState, number> = { pending: 0, delivered: 0, abandoned: 0 };
    for (const r of this.countStmt.all(this.network)) out[r.state] = r.n;
    return out;
  }

  recent(limit = 50): OutboxEntry[] {
    return this.listStmt.all(this.network, limit).map(toEntry);
  }
}
