/**
 * Epochs this validator has judged (migration 005 `platform_scored_epochs`, per network since 008):
 * the eval loop skips them across restarts. Times are unix ms passed in by the caller.
 */
import { type Db, durably } from "./db.js";
import type { NetworkId } from "./networks.js";

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

/** Epochs this validator has judged on one network: the eval loop skips them, across restarts. */
export class ScoredEpochRepo {
  private readonly db: Db;
  private readonly getStmt;
  private readonly insertStmt;
  private readonly latestStmt;

  constructor(
    db: Db,
    private readonly network: NetworkId,
  ) {
    this.db = db;
    this.getStmt = db.prepare<[string, number, string], ScoredRow>(
      "SELECT * FROM platform_scored_epochs WHERE network = ? AND epoch_id = ? AND validator_hotkey = ?",
    );
    this.insertStmt = db.prepare(
      `INSERT OR IGNORE INTO platform_scored_epochs
         (network, epoch_id, validator_hotkey, challenger_hotkey, pack_hash, spec_number, score, qualified, rejected, scored_at)
       VALUES (@network, @epochId, @validatorHotkey, @challengerHotkey, @packHash, @specNumber, @score, @qualified, @rejected, @scoredAt)`,
    );
    this.latestStmt = db.prepare<[string, string], ScoredRow>(
      "SELECT * FROM platform_scored_epochs WHERE network = ? AND validator_hotkey = ? ORDER BY epoch_id DESC LIMIT 1",
    );
  }

  has(epochId: number, validatorHotkey: string): boolean {
    return this.getStmt.get(this.network, epochId, validatorHotkey) !== undefined;
  }

  get(epochId: number, validatorHotkey: string): ScoredEpoch | undefined {
    const r = this.getStmt.get(this.network, epochId, validatorHotkey);
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
        network: this.network,
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
    const r = this.latestStmt.get(this.network, validatorHotkey);
    return r ? toScored(r) : undefined;
  }
}
