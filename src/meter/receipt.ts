/**
 * One receipt per call of an episode (refusals included), for meter.json and SQLite. Written off the
 * hot path: queued in memory and flushed in one transaction on a short timer, at a batch size, and
 * on stop().
 */
import type { Logger } from "../log.js";

export interface Receipt {
  episode_id: string;
  /** 1-based order of arrival within the episode. */
  seq: number;
  /** Wall clock at arrival (ISO 8601), for humans; durations below are monotonic. */
  started_at: string;
  model: string;
  /** HTTP status the policy received. */
  status: number;
  /** Last status the upstream answered with (null when it was never reached). */
  upstream_status: number | null;
  stream: boolean;
  prompt_tokens: number;
  cached_tokens: number;
  completion_tokens: number;
  usd: number;
  /** Exact cost in pico-dollars (decimal string: JSON has no 64-bit integers). */
  usd_pico: string;
  reserved_usd: number;
  reserved_pico: string;
  /** max_tokens forwarded (after clamping); null when the call was not forwarded. */
  max_tokens: number | null;
  clamped: boolean;
  retries: number;
  /** Milliseconds from forwarding to the first upstream body byte. */
  ttfb_ms: number | null;
  duration_ms: number;
  request_id: string | null;
  /** sha256-16 of the stripped answer text / of the canonical tool calls (provenance). */
  content_sha: string | null;
  tool_sha: string | null;
  tool_calls: number;
  finish_reason: string | null;
  /** The stream ended without its usage / [DONE] (cut upstream or client gone). */
  truncated: boolean;
  /** The cost is not the provider's usage: the call was lost (cut, timed out, aborted) and booked at its reservation. */
  usage_estimated: boolean;
  error_code: string | null;
  /** Upstream's row fields (meter.json), when the receipt was made by this meter (not read back from SQLite). */
  /** Unix seconds (3 decimals) when the call was forwarded, or refused. */
  ts?: number;
  /** Upstream's `err`: the provider's error text (300 characters), "cap", "no-usage", or the meter's code. */
  err?: string | null;
  /** Request ids of the attempts the meter retried. */
  retry_rids?: string[];
  /** Characters of the stripped answer text (present when the call was answered with a 200). */
  content_len?: number;
}

/** Where receipts are persisted (the SQLite repository). Called with batches, synchronously. */
export interface ReceiptSink {
  insertMany(receipts: readonly Receipt[]): void;
  /** Receipts of an episode in seq order, for episodes no longer held in memory. */
  listByEpisode?(episodeId: string): Receipt[];
}

export interface ReceiptQueueOptions {
  flushMs?: number;
  maxBatch?: number;
  log?: Logger;
}

export class ReceiptQueue {
  private batch: Receipt[] = [];
  private timer: NodeJS.Timeout | null = null;
  private immediate: NodeJS.Immediate | null = null;
  private readonly flushMs: number;
  private readonly maxBatch: number;
  failures = 0;
  written = 0;

  constructor(
    private readonly sink: ReceiptSink,
    private readonly opts: ReceiptQueueOptions = {},
  ) {
    // A commit costs about as much as a dozen rows: batch generously, but within a tenth of a second.
    this.flushMs = opts.flushMs ?? 100;
    this.maxBatch = opts.maxBatch ?? 512;
  }

  push(r: Receipt): void {
    this.batch.push(r);
    if (this.batch.length >= this.maxBatch) {
      // Still not inline: the write happens after the current response is on its way.
      this.immediate ??= setImmediate(() => this.flush());
    } else if (this.timer === null) {
      this.timer = setTimeout(() => this.flush(), this.flushMs);
      this.timer.unref();
    }
  }

  get pending(): number {
    return this.batch.length;
  }

  /** Write everything queued, in one transaction. A failed write is logged and dropped (memory keeps it). */
  flush(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    if (this.immediate !== null) clearImmediate(this.immediate);
    this.timer = null;
    this.immediate = null;
    if (this.batch.length === 0) return;
    const rows = this.batch;
    this.batch = [];
    try {
      this.sink.insertMany(rows);
      this.written += rows.length;
    } catch (err) {
      this.failures += rows.length;
      this.opts.log?.error(
        { err: (err as Error).message, code: "receipt_write_failed", rows: rows.length },
        "meter.receipts.write_failed",
      );
    }
  }
}
