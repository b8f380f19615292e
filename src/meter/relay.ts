/**
 * The relay: the provider's 200 answer to the client, non-stream or stream, with what the meter
 * learns from it (usage, fingerprints, request id) gathered on the side.
 */
import type { ServerResponse } from "node:http";
import { AnswerAccumulator, errorInfo, isUsageOnlyEvent } from "./answer.js";
import type { Booking, Call, Outcome } from "./booking.js";
import { remainingHeader } from "./episodes.js";
import { drained, headerString, REMAINING_HEADER, readAll } from "./http.js";
import type { SseEvent } from "./sse.js";
import { SseSplitter } from "./sse.js";
import { classifyFailure, type UpstreamResponse } from "./upstream.js";

/** What the chat path lends the relay for its endings. */
export interface RelayHost {
  /** The call was aborted (client gone, episode closed, meter stopping). */
  aborted(call: Call, res: ServerResponse, acc: AnswerAccumulator | undefined): Outcome;
  /** Settle, then answer with an OpenAI-shaped error (nothing was sent yet). */
  failBeforeBytes(call: Call, res: ServerResponse, o: Outcome, message: string): Outcome;
  /** Whether the first event's error is worth a retry (budget of retries left). */
  retryable(call: Call): boolean;
}

export class Relay {
  constructor(
    private readonly booking: Booking,
    private readonly host: RelayHost,
  ) {}

  /** Non-stream answer: read whole, settle, then send the upstream bytes unchanged with the settled budget. */
  async body(call: Call, up: UpstreamResponse, res: ServerResponse): Promise<Outcome> {
    const acc = new AnswerAccumulator();
    let buf: Buffer;
    try {
      buf = await readAll(up.body, (t) => {
        call.ttfb ??= t - call.tForward;
      });
    } catch (err) {
      if (call.ac!.aborted) return this.host.aborted(call, res, acc);
      const code = classifyFailure(err) === "timeout" ? "upstream_timeout" : "upstream_cut";
      return this.host.failBeforeBytes(
        call,
        res,
        { status: 502, acc, billable: true, truncated: true, errorCode: code },
        "the model provider's answer was cut",
      );
    }
    try {
      acc.onBody(JSON.parse(buf.toString("utf8")));
    } catch {
      acc.unparsable++;
    }
    const outcome: Outcome = {
      status: 200,
      acc,
      billable: true,
      truncated: false,
      errorCode: acc.error
        ? "upstream_error_object"
        : acc.usage
          ? null
          : acc.badUsage
            ? "bad_usage"
            : "no_usage",
    };
    // Settle first so the header reflects this call's real cost; the receipt (fingerprints, the
    // durable row, the log line) is written once the bytes are on their way, in the same tick.
    const b = this.booking.book(call, outcome);
    const headers: Record<string, string | number> = {
      "content-type": headerString(up.headers["content-type"]) ?? "application/json",
      "content-length": buf.length,
      [REMAINING_HEADER]: remainingHeader(call.ep),
    };
    if (call.requestId) headers["x-engy-request-id"] = call.requestId;
    try {
      res.writeHead(200, headers);
      res.end(buf);
    } finally {
      // Always: it marks the call settled, so nothing can book it a second time.
      this.booking.record(call, outcome, b);
    }
    return outcome;
  }

  /**
   * Stream answer: bytes go to the client as they arrive. When the client did not ask for usage, the
   * injected usage-only event is held back (events are forwarded whole in that mode); otherwise every
   * chunk is written before it is parsed. A retryable error as the very first event is retried.
   */
  async stream(
    call: Call,
    up: UpstreamResponse,
    res: ServerResponse,
    stripUsage: boolean,
  ): Promise<Outcome | "retry"> {
    const acc = new AnswerAccumulator();
    const splitter = new SseSplitter();
    const abort = call.ac!;
    const body = up.body;
    let started = false;
    let bug: unknown;
    const deferred: string[] = [];
    // Chunks are handled in 'data' events (an async iterator costs more per call than the rest of
    // the relay); a client socket that is full pauses the upstream until it drains.
    const ending = await new Promise<"end" | "cut" | "retry">((resolve) => {
      let done = false;
      const finish = (how: "end" | "cut" | "retry") => {
        if (done) return;
        done = true;
        body.off("data", onData);
        body.off("end", onEnd);
        body.off("error", onCut);
        body.off("close", onCut);
        abort.off("abort", onCut);
        resolve(how);
      };
      const onEnd = () => finish("end");
      const onCut = () => finish("cut");
      const onData = (chunk: Buffer) => {
        if (done) return;
        try {
          const events = splitter.push(chunk);
          if (!started) {
            call.ttfb ??= performance.now() - call.tForward;
            if (this.firstEventRetryable(call, events)) return finish("retry");
            started = true;
            const headers: Record<string, string> = {
              "content-type": headerString(up.headers["content-type"]) ?? "text/event-stream",
              "cache-control": "no-cache",
              [REMAINING_HEADER]: remainingHeader(call.ep),
            };
            if (call.requestId) headers["x-engy-request-id"] = call.requestId;
            res.writeHead(200, headers);
          }
          let ok: boolean;
          if (!stripUsage) {
            ok = res.write(chunk);
            for (const ev of events) if (ev.data !== null) acc.onEvent(ev.data);
          } else {
            try {
              ok = writeEvents(res, chunk, splitter.exact, events, deferred);
            } finally {
              // After the write: the client's bytes do not wait for the answer's bookkeeping.
              for (const d of deferred) acc.onEvent(d);
              deferred.length = 0;
            }
          }
          if (!ok) {
            body.pause();
            drained(res, abort).then(() => body.resume());
          }
        } catch (err) {
          bug = err;
          finish("cut");
        }
      };
      body.on("data", onData);
      body.once("end", onEnd);
      body.once("error", onCut);
      body.once("close", onCut);
      abort.once("abort", onCut);
    });
    if (bug !== undefined) {
      body.destroy();
      if (!res.headersSent) throw bug;
      res.destroy();
      throw bug;
    }
    if (ending === "retry") {
      body.destroy();
      return "retry";
    }
    if (ending === "cut") {
      body.destroy();
      tail(splitter, acc, null, false);
      if (abort.aborted) return this.host.aborted(call, res, acc);
      // The upstream cut the stream (socket closed, body timeout): pass the cut on, settle on what is known.
      if (!started)
        return this.host.failBeforeBytes(
          call,
          res,
          { status: 502, acc, billable: true, truncated: true, errorCode: "upstream_cut" },
          "the model provider's stream was cut before any token",
        );
      res.destroy();
      return { status: 200, acc, billable: true, truncated: true, errorCode: "upstream_cut" };
    }
    if (!started)
      return this.host.failBeforeBytes(
        call,
        res,
        { status: 502, acc, billable: true, truncated: true, errorCode: "upstream_empty" },
        "the model provider sent an empty stream",
      );
    tail(splitter, acc, res, stripUsage);
    res.end();
    const truncated = !acc.sawDone && acc.usage === undefined;
    return {
      status: 200,
      acc,
      billable: true,
      truncated,
      errorCode: acc.error
        ? "upstream_stream_error"
        : acc.usage
          ? null
          : acc.badUsage
            ? "bad_usage"
            : truncated
              ? "upstream_cut"
              : "no_usage",
    };
  }

  private firstEventRetryable(call: Call, events: SseEvent[]): boolean {
    const first = events.find((e) => e.data !== null);
    if (first === undefined || !first.data!.includes('"error"')) return false;
    let obj: unknown;
    try {
      obj = JSON.parse(first.data!);
    } catch {
      return false;
    }
    if (typeof obj !== "object" || obj === null) return false;
    const info = errorInfo(obj as Record<string, unknown>);
    return info?.retryable === true && this.host.retryable(call);
  }
}

/** Strip mode: forward complete events, holding back only the usage-only one. */
function writeEvents(
  res: ServerResponse,
  chunk: Buffer,
  exact: boolean,
  events: SseEvent[],
  deferred: string[],
): boolean {
  if (events.length === 0) return true;
  const out: Buffer[] = [];
  for (const ev of events) {
    if (ev.data === null) out.push(ev.raw);
    else {
      // A chunk naming usage may be the injected one the client did not ask for: that one event
      // is parsed now to decide; every event reaches the accumulator, in order, after the write.
      deferred.push(ev.data);
      if (!ev.data.includes('"usage"') || !isUsageOnlyEvent(ev.data)) out.push(ev.raw);
    }
  }
  if (out.length === 0) return true;
  // Nothing held back from a chunk that was whole events: forward the chunk as it came.
  if (exact && out.length === events.length) return res.write(chunk);
  return res.write(out.length === 1 ? out[0]! : Buffer.concat(out));
}

/** The unterminated last event: parse it, and forward it when the client is still there. */
function tail(
  splitter: SseSplitter,
  acc: AnswerAccumulator,
  res: ServerResponse | null,
  stripUsage: boolean,
): void {
  const last = splitter.end();
  if (last === null) return;
  const usageOnly = last.data !== null && acc.onEvent(last.data);
  if (res !== null && stripUsage && !usageOnly) res.write(last.raw);
}
