/**
 * The relay: the provider's 200 answer to the client, non-stream or stream, with what the meter
 * learns from it (usage, fingerprints, request id) gathered on the side. A client that leaves does
 * not end the call: the answer is read to its end and booked on its usage, as the provider bills it.
 * A client that stays but stops reading is cut after the idle window, and a non-stream answer's
 * bytes are held within its episode's bound (pace.ts): both the policy's doing.
 */
import type { ServerResponse } from "node:http";
import { pyFixed6, remainingAfter } from "./admission.js";
import { AnswerAccumulator } from "./answer.js";
import type { Booking, Call, Outcome } from "./booking.js";
import {
  AnswerBytesLimit,
  BodyTooLarge,
  headerString,
  REMAINING_HEADER,
  readAll,
  sendError,
} from "./http.js";
import { type AnswerBounds, AnswerHold, drainedWithin, PACED_ABOVE, sendPaced } from "./pace.js";
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

/** How a stream's bytes stopped flowing to the client. */
interface Piped {
  ending: "end" | "cut" | "retry";
  started: boolean;
  acc: AnswerAccumulator;
  /** The client took nothing for the idle window. */
  stalled: boolean;
  /** Why the provider's body failed, when it did. */
  cause: Error | undefined;
  /** Our own error while relaying (rethrown). */
  bug: unknown;
}

const providerCut = (cause: Error | undefined) =>
  classifyFailure(cause) === "timeout" ? "upstream_timeout" : "upstream_cut";

export class Relay {
  constructor(
    private readonly booking: Booking,
    private readonly host: RelayHost,
    private readonly bounds: AnswerBounds,
  ) {}

  /**
   * Non-stream answer: read whole and settled first, so the budget header carries the settled
   * budget (upstream: cap − spent after the call); the bytes then go out unchanged, and the
   * fingerprints and receipt are written after them. Its bytes count against the answer bounds
   * until they have left for the client (pace.ts).
   */
  async body(call: Call, up: UpstreamResponse, res: ServerResponse): Promise<Outcome> {
    const acc = new AnswerAccumulator();
    const hold = new AnswerHold(call.ep.answerGate, this.bounds.overall);
    let buf: Buffer;
    try {
      buf = await readAll(
        up.body,
        MAX_ANSWER_BYTES,
        (t) => {
          call.ttfb ??= t - call.tForward;
        },
        (n) => hold.take(n),
      );
    } catch (err) {
      hold.release();
      return this.bodyFailed(call, res, acc, err);
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
    if (call.clientGone) {
      hold.release();
      return outcome;
    }
    const headers: Record<string, string | number> = {
      "content-type": headerString(up.headers["content-type"]) ?? "application/json",
      "content-length": buf.length,
      [REMAINING_HEADER]: pyFixed6(remainingAfter(call.ep.view)),
    };
    if (call.headerRid) headers["x-engy-request-id"] = call.headerRid;
    res.writeHead(200, headers);
    if (buf.length <= PACED_ABOVE) {
      // The common answer: one write the socket takes at once (no pacing, no promise).
      res.end(buf);
      hold.release();
    } else void this.deliver(call, res, buf, hold);
    return outcome;
  }

  /** The answer's bytes to the client; one that takes none for the idle window is cut. */
  private async deliver(call: Call, res: ServerResponse, buf: Buffer, hold: AnswerHold): Promise<void> {
    try {
      if ((await sendPaced(res, buf, call.ac!, this.bounds.idleMs)) === "idle") {
        res.destroy();
        call.ep.log.warn(
          { seq: call.seq, bytes: buf.length, idle_ms: this.bounds.idleMs },
          "meter.client_not_reading",
        );
      }
    } catch {
      res.destroy();
    } finally {
      hold.release();
    }
  }

  /** The answer could not be read whole: aborted, over a bound, cut or timed out. */
  private bodyFailed(call: Call, res: ServerResponse, acc: AnswerAccumulator, err: unknown): Outcome {
    if (call.ac!.aborted) return this.host.aborted(call, res, acc);
    const hdr = pyFixed6(remainingAfter(call.ep.view));
    if (err instanceof AnswerBytesLimit) {
      // The policy's: its episode holds answers it has not read (or asked for too many at once).
      const o: Outcome = {
        status: 429,
        acc,
        billing: "lost",
        viewLeak: true,
        truncated: true,
        errorCode: "answer_bytes_limit",
      };
      this.booking.finish(call, o);
      if (!call.clientGone)
        sendError(
          res,
          429,
          `the answers this episode holds unread or in flight reached the meter's bound (${call.ep.answerGate.limit} bytes); read the answers already sent`,
          "meter",
          "answer_bytes_limit",
          hdr,
        );
      return o;
    }
    const code = err instanceof BodyTooLarge ? "upstream_too_large" : providerCut(err as Error);
    return this.host.failBeforeBytes(
      call,
      res,
      { status: 502, acc, billing: "lost", viewLeak: true, truncated: true, errorCode: code },
      "the model provider's answer was cut",
      hdr,
    );
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
    const p = await this.pipe(call, up, res, hdrPre, retryFirst);
    const { acc, started } = p;
    if (p.bug !== undefined) {
      up.body.destroy();
      if (res.headersSent) res.destroy();
      throw p.bug;
    }
    if (p.ending === "retry") {
      up.body.destroy();
      return "retry";
    }
    if (p.ending === "cut") return this.streamCut(call, up, res, hdrPre, p);
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

  /**
   * A stream that did not end: aborted (close, stop), its client stopped reading (the policy's:
   * cut after the idle window, the provider's request with it), or the provider cut it or ran past
   * its deadline (passed on as a cut). What it billed is not known: booked at its reservation (or
   * its usage, if that came).
   */
  private streamCut(
    call: Call,
    up: UpstreamResponse,
    res: ServerResponse,
    hdrPre: string,
    p: Piped,
  ): Outcome {
    up.body.destroy();
    const { acc } = p;
    if (call.ac!.aborted) return this.host.aborted(call, res, acc);
    if (!p.started)
      return this.host.failBeforeBytes(
        call,
        res,
        {
          status: 502,
          acc,
          billing: "lost",
          viewLeak: true,
          truncated: true,
          errorCode: providerCut(p.cause),
        },
        "the model provider's stream was cut before any token",
        hdrPre,
      );
    res.destroy();
    if (p.stalled)
      call.ep.log.warn({ seq: call.seq, idle_ms: this.bounds.idleMs }, "meter.client_not_reading");
    return {
      status: 200,
      acc,
      billing: "lost",
      viewLeak: true,
      truncated: true,
      errorCode: p.stalled ? "client_not_reading" : providerCut(p.cause),
    };
  }

  /** The stream's bytes to the client as they come, parsed on the side; resolves when they stop. */
  private async pipe(
    call: Call,
    up: UpstreamResponse,
    res: ServerResponse,
    hdrPre: string,
    retryFirst: (first: Buffer) => boolean,
  ): Promise<Piped> {
    const p: Piped = {
      ending: "end",
      started: false,
      acc: new AnswerAccumulator(),
      stalled: false,
      cause: undefined,
      bug: undefined,
    };
    const splitter = new SseSplitter();
    const ac = call.ac!;
    const body = up.body;
    // Chunks written but not yet parsed; parsed in a tick queued after the write's own (the socket's
    // uncork), so the client's bytes never wait for the bookkeeping.
    let unparsed: Buffer[] = [];
    const parse = () => {
      const chunks = unparsed;
      unparsed = [];
      for (const c of chunks) for (const ev of splitter.push(c)) if (ev.data !== null) p.acc.onEvent(ev.data);
    };
    p.ending = await new Promise<Piped["ending"]>((resolve) => {
      let done = false;
      const finish = (how: Piped["ending"]) => {
        if (done) return;
        done = true;
        ac.off("abort", onCut);
        resolve(how);
      };
      const onCut = () => finish("cut");
      // Backpressure: the provider waits while the client reads; a client that reads nothing for
      // the idle window is cut. Chunks the parser already holds still arrive while paused: one wait.
      let waiting = false;
      const paused = () => {
        body.pause();
        if (waiting) return;
        waiting = true;
        void drainedWithin(res, ac, this.bounds.idleMs).then((how) => {
          waiting = false;
          if (how !== "idle") return body.resume();
          p.stalled = true;
          finish("cut");
        });
      };
      const onData = (chunk: Buffer) => {
        if (done) return;
        try {
          if (!p.started) {
            call.ttfb ??= performance.now() - call.tForward;
            if (retryFirst(chunk)) {
              call.err = chunk.subarray(0, 300).toString("utf8");
              return finish("retry");
            }
            p.started = true;
            if (!call.clientGone) this.streamHead(call, up, res, hdrPre);
          }
          const first = unparsed.length === 0;
          unparsed.push(chunk);
          // The client gone, the answer is still read to its end (and booked on its usage).
          if (!call.clientGone && !res.destroyed && !res.write(chunk)) paused();
          if (first) process.nextTick(parse);
        } catch (err) {
          p.bug = err;
          finish("cut");
        }
      };
      const onEnd = () => {
        if (done) return;
        // The stream's terminator leaves with the last chunk (one write, when they came together).
        if (p.started && !call.clientGone && !res.destroyed) res.end();
        finish("end");
      };
      const onError = (err: Error) => {
        p.cause = err;
        finish("cut");
      };
      ac.once("abort", onCut);
      body.attach({ data: onData, end: onEnd, error: onError });
    });
    parse();
    if (p.bug === undefined && p.ending !== "retry") {
      const last = splitter.end();
      if (last !== null && last.data !== null) p.acc.onEvent(last.data);
    }
    return p;
  }

  private streamHead(call: Call, up: UpstreamResponse, res: ServerResponse, hdrPre: string): void {
    const headers: Record<string, string> = {
      "content-type": headerString(up.headers["content-type"]) ?? "text/event-stream",
      "cache-control": "no-cache",
      [REMAINING_HEADER]: hdrPre,
    };
    if (call.headerRid) headers["x-engy-request-id"] = call.headerRid;
    res.writeHead(200, headers);
  }
}
