/** The last good /api/v2/winner/current answer (migration 005 `platform_winner_cache`; per network since 008). */
import { type WinnerCurrent, winnerCurrentSchema } from "../platform/index.js";
import type { Db } from "./db.js";
import type { NetworkId } from "./networks.js";

/** docs/API.md "WINNER_FALLBACK_TTL (24 h)"; config.platform.winnerCacheTtlMs overrides. */
export const WINNER_FALLBACK_TTL_MS = 24 * 60 * 60 * 1000;

export interface CachedWinner {
  winner: WinnerCurrent;
  fetchedAt: number;
  ageMs: number;
  /** false once older than the TTL: the weight loop must then burn instead of trusting it. */
  fresh: boolean;
}

/** The last good /api/v2/winner/current answer of one network (one row each; each refresh replaces it). */
export class WinnerCacheRepo {
  private readonly putStmt;
  private readonly getStmt;

  constructor(
    db: Db,
    private readonly network: NetworkId,
  ) {
    this.putStmt = db.prepare(
      `INSERT INTO platform_winner_cache (network, payload, fetched_at) VALUES (?, ?, ?)
       ON CONFLICT(network) DO UPDATE SET payload = excluded.payload, fetched_at = excluded.fetched_at`,
    );
    this.getStmt = db.prepare<[string], { payload: string; fetched_at: number }>(
      "SELECT payload, fetched_at FROM platform_winner_cache WHERE network = ?",
    );
  }

  put(winner: WinnerCurrent, fetchedAtMs: number): void {
    this.putStmt.run(this.network, JSON.stringify(winner), fetchedAtMs);
  }

  /**
   * The cached answer with its age; undefined when nothing was ever cached or the stored payload no
   * longer parses (treated as no cache: the weight loop then burns, the safe side).
   */
  read(nowMs: number, ttlMs: number = WINNER_FALLBACK_TTL_MS): CachedWinner | undefined {
    const row = this.getStmt.get(this.network);
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
