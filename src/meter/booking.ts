/**
 * Booking: a call's settlement against its episode's budget and counters, and its receipt. Every
 * call is settled exactly once (`call.settled`), whatever path it ends on.
 */
import type { AnswerAccumulator } from "./answer.js";
import type { Episode } from "./episodes.js";
import { estimateTextTokens } from "./estimate.js";
import type { CallAbort } from "./http.js";
import { costOf, settle, type Usage } from "./ledger.js";
import { minPico, type Pico, picoToUsd } from "./money.js";
import type { ModelPrice } from "./prices.js";
import type { Receipt, ReceiptQueue } from "./receipt.js";

/** One call from arrival to receipt. */
export interface Call {
  ep: Episode;
  seq: number;
  startedIso: string;
  t0: number;
  model: string;
  stream: boolean;
  price: ModelPrice | undefined;
  promptEstimate: number;
  choices: number;
  reserved: Pico;
  maxTokens: number | null;
  clamped: boolean;
  retries: number;
  tForward: number;
  ttfb: number | null;
  upstreamStatus: number | null;
  requestId: string | null;
  ac: CallAbort | null;
  /** Settled (exactly once; its receipt follows). */
  settled: boolean;
}

export function newCall(ep: Episode, t0: number): Call {
  return {
    ep,
    seq: 0,
    startedIso: new Date().toISOString(),
    t0,
    model: "",
    stream: false,
    price: undefined,
    promptEstimate: 0,
    choices: 1,
    reserved: 0n,
    maxTokens: null,
    clamped: false,
    retries: 0,
    tForward: 0,
    ttfb: null,
    upstreamStatus: null,
    requestId: null,
    ac: null,
    settled: false,
  };
}

export interface Outcome {
  status: number;
  acc?: AnswerAccumulator;
  /** Bill on the provider's usage, or an estimate bounded by the reservation when it sent none. */
  billable: boolean;
  truncated: boolean;
  errorCode: string | null;
}

export interface Booked {
  actual: Pico;
  usage: Usage | null;
  estimated: boolean;
}

export class Booking {
  constructor(private readonly queue: ReceiptQueue | null) {}

  /**
   * Settle a forwarded call now (what a response's budget header must reflect) and write its receipt
   * right after: fingerprints, the durable row and the log line wait until the bytes in hand are
   * on their way (process.nextTick runs after node's own uncork of the response).
   */
  finish(call: Call, o: Outcome): void {
    if (call.settled) return;
    const b = this.book(call, o);
    process.nextTick(() => this.record(call, o, b));
  }

  /** A call refused before forwarding: its receipt, nothing billed. */
  refused(call: Call, status: number, code: string): void {
    this.record(
      call,
      { status, billable: false, truncated: false, errorCode: code },
      { actual: 0n, usage: null, estimated: false },
    );
  }

  /**
   * Settle a call's cost against its episode's budget and counters (what the response's budget
   * header must already reflect). The receipt is written by record(), which may follow the response.
   */
  book(call: Call, o: Outcome): Booked {
    call.settled = true;
    const ep = call.ep;
    const price = call.price!;
    const acc = o.acc;
    let usage: Usage | undefined;
    let estimated = false;
    let actual = 0n;
    if (o.billable && acc?.usage) {
      usage = acc.usage;
      actual = costOf(price, usage);
    } else if (o.billable && acc !== undefined) {
      // No usage from the provider: the prompt at its estimate and the text seen so far, never more
      // than was reserved (an estimate must not close the episode as an overshoot would).
      const gen = acc.generatedChars();
      const completion = Math.min(
        estimateTextTokens(gen.ascii, gen.nonAscii),
        (call.maxTokens ?? 0) * call.choices,
      );
      usage = { promptTokens: call.promptEstimate, cachedTokens: 0, completionTokens: completion };
      estimated = true;
      const est = costOf(price, usage);
      actual = minPico(est, call.reserved);
    }
    const s = settle(ep.budget, call.reserved, actual);
    ep.budget = s.budget;
    ep.calls++;
    ep.lastCompletedAt = performance.now();
    if (o.status !== 200 || o.errorCode !== null) ep.errors++;
    if (usage !== undefined) {
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
    if (usage !== undefined) {
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
    if (acc !== undefined && call.requestId === null)
      call.requestId = acc.engyRequestId ?? acc.responseId ?? null;
    return { actual, usage: usage ?? null, estimated };
  }

  record(call: Call, o: Outcome, b: Booked): void {
    call.settled = true;
    const { usage } = b;
    const fp = o.acc?.fingerprint();
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
      usage_estimated: b.estimated,
      error_code: o.errorCode,
    };
    call.ep.record.receipts.push(r);
    this.queue?.push(r);
    // Every call is a receipt (SQLite, meter.json); the log carries the ones worth an operator's eye
    // at info (refused, failed, clamped, retried, cut) and plain successes only at debug.
    const notable = r.status !== 200 || r.error_code !== null || r.clamped || r.retries > 0 || r.truncated;
    const log = call.ep.callLog;
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

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}
