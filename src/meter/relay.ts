/**
 * The relay: the provider's 200 answer to the client, non-stream or stream, with what the meter
 * learns from it (usage, fingerprints, request id) gathered on the side. A client that leaves does
 * not end the call: the answer is read to its end and booked on its usage, as the provider bills it.
 */
import type { ServerResponse } from "node:http";
import { pyFixed6, remainingAfter } from "./admission.js";
import { AnswerAccumulator } from "./answer.js";
import type { Booking, Call, Outcome } from "./booking.js";
import { BodyTooLarge, drained, headerString, REMAINING_HEADER, readAll } from "./http.js";
import { SseSplitter } from "./sse.js";
import { classifyFailure, type UpstreamResponse } from "./upstream.js";

/** A non-stream answer larger than this is treated as cut (bounds what the meter buffers). */
const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

/** What the chat path lends the relay for its endings. */
export interface RelayHost {
  /** The call was aborted (episode closed, meter stopping). */
  aborted(call: Call, res: ServerResponse, acc: AnswerAccumulator | undefined): Outcome;
  /** Settle, then answer with an OpenAI-shaped error (nothing was sent yet). */
  failBeforeBytes(call: Call, res: ServerResponse, o: Outcome, message: string, hdr: string): Outcome;
}

export class Relay {
  constructor(
    private readonly booking: Booking,
    private readonly host: RelayHost,
  ) {}

  /**
   * Non-stream answer: read whole and settled first, so the budget header carries the settled
   * budget (upstream: cap − spent after the call); the bytes then go out unchanged, and the
   * fingerprints and receipt are written after them.
   */
  async body(call: Call, up: UpstreamResponse, res: ServerResponse): Promise<Outcome> {
    const acc = new AnswerAccumulator();
    let buf: Buffer;
    try {
      buf = await readAll(up.body, MAX_ANSWER_BYTES, (t) => {
        call.ttfb ??= t - call.tForward;
      });
    } catch (err) {
      if (call.ac!.aborted) return this.host.aborted(call, res, acc);
      const code =
        err instanceof BodyTooLarge
          ? "upstream_too_large"
          : classifyFailure(err) === "timeout"
            ? "upstream_timeout"
            : "upstream_cut";
      return this.host.failBeforeBytes(
        call,
        res,
        { status: 502, acc, billing: "lost", viewLeak: true, truncated: true, errorCode: code },
        "the model provider's answer was cut",
        pyFixed6(remainingAfter(call.ep.view)),
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
      billing: "usage",
      viewLeak: false,
      truncated: false,
      errorCode: acc.error
        ? "upstream_error_object"
        : acc.usage
          ? null
          : acc.badUsage
            ? "bad_usage"
            : "no_usage",
    };
    this.booking.finish(call, outcome);
    if (call.clientGone) return outcome;
    const headers: Record<string, string | number> = {
      "content-type": headerString(up.headers["content-type"]) ?? "application/json",
      "content-length": buf.length,
      [REMAINING_HEADER]: pyFixed6(remainingAfter(call.ep.view)),
    };
    if (call.headerRid) headers["x-engy-request-id"] = call.headerRid;
    res.writeHead(200, headers);
    res.end(buf);
    return outcome;
  }

  /**
   * Stream answer, passed through: every chunk is written to the client the moment it arrives, as
   * it came (the usage chunk included, as upstream's meter passes it). What the meter learns from
   * the events is parsed on the side, after the bytes have left; the call is settled after the last
   * byte (its reservation covers it meanwhile). The header carries the budget from before the call.
   * A first chunk `retryFirst` accepts is not sent: "retry" (its text kept in `call.err`).
   */
  async stream(
    call: Call,
    up: UpstreamResponse,
    res: ServerResponse,
    hdrPre: string,
    retryFirst: (first: Buffer) => boolean,
  ): Promise<Outcome | "retry"> {
    const acc = new AnswerAccumulator();
    const splitter = new SseSplitter();
    const ac = call.ac!;
    const body = up.body;
    let started = false;
    let bug: unknown;
    // Chunks written but not yet parsed; parsed in a tick queued after the write's own (the socket's
    // uncork), so the client's bytes never wait for the bookkeeping.
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
        ac.off("abort", onCut);
        resolve(how);
      };
      const onCut = () => finish("cut");
      const onData = (chunk: Buffer) => {
        if (done) return;
        try {
          if (!started) {
            call.ttfb ??= performance.now() - call.tForward;
            if (retryFirst(chunk)) {
              call.err = chunk.subarray(0, 300).toString("utf8");
              return finish("retry");
            }
            started = true;
            if (!call.clientGone) {
              const headers: Record<string, string> = {
                "content-type": headerString(up.headers["content-type"]) ?? "text/event-stream",
                "cache-control": "no-cache",
                [REMAINING_HEADER]: hdrPre,
              };
              if (call.headerRid) headers["x-engy-request-id"] = call.headerRid;
              res.writeHead(200, headers);
            }
          }
          const first = unparsed.length === 0;
          unparsed.push(chunk);
          // The client gone, the answer is still read to its end (and booked on its usage).
          if (!call.clientGone && !res.destroyed && !res.write(chunk)) {
            body.pause();
            drained(res, ac).then(() => body.resume());
          }
          if (first) process.nextTick(parse);
        } catch (err) {
          bug = err;
          finish("cut");
        }
      };
      const onEnd = () => {
        if (done) return;
        // The stream's terminator leaves with the last chunk (one write, when they came together).
        if (started && !call.clientGone && !res.destroyed) res.end();
        finish("end");
      };
      ac.once("abort", onCut);
      body.attach({ data: onData, end: onEnd, error: onCut });
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
    const last = splitter.end();
    if (last !== null && last.data !== null) acc.onEvent(last.data);
    if (ending === "cut") {
      body.destroy();
      if (ac.aborted) return this.host.aborted(call, res, acc);
      // The upstream cut the stream (socket closed, body timeout): pass the cut on; what it billed
      // is not known, so the call is booked at its reservation (or its usage, if that came).
      if (!started)
        return this.host.failBeforeBytes(
          call,
          res,
          { status: 502, acc, billing: "lost", viewLeak: true, truncated: true, errorCode: "upstream_cut" },
          "the model provider's stream was cut before any token",
          hdrPre,
        );
      res.destroy();
      return {
        status: 200,
        acc,
        billing: "lost",
        viewLeak: true,
        truncated: true,
        errorCode: "upstream_cut",
      };
    }
    if (!started)
      return this.host.failBeforeBytes(
        call,
        res,
        { status: 502, acc, billing: "lost", viewLeak: true, truncated: true, errorCode: "upstream_empty" },
        "the model provider sent an empty stream",
        hdrPre,
      );
    // A client that left mid-stream: upstream's handler would have failed writing to it and never
    // settled (its view keeps the reservation); here the answer was read whole and is billed.
    const viewLeak = call.clientGone;
    if (!call.clientGone && !res.writableEnded) res.end();
    const truncated = !acc.sawDone && acc.usage === undefined;
    return {
      status: 200,
      acc,
      billing: "usage",
      viewLeak,
      truncated,
      errorCode: call.clientGone
        ? "client_disconnected"
        : acc.error
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
}
