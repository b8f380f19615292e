import type { Receipt, ReceiptSink } from "../meter/index.js";
import type { Db } from "./db.js";

interface Row {
  episode_id: string;
  seq: number;
  started_at: string;
  model: string;
  status: number;
  upstream_status: number | null;
  stream: number;
  prompt_tokens: number;
  cached_tokens: number;
  completion_tokens: number;
  usd_pico: string;
  reserved_pico: string;
  max_tokens: number | null;
  clamped: number;
  retries: number;
  ttfb_ms: number | null;
  duration_ms: number;
  request_id: string | null;
  content_sha: string | null;
  tool_sha: string | null;
  tool_calls: number;
  finish_reason: string | null;
  truncated: number;
  usage_estimated: number;
  error_code: string | null;
}

const COLUMNS = [
  "episode_id",
  "seq",
  "started_at",
  "model",
  "status",
  "upstream_status",
  "stream",
  "prompt_tokens",
  "cached_tokens",
  "completion_tokens",
  "usd_pico",
  "reserved_pico",
  "max_tokens",
  "clamped",
  "retries",
  "ttfb_ms",
  "duration_ms",
  "request_id",
  "content_sha",
  "tool_sha",
  "tool_calls",
  "finish_reason",
  "truncated",
  "usage_estimated",
  "error_code",
] as const;

/** The meter's receipts (migration 002). Batched inserts: one transaction per flush. */
export class ReceiptRepo implements ReceiptSink {
  private readonly insertStmt;
  private readonly listStmt;
  private readonly countStmt;
  private readonly insertBatch: (rows: readonly Receipt[]) => void;

  constructor(db: Db) {
    this.insertStmt = db.prepare(
      `INSERT INTO receipts (${COLUMNS.join(", ")}) VALUES (${COLUMNS.map(() => "?").join(", ")})`,
    );
    // Exact amounts come back as text: a pico-dollar sum may exceed 2^53.
    this.listStmt = db.prepare<[string], Row>(
      `SELECT ${COLUMNS.map((c) => (c === "usd_pico" || c === "reserved_pico" ? `CAST(${c} AS TEXT) AS ${c}` : c)).join(", ")}
       FROM receipts WHERE episode_id = ? ORDER BY seq, id`,
    );
    this.countStmt = db.prepare<[string], { n: number }>(
      "SELECT COUNT(*) AS n FROM receipts WHERE episode_id = ?",
    );
    this.insertBatch = db.transaction((rows: readonly Receipt[]) => {
      for (const r of rows) this.insertStmt.run(...toRow(r));
    });
  }

  insertMany(receipts: readonly Receipt[]): void {
    if (receipts.length > 0) this.insertBatch(receipts);
  }

  listByEpisode(episodeId: string): Receipt[] {
    return this.listStmt.all(episodeId).map(fromRow);
  }

  countByEpisode(episodeId: string): number {
    return this.countStmt.get(episodeId)?.n ?? 0;
  }
}

/** An exact pico-dollar amount for SQLite: a plain number while exact, else a bigint. */
function picoValue(decimal: string): number | bigint {
  const n = Number(decimal);
  return Number.isSafeInteger(n) ? n : BigInt(decimal);
}

/** Positional values in COLUMNS order (binding by position is cheaper than by name). */
function toRow(r: Receipt): unknown[] {
  return [
    r.episode_id,
    r.seq,
    r.started_at,
    r.model,
    r.status,
    r.upstream_status,
    r.stream ? 1 : 0,
    r.prompt_tokens,
    r.cached_tokens,
    r.completion_tokens,
    picoValue(r.usd_pico),
    picoValue(r.reserved_pico),
    r.max_tokens,
    r.clamped ? 1 : 0,
    r.retries,
    r.ttfb_ms,
    r.duration_ms,
    r.request_id,
    r.content_sha,
    r.tool_sha,
    r.tool_calls,
    r.finish_reason,
    r.truncated ? 1 : 0,
    r.usage_estimated ? 1 : 0,
    r.error_code,
  ];
}

function fromRow(row: Row): Receipt {
  return {
    ...row,
    stream: row.stream === 1,
    clamped: row.clamped === 1,
    truncated: row.truncated === 1,
    usage_estimated: row.usage_estimated === 1,
    usd: Number(row.usd_pico) / 1e12,
    reserved_usd: Number(row.reserved_pico) / 1e12,
  };
}
