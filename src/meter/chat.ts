/**
 * The chat path, POST /v1/chat/completions: read and validate the request, reserve its worst case
 * against the episode's budget (or refuse), forward it with the operator's key (retrying what may
 * be retried), and hand the answer to the relay or pass the provider's error on.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "../log.js";
import { type AnswerAccumulator, errorInfo } from "./answer.js";
import { type Booking, type Call, newCall, type Outcome } from "./booking.js";
import { type Episode, remainingHeader } from "./episodes.js";
import { estimatePromptTokens, tokensFromChars, UNBILLED_KEYS } from "./estimate.js";
import { CallAbort, errorBody, headerString, readBody, readLimited, send, sendError, wait } from "./http.js";
import { DEFAULT_MAX_TOKENS, planReservation, remaining, reserve } from "./ledger.js";
import { formatUsd6, picoToUsd } from "./money.js";
import type { ModelPrice } from "./prices.js";
import { type RawScan, scanRequest, spliceMembers } from "./rawjson.js";
import { Relay } from "./relay.js";
import { type ChatKnobs, parseChatKnobs } from "./request.js";
import { parseRetryAfter, type RetryPolicy, retryDelayMs } from "./retry.js";
import { classifyFailure, type Upstream, type UpstreamResponse } from "./upstream.js";

export interface ChatOptions {
  prices: Map<string, ModelPrice>;
  allowed: ReadonlySet<string>;
  upstream: Upstream;
  retry: RetryPolicy;
  maxBodyBytes: number;
  booking: Booking;
  log: Logger;
}

/** Request members the meter replaces with its own values before forwarding. */
const REWRITTEN_KNOBS: ReadonlySet<string> = new Set([
  "max_tokens",
  "max_completion_tokens",
  "stream_options",
]);
const MAX_ERROR_BODY = 1 << 20;
const isBilled = (key: string) => !UNBILLED_KEYS.has(key);
const isNullish = (v: unknown): v is null | undefined => v === null || v === undefined;

/** The raw scan of a body JSON.parse accepted; null when it declines (or, defensively, fails). */
function scanOrNull(text: string): RawScan | null {
  try {
    return scanRequest(text, isBilled);
  } catch {
    return null;
  }
}

export class ChatPath {
  private readonly relay: Relay;

  constructor(private readonly o: ChatOptions) {
    this.relay = new Relay(o.booking, {
      aborted: (call, res, acc) => this.aborted(call, res, acc),
      failBeforeBytes: (call, res, out, message) => this.failBeforeBytes(call, res, out, message),
      retryable: (call) => call.retries < this.o.retry.maxRetries,
    });
  }

  async handle(req: IncomingMessage, res: ServerResponse, ep: Episode, t0: number): Promise<void> {
    const call = newCall(ep, t0);
    const max = this.o.maxBodyBytes;
    const raw = await readBody(req, max);
    if (raw === "too_large") {
      call.seq = ep.record.nextSeq++;
      ep.errors++;
      this.refuse(
        call,
        res,
        413,
        `request body over ${max} bytes`,
        "invalid_request_error",
        "body_too_large",
      );
      res.once("finish", () => req.destroy());
      return;
    }
    if (raw === "aborted") return;
    call.seq = ep.record.nextSeq++;
    let body: Record<string, unknown>;
    let knobs: ChatKnobs;
    const text = raw.toString("utf8");
    try {
      const parsed: unknown = JSON.parse(text);
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
        throw new Error("body: expected a JSON object");
      const r = parseChatKnobs(parsed as Record<string, unknown>);
      if (!r.ok) throw new Error(r.message);
      body = parsed as Record<string, unknown>;
      knobs = r.knobs;
    } catch (err) {
      ep.errors++;
      return this.refuse(
        call,
        res,
        400,
        `invalid request: ${(err as Error).message}`,
        "invalid_request_error",
        "invalid_request",
      );
    }
    call.model = knobs.model;
    call.stream = knobs.stream === true;

    if (!this.o.allowed.has(knobs.model)) {
      ep.refusedModel++;
      return this.refuse(
        call,
        res,
        400,
        `model '${knobs.model}' is not in the allowlist: ${[...this.o.allowed].join(", ")}`,
        "allowlist",
        "model_not_allowed",
      );
    }
    const price = this.o.prices.get(knobs.model)!;
    call.price = price;
    call.choices = knobs.n ?? 1;
    // The body is forwarded as the client wrote it, minus the knobs the meter rewrites (put in
    // front); the estimate is counted off the same text. A body the scan declines (a repeated
    // top-level key) is re-serialised from the parsed object instead.
    const scan = scanOrNull(text);
    let rest = "";
    if (scan !== null) call.promptEstimate = tokensFromChars(scan.billed);
    else {
      delete body.max_tokens;
      delete body.max_completion_tokens;
      delete body.stream_options;
      rest = JSON.stringify(body);
      call.promptEstimate = estimatePromptTokens(body, rest);
    }

    // Check and reserve in one synchronous step: no await between reading the room and booking it.
    const plan = planReservation(ep.budget, {
      price,
      promptTokens: call.promptEstimate,
      wantMaxTokens: knobs.max_tokens ?? knobs.max_completion_tokens ?? DEFAULT_MAX_TOKENS,
      choices: call.choices,
    });
    if (!plan.ok || ep.closed) {
      ep.refusedCap++;
      const why =
        plan.ok || plan.reason === "cap"
          ? `fewer than 64 completion tokens fit (remaining $${formatUsd6(remaining(ep.budget))})`
          : "the episode was closed after a call cost more than its reservation";
      return this.refuse(
        call,
        res,
        402,
        `episode safety cap $${picoToUsd(ep.budget.cap)}: ${why}`,
        "cap",
        plan.ok || plan.reason === "cap" ? "cap_exceeded" : "episode_closed_overshoot",
      );
    }
    ep.budget = reserve(ep.budget, plan.reserved);
    call.reserved = plan.reserved;
    call.maxTokens = plan.maxTokens;
    call.clamped = plan.clamped;
    if (plan.clamped) ep.clamped++;

    let head = `"max_tokens":${plan.maxTokens}`;
    if (call.stream)
      head += `,"stream_options":${JSON.stringify({ ...(knobs.stream_options ?? {}), include_usage: true })}`;
    else if (!isNullish(knobs.stream_options))
      head += `,"stream_options":${JSON.stringify(knobs.stream_options)}`;
    const forwardBody =
      scan !== null
        ? spliceMembers(text, scan.members, REWRITTEN_KNOBS, head)
        : rest === "{}"
          ? `{${head}}`
          : `{${head},${rest.slice(1)}`;

    const ac = new CallAbort();
    call.ac = ac;
    ep.inflight.add(ac);
    // Not removed afterwards (removal costs more than the check): once the call is settled it is inert.
    res.once("close", () => {
      if (!res.writableFinished && !call.settled) ac.abort("client_disconnected");
    });
    try {
      const outcome = await this.forward(call, forwardBody, res);
      this.o.booking.finish(call, outcome);
    } catch (err) {
      // Our bug: release the reservation before the router answers 500.
      this.o.booking.finish(call, {
        status: 500,
        billable: false,
        truncated: false,
        errorCode: "meter_internal_error",
      });
      throw err;
    } finally {
      ep.inflight.delete(ac);
    }
  }

  /** A call refused before forwarding: error response and receipt, nothing billed. */
  private refuse(
    call: Call,
    res: ServerResponse,
    status: number,
    message: string,
    type: string,
    code: string,
  ): void {
    sendError(res, status, message, type, code, remainingHeader(call.ep));
    this.o.booking.refused(call, status, code);
  }

  private async forward(call: Call, body: string, res: ServerResponse): Promise<Outcome> {
    const ac = call.ac!;
    const retry = this.o.retry;
    call.tForward = performance.now();
    for (;;) {
      let up: UpstreamResponse;
      try {
        up = await this.o.upstream.chatCompletions(body, ac);
      } catch (err) {
        const kind = ac.aborted ? "aborted" : classifyFailure(err);
        if (kind === "aborted") return this.aborted(call, res, undefined);
        if (kind === "connect") {
          const ms = retryDelayMs(retry, call.retries, undefined, Math.random());
          if (ms !== null && (await this.backoff(call, ms))) continue;
          if (ac.aborted) return this.aborted(call, res, undefined);
        }
        const timeout = kind === "timeout";
        const code = timeout ? "upstream_timeout" : "upstream_unreachable";
        return this.failBeforeBytes(
          call,
          res,
          { status: timeout ? 504 : 502, billable: false, truncated: false, errorCode: code },
          timeout ? "the model provider did not answer in time" : "the model provider is unreachable",
        );
      }
      call.upstreamStatus = up.statusCode;
      const rid = up.headers["x-engy-request-id"];
      if (typeof rid === "string" && rid) call.requestId = rid;

      if (up.statusCode === 429 || up.statusCode === 503) {
        const ms = retryDelayMs(
          retry,
          call.retries,
          parseRetryAfter(headerString(up.headers["retry-after"]), Date.now()),
          Math.random(),
        );
        if (ms !== null) {
          await up.body.dump().catch(() => undefined);
          if (await this.backoff(call, ms)) continue;
          return this.aborted(call, res, undefined);
        }
      }
      if (up.statusCode !== 200) return this.passError(call, up, res);
      const ctype = headerString(up.headers["content-type"]) ?? "";
      if (ctype.startsWith("text/event-stream")) {
        const r = await this.relay.stream(call, up, res);
        if (r !== "retry") return r;
        if (await this.backoff(call, retryDelayMs(retry, call.retries, undefined, Math.random()) ?? 0))
          continue;
        return this.aborted(call, res, undefined);
      }
      return this.relay.body(call, up, res);
    }
  }

  /** Wait before a retry; false when the call was aborted meanwhile. */
  private async backoff(call: Call, ms: number): Promise<boolean> {
    call.retries++;
    call.ep.log.debug(
      { seq: call.seq, retry: call.retries, wait_ms: ms, status: call.upstreamStatus },
      "meter.retry",
    );
    return wait(ms, call.ac!);
  }

  private aborted(call: Call, res: ServerResponse, acc: AnswerAccumulator | undefined): Outcome {
    const reason = call.ac!.reason ?? "client_disconnected";
    const billable = acc !== undefined;
    if (!res.headersSent && !res.destroyed && reason !== "client_disconnected")
      return this.failBeforeBytes(
        call,
        res,
        { status: 503, acc, billable, truncated: true, errorCode: reason },
        `call aborted: ${reason}`,
      );
    if (!res.writableEnded) res.destroy();
    // 499: the client closed the request (nginx's convention); a started stream keeps its 200.
    return {
      status: res.headersSent ? res.statusCode : 499,
      acc,
      billable,
      truncated: true,
      errorCode: reason,
    };
  }

  /** A non-200 answer after retries: passed through OpenAI-shaped, nothing billed. */
  private async passError(call: Call, up: UpstreamResponse, res: ServerResponse): Promise<Outcome> {
    let buf: Buffer;
    try {
      buf = await readLimited(up.body, MAX_ERROR_BODY);
    } catch {
      buf = Buffer.alloc(0);
    }
    let status = up.statusCode;
    let out = buf;
    let code = `upstream_${status}`;
    let parsed: unknown;
    try {
      parsed = JSON.parse(buf.toString("utf8"));
    } catch {
      parsed = undefined;
    }
    const info =
      typeof parsed === "object" && parsed !== null ? errorInfo(parsed as Record<string, unknown>) : null;
    if (status === 401 || status === 403) {
      // The operator's key was refused: an infra fault, not the policy's token (which would be 401 here).
      status = 502;
      code = "upstream_auth_failed";
      out = Buffer.from(
        errorBody("the model provider refused the validator's credentials", "upstream_error", code),
      );
    } else if (info === null) {
      const text = buf.toString("utf8").slice(0, 300);
      out = Buffer.from(errorBody(text || `upstream status ${status}`, "upstream_error", code));
    }
    if (status < 400) status = 502;
    const outcome: Outcome = { status, billable: false, truncated: false, errorCode: code };
    this.o.booking.finish(call, outcome);
    send(res, status, out, remainingHeader(call.ep));
    return outcome;
  }

  /** Settle first (so the budget header is current), then answer with an OpenAI-shaped error. */
  private failBeforeBytes(call: Call, res: ServerResponse, o: Outcome, message: string): Outcome {
    this.o.booking.finish(call, o);
    sendError(
      res,
      o.status,
      message,
      "upstream_error",
      o.errorCode ?? "upstream_error",
      remainingHeader(call.ep),
    );
    return o;
  }
}
