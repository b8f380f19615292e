/**
 * The meter's receipts as a hash chain (receipts.jsonl): one line per receipt, `{hash, prev, row}`,
 * where hash = sha256("trajrl-receipt-chain-v1\n" + prev + "\n" + row) over the row in Python's
 * `json.dumps(row, sort_keys=True)` form, and prev is the line before's hash (64 zeros for the
 * first). The last hash, the head, is in the signed manifest: a receipt changed, dropped, added or
 * moved breaks the chain at that line. Pure.
 */
import { z } from "zod";
import { sha256Hex } from "../hash.js";
import type { Receipt } from "../meter/index.js";
import { canonicalJson, fromJs } from "../pack/index.js";

export const CHAIN_GENESIS = "0".repeat(64);
const DOMAIN = "trajrl-receipt-chain-v1\n";

/** A receipt as stored (the SQLite columns; the USD floats are derived from the exact pico amounts). */
export const receiptRowSchema = z.object({
  episode_id: z.string(),
  seq: z.number().int(),
  started_at: z.string(),
  model: z.string(),
  status: z.number().int(),
  upstream_status: z.number().int().nullable(),
  stream: z.boolean(),
  prompt_tokens: z.number().int(),
  cached_tokens: z.number().int(),
  completion_tokens: z.number().int(),
  usd_pico: z.string().regex(/^\d+$/),
  reserved_pico: z.string().regex(/^\d+$/),
  max_tokens: z.number().int().nullable(),
  clamped: z.boolean(),
  retries: z.number().int(),
  ttfb_ms: z.number().nullable(),
  duration_ms: z.number(),
  request_id: z.string().nullable(),
  content_sha: z.string().nullable(),
  tool_sha: z.string().nullable(),
  tool_calls: z.number().int(),
  finish_reason: z.string().nullable(),
  truncated: z.boolean(),
  usage_estimated: z.boolean(),
  error_code: z.string().nullable(),
});
export type ReceiptRow = z.infer<typeof receiptRowSchema>;

const lineSchema = z.object({ hash: z.string(), prev: z.string(), row: receiptRowSchema });

export function receiptRow(r: Receipt): ReceiptRow {
  return {
    episode_id: r.episode_id,
    seq: r.seq,
    started_at: r.started_at,
    model: r.model,
    status: r.status,
    upstream_status: r.upstream_status,
    stream: r.stream,
    prompt_tokens: r.prompt_tokens,
    cached_tokens: r.cached_tokens,
    completion_tokens: r.completion_tokens,
    usd_pico: String(r.usd_pico),
    reserved_pico: String(r.reserved_pico),
    max_tokens: r.max_tokens,
    clamped: r.clamped,
    retries: r.retries,
    ttfb_ms: r.ttfb_ms,
    duration_ms: r.duration_ms,
    request_id: r.request_id,
    content_sha: r.content_sha,
    tool_sha: r.tool_sha,
    tool_calls: r.tool_calls,
    finish_reason: r.finish_reason,
    truncated: r.truncated,
    usage_estimated: r.usage_estimated,
    error_code: r.error_code,
  };
}

export function linkHash(prev: string, row: ReceiptRow): string {
  return sha256Hex(`${DOMAIN}${prev}\n${canonicalJson(fromJs(row))}`);
}

/** receipts.jsonl for these rows, and its head. */
export function chainReceipts(rows: readonly ReceiptRow[]): { text: string; head: string } {
  let prev = CHAIN_GENESIS;
  const lines: string[] = [];
  for (const row of rows) {
    const hash = linkHash(prev, row);
    lines.push(JSON.stringify({ hash, prev, row }));
    prev = hash;
  }
  return { text: lines.length ? `${lines.join("\n")}\n` : "", head: prev };
}

export type ChainCheck =
  | { ok: true; rows: ReceiptRow[]; head: string }
  | {
      ok: false;
      line: number;
      episode: string | null;
      seq: number | null;
      problem: string;
      rows: ReceiptRow[];
    };

/** Walk receipts.jsonl: every line parses, links to the one before, and hashes to what it says. */
export function checkChain(text: string): ChainCheck {
  const rows: ReceiptRow[] = [];
  let prev = CHAIN_GENESIS;
  const lines = text.split("\n").filter((l) => l.length > 0);
  for (const [i, raw] of lines.entries()) {
    const fail = (problem: string, row?: ReceiptRow): ChainCheck => ({
      ok: false,
      line: i + 1,
      episode: row?.episode_id ?? null,
      seq: row?.seq ?? null,
      problem,
      rows,
    });
    let parsed: z.infer<typeof lineSchema>;
    try {
      const r = lineSchema.safeParse(JSON.parse(raw));
      if (!r.success) return fail(`not a receipt line (${r.error.issues[0]?.message ?? "invalid"})`);
      parsed = r.data;
    } catch {
      return fail("not JSON");
    }
    if (parsed.prev !== prev) return fail("its prev is not the hash of the line before", parsed.row);
    if (linkHash(prev, parsed.row) !== parsed.hash)
      return fail("the row does not hash to its hash (the receipt was changed)", parsed.row);
    rows.push(parsed.row);
    prev = parsed.hash;
  }
  return { ok: true, rows, head: prev };
}

/** Σ usd_pico of the rows (exact). */
export function sumPico(rows: readonly ReceiptRow[]): bigint {
  return rows.reduce((a, r) => a + BigInt(r.usd_pico), 0n);
}
