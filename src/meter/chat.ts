/**
 * The chat path, POST /v1/chat/completions: wait for a call slot and room for the body (bounds),
 * read and parse the request (request.ts), refuse what upstream's meter refuses, admit the call by
 * upstream's rule and the real-spend bound (admission.ts, exposure.ts), forward it with the
 * operator's key (retrying as upstream retries), and hand the answer to the relay or pass the
 * provider's error on.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "../log.js";
import { type FloatPrice, pyFixed6, remainingAfter, reserveFor, viewReserve, viewRoom } from "./admission.js";
import type { AnswerAccumulator } from "./answer.js";
import { type Booking, type Call, newCall, type Outcome } from "./booking.js";
import { type Episode, remainingHeader } from "./episodes.js";
import { fitsBeside, worstCase } from "./exposure.js";
import type { Gate } from "./gate.js";
import {
  CallAbort,
  headerString,
  readBody,
  readLimited,
  redactSecret,
  send,
  sendError,
  wait,
} from "./http.js";
import { reserve } from "./ledger.js";
import type { AnswerBounds } from "./pace.js";
import type { ModelPrice } from "./prices.js";
import { Relay } from "./relay.js";
import { type ChatRequest, forwardBody, InvalidRequest, interpretRequest } from "./request.js";
import { firstChunkRetryable, type RetryPolicy, retryDelayMs } from "./retry.js";
import type { ScanPool } from "./scan-pool.js";
import { classifyFailure, type Upstream, type UpstreamResponse } from "./upstream.js";

export interface ChatOptions {
  prices: Map<string, ModelPrice>;
  fprices: Map<string, FloatPrice>;
  allowed: ReadonlySet<string>;
  upstream: Upstream;
  retry: RetryPolicy;
  maxBodyBytes: number;
  /** Request bytes held by all calls (bodies being read, and forwarded bodies until the call ends). */
  bytes: Gate;
  /** Answer bytes held by all calls, and the idle window of a client that stops reading (pace.ts). */
  answers: AnswerBounds;
  booking: Booking;
  /** Where request bodies are scanned (on the loop, or off it when large). */
  scans: ScanPool;
  /** Redacted from provider error bodies. */
  apiKey: string | undefined;
  log: Logger;
}

const MAX_ERROR_BODY = 1 << 20;

type Admit = "admitted" | "closed" | "gone" | { refused: number };

export class ChatPath {
  private readonly relay: Relay;

  constructor(private readonly o: ChatOptions) {
    this.relay = new Relay(
      o.booking,
      {
        aborted: (call, res, acc) => this.aborted(call, res, acc),
        failBeforeBytes: (call, res, out, message, hdr) => this.failBeforeBytes(call, res, out, message, hdr),
      },
      o.answers,
    );
  }

  async handle(req: IncomingMessage, res: ServerResponse, ep: Episode, t0: number): Promise<void> {
    const call = newCall(ep, t0);
    const ac = new CallAbort();
    call.ac = ac;
    ep.inflight.add(ac);
    res.once("close", () => {
      if (!res.writableFinished) {
        call.clientGone = true;
        ac.leave();
      }
    });
    try {
      const max = this.o.maxBodyBytes;
      const declared = Number(req.headers["content-length"]);
      if (Number.isFinite(declared) && declared > max) return this.tooLarge(req, res, ep);
      // Bounds, before a byte of the body is read: a call slot of the token, then room for the body
      // and its forwarded copy (per token, then overall). Waiters are served in order.
      const need = 2 * (Number.isFinite(declared) ? declared : max);
      const cancel = (f: () => void) => ac.onEnd(f);
      if (!(await ep.callGate.acquire(1, cancel))) return this.ended(call, res);
      try {
        if (!(await ep.byteGate.acquire(need, cancel))) return this.ended(call, res);
        try {
          if (!(await this.o.bytes.acquire(need, cancel))) return this.ended(call, res);
          try {
            await this.call(req, res, call);
          } finally {
            this.o.bytes.release(need);
          }
        } finally {
          ep.byteGate.release(need);
        }
      } finally {
        ep.callGate.release(1);
      }
    } finally {
      ep.inflight.delete(ac);
    }
  }

  private async call(req: IncomingMessage, res: ServerResponse, call: Call): Promise<void> {
    const ep = call.ep;
    const raw = await readBody(req, this.o.maxBodyBytes);
    if (raw === "too_large") return this.tooLarge(req, res, ep);
    if (raw === "aborted") return;
    if (call.ac!.aborted) return this.ended(call, res);
    call.seq = ep.record.nextSeq++;
    // Upstream computes the budget header once the body is read, before anything else.
    const hdrPre = remainingHeader(ep);
    let r: ChatRequest;
    try {
      const scanned = await this.o.scans.scan(raw);
      r = interpretRequest(scanned.raw, scanned.scan);
    } catch (err) {
      if (call.ac!.aborted) return this.ended(call, res);
      if (!(err instanceof InvalidRequest)) throw err;
      ep.countRefusal("invalid_request");
      return sendError(
        res,
        400,
        `invalid request: ${err.message}`,
        "invalid_request_error",
        "invalid_request",
        hdrPre,
      );
    }
    call.stream = r.stream;
    const model = r.model;
    if (typeof model !== "string" || !this.o.allowed.has(model)) {
      // Upstream: no row, a counter.
      ep.refusedModel++;
      ep.countRefusal("model");
      return sendError(
        res,
        400,
        `model ${JSON.stringify(model ?? null)} is not in the allowlist: ${[...this.o.allowed].join(", ")}`,
        "allowlist",
        "model_not_allowed",
        hdrPre,
      );
    }
    call.model = model;
    call.price = this.o.prices.get(model)!;
    call.fprice = this.o.fprices.get(model)!;
    call.promptEstimate = r.promptEstimate;

    const admit = await this.admit(call, r);
    call.ts = Math.round(Date.now()) / 1000;
    if (admit === "gone") return;
    if (admit === "closed") return this.ended(call, res);
    if (admit !== "admitted") {
      const room = Math.max(0, admit.refused);
      sendError(
        res,
        402,
        `episode safety cap $${ep.view.cap.toFixed(2)}: this call cannot fit (remaining $${room.toFixed(4)})`,
        "cap",
        "cap_exceeded",
        pyFixed6(room),
      );
      return this.o.booking.capRefused(call, "cap_exceeded");
    }
    const body = forwardBody(r, call.maxTokens!);
    try {
      const outcome = await this.forward(call, body, res, hdrPre);
      this.o.booking.finish(call, outcome);
    } catch (err) {
      // Our bug: settle before the router answers 500.
      this.o.booking.finish(call, {
        status: 500,
        billing: "lost",
        viewLeak: true,
        truncated: false,
        errorCode: "meter_internal_error",
      });
      throw err;
    }
  }

  /**
   * Upstream's rule decides refusal and clamp; the real-spend bound decides whether the call may run
   * beside the calls in flight. A call that must wait is decided again (upstream's rule, the new
   * spend) when they have settled; calls are decided in arrival order.
   */
  private admit(call: Call, r: ChatRequest): Promise<Admit> | Admit {
    const ep = call.ep;
    const price = call.price!;
    const attempt = (): Admit | "wait" => {
      if (ep.closed) return "closed";
      const a = reserveFor(call.fprice!, r.promptEstimate, r.want, viewRoom(ep.view), r.n);
      if (!a.ok) return { refused: a.room };
      const worst = worstCase(price, r.promptBound, a.maxTokens, r.n);
      if (ep.forwarded > 0 && !fitsBeside(ep.exposure, worst, ep.budget.cap, ep.budget.spent)) return "wait";
      viewReserve(ep.view, a.reserved);
      call.reservedF = a.reserved;
      call.reserved =
        BigInt(r.promptEstimate) * price.prompt +
        BigInt(Math.max(0, a.maxTokens)) * BigInt(r.n) * price.completion;
      ep.budget = reserve(ep.budget, call.reserved);
      call.worst = worst;
      ep.exposure += worst;
      ep.forwarded++;
      call.admitted = true;
      call.maxTokens = a.maxTokens;
      call.clamped = a.clamped;
      if (a.clamped) ep.clamped++;
      return "admitted";
    };
    if (ep.exposureQueue.length === 0) {
      const d = attempt();
      if (d !== "wait") return d;
    }
    ep.waited++;
    return new Promise<Admit>((resolve) => {
      const waiter = {
        attempt: () => {
          const d = attempt();
          if (d === "wait") return false;
          resolve(d);
          return true;
        },
        abandon: () => resolve("closed"),
      };
      ep.exposureQueue.push(waiter);
      call.ac!.onEnd(() => {
        const k = ep.exposureQueue.indexOf(waiter);
        if (k < 0) return;
        ep.exposureQueue.splice(k, 1);
        resolve(call.ac!.aborted ? "closed" : "gone");
        ep.pumpExposure();
      });
    });
  }

  private async forward(call: Call, body: Buffer, res: ServerResponse, hdrPre: string): Promise<Outcome> {
    const ac = call.ac!;
    const retry = this.o.retry;
    for (;;) {
      call.tForward = performance.now();
      call.reached = true;
      let up: UpstreamResponse;
      try {
        up = await this.o.upstream.chatCompletions(body, ac);
      } catch (err) {
        if (ac.aborted) return this.aborted(call, res, undefined);
        const kind = classifyFailure(err);
        // A connection that never opened cannot be billed; anything after may have been.
        if (kind === "connect") call.reached = false;
        const timeout = kind === "timeout";
        const code = timeout ? "upstream_timeout" : "upstream_unreachable";
        return this.failBeforeBytes(
          call,
          res,
          { status: timeout ? 504 : 502, billing: "lost", viewLeak: true, truncated: false, errorCode: code },
          timeout ? "the model provider did not answer in time" : "the model provider is unreachable",
          hdrPre,
        );
      }
      call.upstreamStatus = up.statusCode;
      const rid = headerString(up.headers["x-engy-request-id"]);
      call.headerRid = rid ? rid : null;

      if (up.statusCode === 429 || up.statusCode === 503) {
        const ms = retryDelayMs(retry, "status", call.retries);
        if (ms !== null) {
          if (call.headerRid) call.retryRids.push(call.headerRid);
          await up.body.dump().catch(() => undefined);
          call.reached = false;
          if (await this.backoff(call, ms)) continue;
          return this.gaveUp(call, res);
        }
      }
      if (up.statusCode !== 200) return this.passError(call, up, res, hdrPre);
      if (!call.stream) return this.relay.body(call, up, res);
      const out = await this.relay.stream(
        call,
        up,
        res,
        hdrPre,
        (first) => firstChunkRetryable(first) && retryDelayMs(retry, "stream", call.retries) !== null,
      );
      if (typeof out !== "string") return out;
      // An error as the first chunk: retried, its text kept as upstream keeps it in the row's err.
      if (call.headerRid) call.retryRids.push(call.headerRid);
      call.reached = false;
      if (await this.backoff(call, retryDelayMs(retry, "stream", call.retries)!)) continue;
      return this.gaveUp(call, res);
    }
  }

  /** Wait before a retry; false when the call was aborted or its client left meanwhile. */
  private async backoff(call: Call, ms: number): Promise<boolean> {
    call.retries++;
    call.ep.log.debug(
      { seq: call.seq, retry: call.retries, wait_ms: ms, status: call.upstreamStatus },
      "meter.retry",
    );
    return wait(ms, call.ac!);
  }

  /** A retry that will not happen: the call was aborted, or its client left, during the wait. */
  private gaveUp(call: Call, res: ServerResponse): Outcome {
    if (call.ac!.aborted) return this.aborted(call, res, undefined);
    if (!res.writableEnded) res.destroy();
    return {
      status: 499,
      billing: "none",
      viewLeak: true,
      truncated: false,
      errorCode: "client_disconnected",
    };
  }

  /** Aborted by close() or stop(): settled on what is known (a lost call is booked at its reservation). */
  private aborted(call: Call, res: ServerResponse, acc: AnswerAccumulator | undefined): Outcome {
    const reason = call.ac!.reason ?? "episode_closed";
    if (!res.headersSent && !res.destroyed && !call.clientGone)
      return this.failBeforeBytes(
        call,
        res,
        { status: 503, acc, billing: "lost", viewLeak: true, truncated: true, errorCode: reason },
        `call aborted: ${reason}`,
        remainingHeader(call.ep),
      );
    if (!res.writableEnded) res.destroy();
    // 499: the client closed the request (nginx's convention); a started stream keeps its 200.
    return {
      status: res.headersSent ? res.statusCode : 499,
      acc,
      billing: "lost",
      viewLeak: true,
      truncated: true,
      errorCode: reason,
    };
  }

  /**
   * A non-200 answer after retries, passed on as it came (status, body, content type) with the
   * operator's key redacted, and not billed. One exception: the provider refusing the operator's key
   * (401/403) is a 502 `upstream_auth_failed` — the validator's fault, never the policy's.
   */
  private async passError(
    call: Call,
    up: UpstreamResponse,
    res: ServerResponse,
    hdrPre: string,
  ): Promise<Outcome> {
    let buf: Buffer;
    try {
      buf = redactSecret(await readLimited(up.body, MAX_ERROR_BODY), this.o.apiKey);
    } catch {
      buf = Buffer.alloc(0);
    }
    const err = buf.subarray(0, 300).toString("utf8");
    const status = up.statusCode;
    if (status === 401 || status === 403) {
      const o: Outcome = {
        status: 502,
        billing: "none",
        viewLeak: false,
        truncated: false,
        errorCode: "upstream_auth_failed",
        err,
      };
      return this.failBeforeBytes(
        call,
        res,
        o,
        "the model provider refused the validator's credentials",
        hdrPre,
      );
    }
    const o: Outcome = {
      status,
      billing: "none",
      viewLeak: false,
      truncated: false,
      errorCode: `upstream_${status}`,
      err,
    };
    this.o.booking.finish(call, o);
    const type = (headerString(up.headers["content-type"]) ?? "application/json").split(";")[0]!.trim();
    if (!call.clientGone)
      send(
        res,
        status,
        buf,
        call.stream ? hdrPre : pyFixed6(remainingAfter(call.ep.view)),
        type || "application/json",
      );
    return o;
  }

  /** Settle first, then answer with an OpenAI-shaped error (nothing was sent yet). */
  private failBeforeBytes(
    call: Call,
    res: ServerResponse,
    o: Outcome,
    message: string,
    hdr: string,
  ): Outcome {
    this.o.booking.finish(call, o);
    if (!call.clientGone)
      sendError(res, o.status, message, "upstream_error", o.errorCode ?? "upstream_error", hdr);
    return o;
  }

  /** Over the body limit (upstream: 413, no row): counted; the rest of the body is not read. */
  private tooLarge(req: IncomingMessage, res: ServerResponse, ep: Episode): void {
    ep.countRefusal("body_too_large");
    sendError(
      res,
      413,
      `request body over ${this.o.maxBodyBytes} bytes`,
      "invalid_request_error",
      "body_too_large",
      remainingHeader(ep),
    );
    res.once("finish", () => req.destroy());
  }

  /** The episode was closed or the meter stopped before the call was forwarded. */
  private ended(call: Call, res: ServerResponse): void {
    if (call.clientGone || res.headersSent) return;
    const reason = call.ac!.reason ?? "episode_closed";
    sendError(res, 503, `call aborted: ${reason}`, "upstream_error", reason, remainingHeader(call.ep));
  }
}
