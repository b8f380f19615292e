/**
 * meter.json, an episode's meter artifact, in upstream's shape so that tools reading upstream's
 * artifacts read ours: `summary` with upstream's keys (plus ours), and `rows` with upstream's field
 * names (`trajectoryrl/policy/meter.py`: one per call, a 402 as `{ts, model, status, usd, err}`).
 * Our full receipts follow under `receipts`. Pure.
 */
import type { ModelUsage, UsageSummary } from "./episodes.js";
import type { Receipt } from "./receipt.js";

/** A row as upstream's meter writes it. */
export interface MeterRow {
  ts: number | null;
  model: string;
  status: number;
  stream?: boolean;
  prompt?: number;
  cached?: number;
  completion?: number;
  finish?: string | null;
  err: string | null;
  retries?: number;
  ttfb?: number | null;
  max_tokens?: number | null;
  clamped?: boolean;
  s?: number;
  usd: number;
  rid?: string | null;
  retry_rids?: string[];
  content_sha?: string | null;
  content_len?: number;
  tool_sha?: string | null;
  tool_n?: number;
}

const round = (x: number, digits: number) => Number(x.toFixed(digits));

export function meterRow(r: Receipt): MeterRow {
  const ts = r.ts ?? (Number.isNaN(Date.parse(r.started_at)) ? null : Date.parse(r.started_at) / 1000);
  if (r.status === 402) return { ts, model: r.model, status: 402, usd: 0, err: "cap" };
  const row: MeterRow = {
    ts,
    model: r.model,
    status: r.status,
    stream: r.stream,
    prompt: r.prompt_tokens,
    cached: r.cached_tokens,
    completion: r.completion_tokens,
    finish: r.finish_reason,
    err: r.err ?? r.error_code,
    retries: r.retries,
    ttfb: r.ttfb_ms === null ? null : round(r.ttfb_ms / 1000, 3),
    max_tokens: r.max_tokens,
    clamped: r.clamped,
    s: round(r.duration_ms / 1000, 3),
    usd: round(r.usd, 8),
    rid: r.request_id,
    retry_rids: r.retry_rids ?? [],
  };
  // Upstream adds the fingerprint only for an answer it read (a 200).
  if (r.content_len !== undefined || r.content_sha !== null || r.tool_sha !== null) {
    row.content_sha = r.content_sha;
    row.content_len = r.content_len ?? 0;
    row.tool_sha = r.tool_sha;
    row.tool_n = r.tool_calls;
  }
  return row;
}

/** Upstream's summary keys (by_model as USD per model), followed by the meter's own figures. */
export interface MeterSummary {
  cost_usd: number;
  calls: number;
  errors: number;
  refused_cap: number;
  refused_model: number;
  clamped: number;
  overshoot_usd: number;
  by_model: Record<string, number>;
  tokens: { prompt: number; cached: number; completion: number };
  cap_usd: number;
  episode_id: string;
  reserved_usd: number;
  refused: Record<string, number>;
  cut: number;
  estimated_usd: number;
  longest_wait_s: number;
  retries: number;
  waited: number;
  rows_dropped: number;
  by_model_detail: Record<string, ModelUsage>;
}

export function meterSummary(u: UsageSummary): MeterSummary {
  const byModel: Record<string, number> = {};
  for (const [m, x] of Object.entries(u.by_model)) byModel[m] = round(x.cost_usd, 6);
  return {
    cost_usd: round(u.cost_usd, 6),
    calls: u.calls,
    errors: u.errors,
    refused_cap: u.refused_cap,
    refused_model: u.refused_model,
    clamped: u.clamped,
    overshoot_usd: round(u.overshoot_usd, 6),
    by_model: byModel,
    tokens: { ...u.tokens },
    cap_usd: u.cap_usd,
    episode_id: u.episode_id,
    reserved_usd: u.reserved_usd,
    refused: { ...u.refused },
    cut: u.cut,
    estimated_usd: round(u.estimated_usd, 6),
    longest_wait_s: u.longest_wait_s,
    retries: u.retries,
    waited: u.waited,
    rows_dropped: u.rows_dropped,
    by_model_detail: u.by_model,
  };
}

export interface MeterArtifact {
  episode_id: string;
  price_table_hash: string;
  summary: MeterSummary | null;
  rows: MeterRow[];
  receipts: Receipt[];
}

export function meterArtifact(a: {
  episodeId: string;
  priceTableHash: string;
  summary: UsageSummary | null;
  receipts: Receipt[];
}): MeterArtifact {
  return {
    episode_id: a.episodeId,
    price_table_hash: a.priceTableHash,
    summary: a.summary === null ? null : meterSummary(a.summary),
    rows: a.receipts.map(meterRow),
    receipts: a.receipts,
  };
}
