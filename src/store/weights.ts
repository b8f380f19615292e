import type { Db } from "./db.js";
import type { NetworkId } from "./networks.js";

export type WeightAttemptOutcome =
  | "pending"
  | "included"
  | "failed"
  | "rejected"
  | "timeout"
  | "aborted"
  | "skipped";

export interface WeightAttemptStart {
  netuid: number;
  block?: number | undefined;
  mode: string;
  reason?: string | undefined;
  uids: readonly number[];
  weights: readonly number[];
  versionKey: number;
}

export interface WeightAttemptFinish {
  outcome: Exclude<WeightAttemptOutcome, "pending">;
  errorName?: string | undefined;
  errorKind?: string | undefined;
  message?: string | undefined;
  txHash?: string | undefined;
  blockHash?: string | undefined;
  includedBlock?: number | undefined;
  nonce?: number | undefined;
  resubmissions?: number | undefined;
  revealRound?: number | undefined;
  /** A later mode than the one started with (commit-reveal switched on between start and send). */
  mode?: string | undefined;
}

export interface WeightAttempt {
  id: number;
  at: string;
  netuid: number;
  block: number | null;
  mode: string;
  reason: string | null;
  uids: number[];
  weights: number[];
  versionKey: number;
  outcome: WeightAttemptOutcome;
  errorName: string | null;
  errorKind: string | null;
  message: string | null;
  txHash: string | null;
  blockHash: string | null;
  includedBlock: number | null;
  nonce: number | null;
  resubmissions: number;
  revealRound: number | null;
  finishedAt: string | null;
}

interface Row {
  id: number;
  at: string;
  netuid: number;
  block: number | null;
  mode: string;
  reason: string | null;
  uids: string;
  weights: string;
  version_key: number;
  outcome: WeightAttemptOutcome;
  error_name: string | null;
  error_kind: string | null;
  message: string | null;
  tx_hash: string | null;
  block_hash: string | null;
  included_block: number | null;
  nonce: number | null;
  resubmissions: number;
  reveal_round: number | null;
  finished_at: string | null;
}

const fromRow = (r: Row): WeightAttempt => ({
  id: r.id,
  at: r.at,
  netuid: r.netuid,
  block: r.block,
  mode: r.mode,
  reason: r.reason,
  uids: JSON.parse(r.uids) as number[],
  weights: JSON.parse(r.weights) as number[],
  versionKey: r.version_key,
  outcome: r.outcome,
  errorName: r.error_name,
  errorKind: r.error_kind,
  message: r.message,
  txHash: r.tx_hash,
  blockHash: r.block_hash,
  includedBlock: r.included_block,
  nonce: r.nonce,
  resubmissions: r.resubmissions,
  revealRound: r.reveal_round,
  finishedAt: r.finished_at,
});

/** The audit trail of weight setting on one network (migration 004; per network since 008). */
export class WeightsRepo {
  private readonly insertStmt;
  private readonly finishStmt;
  private readonly getStmt;
  private readonly recentStmt;
  private readonly lastIncludedStmt;

  constructor(
    db: Db,
    private readonly network: NetworkId,
  ) {
    this.insertStmt = db.prepare(
      `INSERT INTO weight_attempts (network, netuid, block, mode, reason, uids, weights, version_key)
       VALUES (@network, @netuid, @block, @mode, @reason, @uids, @weights, @version_key)`,
    );
    this.finishStmt = db.prepare(
      `UPDATE weight_attempts SET outcome = @outcome, error_name = @error_name, error_kind = @error_kind,
         message = @message, tx_hash = @tx_hash, block_hash = @block_hash, included_block = @included_block,
         nonce = @nonce, resubmissions = @resubmissions, reveal_round = @reveal_round, mode = COALESCE(@mode, mode),
         finished_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')
       WHERE id = @id AND outcome = 'pending'`,
    );
    this.getStmt = db.prepare<[number, string], Row>(
      "SELECT * FROM weight_attempts WHERE id = ? AND network = ?",
    );
    this.recentStmt = db.prepare<[string, number, number], Row>(
      "SELECT * FROM weight_attempts WHERE network = ? AND netuid = ? ORDER BY id DESC LIMIT ?",
    );
    this.lastIncludedStmt = db.prepare<[string, number], Row>(
      "SELECT * FROM weight_attempts WHERE network = ? AND netuid = ? AND outcome = 'included' ORDER BY id DESC LIMIT 1",
    );
  }

  /** Record an attempt before anything is sent; returns its id. */
  start(a: WeightAttemptStart): number {
    const info = this.insertStmt.run({
      network: this.network,
      netuid: a.netuid,
      block: a.block ?? null,
      mode: a.mode,
      reason: a.reason ?? null,
      uids: JSON.stringify(a.uids),
      weights: JSON.stringify(a.weights),
      version_key: a.versionKey,
    });
    return Number(info.lastInsertRowid);
  }

  /** Complete a pending attempt; a finished one is never rewritten (returns false). */
  finish(id: number, f: WeightAttemptFinish): boolean {
    const info = this.finishStmt.run({
      id,
      outcome: f.outcome,
      error_name: f.errorName ?? null,
      error_kind: f.errorKind ?? null,
      message: f.message ?? null,
      tx_hash: f.txHash ?? null,
      block_hash: f.blockHash ?? null,
      included_block: f.includedBlock ?? null,
      nonce: f.nonce ?? null,
      resubmissions: f.resubmissions ?? 0,
      reveal_round: f.revealRound ?? null,
      mode: f.mode ?? null,
    });
    return info.changes === 1;
  }

  get(id: number): WeightAttempt | undefined {
    const r = this.getStmt.get(id, this.network);
    return r ? fromRow(r) : undefined;
  }

  recent(netuid: number, limit = 50): WeightAttempt[] {
    return this.recentStmt.all(this.network, netuid, limit).map(fromRow);
  }

  lastIncluded(netuid: number): WeightAttempt | undefined {
    const r = this.lastIncludedStmt.get(this.network, netuid);
    return r ? fromRow(r) : undefined;
  }
}
