/**
 * The relay: the provider's 200 answer to the client, non-stream or stream, with what the meter
 * learns from it (usage, fingerprints, request id) gathered on the side.
 */
import type { ServerResponse } from "node:http";
import { AnswerAccumulator, errorInfo } from "./answer.js";
import type { Booking, Call, Outcome } from "./booking.js";
import { remainingHeader } from "./episodes.js";
import { drained, headerString, REMAINING_HEADER, readAll } from "./http.js";
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
    // durable row, the log line) is written once the bytes are on their way.
    this.booking.finish(call, outcome);
    const headers: Record<string, string | number> = {
      "content-type": headerString(up.headers["content-type"]) ?? "application/json",
      "content-length": buf.length,
      [REMAINING_HEADER]: remainingHeader(call.ep),
    };
    if (call.requestId) headers["x-engy-request-id"] = call.requestId;
    res.writeHead(200, headers);
    res.end(buf);
    return outcome;
  }

  /**
   * Stream answer, passed through: every chunk is written to the client the moment it arrives, as
   * it came (the usage chunk included, as upstream's meter passes it). What the meter learns from
   * the events (usage, request id, fingerprints) is parsed on the side, after the bytes have left.
   * A retryable error as the very first event is retried (nothing was sent yet).
   */
  async stream(call: Call, up: UpstreamResponse, res: ServerResponse): Promise<Outcome | "retry"> {
    const acc = new AnswerAccumulator();
    const splitter = new SseSplitter();
    const abort = call.ac!;
    const body = up.body;
    let started = false;
    let bug: unknown;
    // Chunks written but not yet parsed; parsed after the socket's uncork (process.nextTick, queued
    // after node's own), so the client's bytes never wait for the bookkeeping.
    let unparsed: Buffer[] = [];
    const parse = () => {
      const chunks = unparsed;
      unparsed = [];
      for (const c of chunks) for (const ev of splitter.push(c)) if (ev.data !== null) acc.onEvent(ev.data);
    };
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
          if (!started) {
            call.ttfb ??= performance.now() - call.tForward;
            if (this.firstEventRetryable(call, chunk)) return finish("retry");
            started = true;
            const headers: Record<string, string> = {
              "content-type": headerString(up.headers["content-type"]) ?? "text/event-stream",
              "cache-control": "no-cache",
              [REMAINING_HEADER]: remainingHeader(call.ep),
            };
            if (call.requestId) headers["x-engy-request-id"] = call.requestId;
            res.writeHead(200, headers);
          }
          const ok = res.write(chunk);
          if (unparsed.length === 0) process.nextTick(parse);
          unparsed.push(chunk);
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
    parse();
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
    tail(splitter, acc);
    if (ending === "cut") {
      body.destroy();
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

  /** The first chunk carries an error worth retrying (an overload or concurrency error event). */
  private firstEventRetryable(call: Call, chunk: Buffer): boolean {
    if (chunk.indexOf('"error"') < 0) return false;
    const first = new SseSplitter().push(chunk).find((e) => e.data !== null);
    if (first === undefined) return false;
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

/** The unterminated last event (a stream that ended without a blank line): parse it too. */
function tail(splitter: SseSplitter, acc: AnswerAccumulator): void {
  const last = splitter.end();
  if (last !== null && last.data !== null) acc.onEvent(last.data);
}
