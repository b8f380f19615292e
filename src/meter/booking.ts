/**
 * Booking: a call's settlement — in the exact ledger, in upstream's view of the episode, and in
 * the real-spend exposure — and its receipt. Every admitted call is settled exactly once
 * (`call.settled`), whatever path it ends on.
 */
import { type FloatPrice, floatCost, viewSettle } from "./admission.js";
import type { AnswerAccumulator } from "./answer.js";
import type { Episode } from "./episodes.js";
import type { CallAbort } from "./http.js";
import { costOf, settle, type Usage } from "./ledger.js";
import { type Pico, picoToUsd } from "./money.js";
import type { ModelPrice } from "./prices.js";
import type { Receipt, ReceiptQueue } from "./receipt.js";

/** One call from arrival to receipt. */
export interface Call {
  ep: Episode;
  seq: number;
  startedIso: string;
  t0: number;
  /** Unix seconds when the call was forwarded (or refused). */
  ts: number;
  model: string;
  stream: boolean;
  price: ModelPrice | undefined;
  fprice: FloatPrice | undefined;
  promptEstimate: number;
  /** The reservation in the exact ledger, and in upstream's view. */
  reserved: Pico;
  reservedF: number;
  /** The call's worst case (exposure.ts), held while it is in flight. */
  worst: Pico;
  maxTokens: number | null;
  clamped: boolean;
  retries: number;
  retryRids: string[];
  /** Upstream's `err` so far (the text of a first-chunk error that was retried). */
  err: string | null;
  tForward: number;
  ttfb: number | null;
  upstreamStatus: number | null;
  /** X-Engy-Request-Id of the last attempt. */
  headerRid: string | null;
  requestId: string | null;
  ac: CallAbort | null;
  /** Admitted: its reservation and worst case are booked until it settles. */
  admitted: boolean;
  /** The last attempt reached the provider (it may bill it). */
  reached: boolean;
  /** The client closed its connection (the answer is still read and booked). */
  clientGone: boolean;
  /** Settled (exactly once; its receipt follows). */
  settled: boolean;
}

export function newCall(ep: Episode, t0: number): Call {
  return {
    ep,
    seq: 0,
    startedIso: new Date().toISOString(),
    t0,
    ts: 0,
    model: "",
    stream: false,
    price: undefined,
    fprice: undefined,
    promptEstimate: 0,
    reserved: 0n,
    reservedF: 0,
    worst: 0n,
    maxTokens: null,
    clamped: false,
    retries: 0,
    retryRids: [],
    err: null,
    tForward: 0,
    ttfb: null,
    upstreamStatus: null,
    headerRid: null,
    requestId: null,
    ac: null,
    admitted: false,
    reached: false,
    clientGone: false,
    settled: false,
  };
}

/**
 * How a forwarded call ended:
 *  - "usage": a 200 answer; billed on the provider's usage, or $0 when it sent none (as upstream);
 *  - "none": the provider's error (after retries), not billed;
 *  - "lost": no usage can be had (cut, timed out, aborted): booked at its reservation when the
 *    provider was reached, since the provider may bill it.
 */
export type Billing = "usage" | "none" | "lost";

export interface Outcome {
  status: number;
  acc?: AnswerAccumulator;
  billing: Billing;
  /** Upstream's meter would never have settled it (its handler raised): its reservation stays in the view. */
  viewLeak: boolean;
  truncated: boolean;
  errorCode: string | null;
  /** Upstream's `err` for the row, when it is not derived from the rest. */
  err?: string | null;
}

export interface Booked {
  actual: Pico;
  usage: Usage | null;
  /** Booked at the reservation (no usage could be had). */
  lost: boolean;
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;

export class Booking {
  constructor(private readonly queue: ReceiptQueue | null) {}

  /**
   * Settle a call now (what a response's budget header must reflect) and write its receipt right
   * after: fingerprints, the durable row and the log line wait until the bytes in hand are on their
   * way (process.nextTick runs after node's own uncork of the response).
   */
  finish(call: Call, o: Outcome): void {
    if (call.settled) return;
    const b = this.book(call, o);
    process.nextTick(() => {
      this.record(call, o, b);
      // Once its receipt is kept: a closing episode's summary waits for this (episodes.ts).
      call.ep.noteSettled();
    });
  }

  /** Settle a call's cost in the ledger, the view and the exposure, and its counters. */
  book(call: Call, o: Outcome): Booked {
    call.settled = true;
    const ep = call.ep;
    const price = call.price!;
    const acc = o.acc;
    let usage: Usage | null = null;
    let actual = 0n;
    let lost = false;
    if (o.billing !== "none" && acc?.usage) {
      usage = acc.usage;
      actual = costOf(price, usage);
    } else if (o.billing === "lost" && call.reached) {
      actual = call.reserved;
      lost = true;
    }
    const s = settle(ep.budget, call.reserved, actual);
    ep.budget = s.budget;
    if (!o.viewLeak) {
      const usd =
        usage === null
          ? 0
          : floatCost(call.fprice!, usage.promptTokens, usage.cachedTokens, usage.completionTokens);
      viewSettle(ep.view, call.reservedF, usd);
    }
    ep.calls++;
    ep.retries += call.retries;
    const now = performance.now();
    ep.lastCompletedAt = now;
    // As upstream counts them: a status other than 200. A 200 whose answer was cut is counted apart.
    if (o.status !== 200) ep.errors++;
    else if (o.truncated) ep.cut++;
    if (lost) ep.estimated += actual;
    // How long the provider kept this call waiting for its first byte (a call that got none: all along).
    const wait = call.ttfb ?? (call.reached ? now - call.tForward : 0);
    if (wait > ep.longestWaitMs) ep.longestWaitMs = wait;
    if (usage !== null) {
      ep.tokens.prompt += usage.promptTokens;
      ep.tokens.cached += Math.min(usage.cachedTokens, usage.promptTokens);
      ep.tokens.completion += usage.completionTokens;
    }
    let agg = ep.byModel.get(call.model);
    if (agg === undefined) {
      agg = { calls: 0, cost: 0n, prompt: 0, cached: 0, completion: 0 };
      ep.byModel.set(call.model, agg);
    }
    agg.calls++;
    agg.cost += actual;
    if (usage !== null) {
      agg.prompt += usage.promptTokens;
      agg.cached += Math.min(usage.cachedTokens, usage.promptTokens);
      agg.completion += usage.completionTokens;
    }
    if (s.overshoot > 0n)
      ep.log.warn(
        {
          seq: call.seq,
          model: call.model,
          overshoot_usd: picoToUsd(s.overshoot),
          reserved_usd: picoToUsd(call.reserved),
        },
        "meter.overshoot",
      );
    // Upstream's request id: a stream's x_engy (finish chunk) before the header; a body's header first.
    call.requestId = call.stream
      ? (acc?.engyRequestId ?? call.headerRid ?? acc?.responseId ?? null)
      : (call.headerRid ?? acc?.engyRequestId ?? acc?.responseId ?? null);
    if (call.admitted) {
      call.admitted = false;
      ep.forwarded--;
      ep.exposure -= call.worst;
      ep.pumpExposure();
    }
    return { actual, usage, lost };
  }

  /** A 402: upstream's row `{ts, model, status: 402, usd: 0, err: "cap"}`, nothing billed. */
  capRefused(call: Call, code: string): void {
    const ep = call.ep;
    ep.refusedCap++;
    ep.countRefusal("cap");
    call.settled = true;
    this.keep(call, {
      episode_id: ep.record.episodeId,
      seq: call.seq,
      started_at: call.startedIso,
      model: call.model,
      status: 402,
      upstream_status: null,
      stream: call.stream,
      prompt_tokens: 0,
      cached_tokens: 0,
      completion_tokens: 0,
      usd: 0,
      usd_pico: "0",
      reserved_usd: 0,
      reserved_pico: "0",
      max_tokens: null,
      clamped: false,
      retries: 0,
      ttfb_ms: null,
      duration_ms: round3(performance.now() - call.t0),
      request_id: null,
      content_sha: null,
      tool_sha: null,
      tool_calls: 0,
      finish_reason: null,
      truncated: false,
      usage_estimated: false,
      error_code: code,
      ts: call.ts,
      err: "cap",
    });
  }

  record(call: Call, o: Outcome, b: Booked): void {
    const { usage } = b;
    const answered = o.acc !== undefined && o.status === 200 && o.billing === "usage";
    const fp = answered ? o.acc!.fingerprint() : undefined;
    const err =
      o.err !== undefined
        ? o.err
        : (call.err ?? (o.billing === "usage" && usage === null ? "no-usage" : o.errorCode));
    const r: Receipt = {
      episode_id: call.ep.record.episodeId,
      seq: call.seq,
      started_at: call.startedIso,
      model: call.model,
      status: o.status,
      upstream_status: call.upstreamStatus,
      stream: call.stream,
      prompt_tokens: usage?.promptTokens ?? 0,
      cached_tokens: usage ? Math.min(usage.cachedTokens, usage.promptTokens) : 0,
      completion_tokens: usage?.completionTokens ?? 0,
      usd: picoToUsd(b.actual),
      usd_pico: b.actual.toString(),
      reserved_usd: picoToUsd(call.reserved),
      reserved_pico: call.reserved.toString(),
      max_tokens: call.maxTokens,
      clamped: call.clamped,
      retries: call.retries,
      ttfb_ms: call.ttfb === null ? null : round3(call.ttfb),
      duration_ms: round3(performance.now() - call.t0),
      request_id: call.requestId,
      content_sha: fp?.contentSha ?? null,
      tool_sha: fp?.toolSha ?? null,
      tool_calls: fp?.toolCalls ?? 0,
      finish_reason: o.acc?.finishReason ?? null,
      truncated: o.truncated,
      usage_estimated: b.lost,
      error_code: o.errorCode,
      ts: call.ts,
      err,
      retry_rids: call.retryRids,
    };
    if (fp !== undefined) r.content_len = fp.contentLen;
    this.keep(call, r);
  }

  /** Keep a receipt (memory, SQLite) within the episode's row bound, and log the notable ones. */
  private keep(call: Call, r: Receipt): void {
    const ep = call.ep;
    if (ep.record.receipts.length >= ep.limits.rowsPerEpisode) ep.rowsDropped++;
    else {
      ep.record.receipts.push(r);
      this.queue?.push(r);
    }
    // Every kept call is a receipt (SQLite, meter.json); the log carries the ones worth an
    // operator's eye at info (refused, failed, clamped, retried, cut) and plain successes at debug.
    const notable = r.status !== 200 || r.error_code !== null || r.clamped || r.retries > 0 || r.truncated;
    const log = ep.callLog;
    if (notable || log.isLevelEnabled("debug"))
      log[notable ? "info" : "debug"](
        {
          seq: r.seq,
          model: r.model,
          status: r.status,
          stream: r.stream,
          usd: r.usd,
          clamped: r.clamped,
          retries: r.retries,
          ttfb_ms: r.ttfb_ms,
          ms: r.duration_ms,
          code: r.error_code ?? undefined,
        },
        "meter.call",
      );
  }
}
