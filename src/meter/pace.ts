/**
 * What a client that does not read can make the meter hold (issue 36 items 4 and 10). A non-stream
 * answer's bytes count against its episode's and the meter's answer bounds from their arrival until
 * they have left for the client's socket; a response whose client takes nothing for an idle window
 * while bytes wait for it is cut (a stream's provider connection goes with it). Both are the
 * policy's doing: its call fails, the provider is never blamed.
 */
import type { ServerResponse } from "node:http";
import type { Gate } from "./gate.js";
import type { CallAbort } from "./http.js";

/** What one call may hold of answers: its episode's bound, the meter's, and the idle window. */
export interface AnswerBounds {
  /** Answer bytes all calls may hold at once. */
  overall: Gate;
  /** A client that takes no byte for this long, while bytes wait for it, is cut. */
  idleMs: number;
}

/** The answer bytes one call holds, taken from its episode's bound and the meter's as they arrive. */
export class AnswerHold {
  private held = 0;

  constructor(
    private readonly episode: Gate,
    private readonly overall: Gate,
  ) {}

  /** Take `n` more bytes; false (nothing taken) when either bound would be passed. */
  take(n: number): boolean {
    if (!this.episode.tryAcquire(n)) return false;
    if (!this.overall.tryAcquire(n)) {
      this.episode.release(n);
      return false;
    }
    this.held += n;
    return true;
  }

  /** Give back everything held (idempotent). */
  release(): void {
    if (this.held === 0) return;
    this.episode.release(this.held);
    this.overall.release(this.held);
    this.held = 0;
  }
}

/** How a wait for the client ended: it took the bytes, it took none for the idle window, or it is gone. */
export type Drain = "drained" | "idle" | "gone";

/**
 * Resolve when the response's buffer has drained, "idle" when `idleMs` passes first (the client took
 * nothing: a drain needs its bytes read), "gone" when the client or the call ended.
 */
export function drainedWithin(res: ServerResponse, ac: CallAbort, idleMs: number): Promise<Drain> {
  if (res.destroyed || ac.aborted || ac.gone) return Promise.resolve("gone");
  return new Promise((resolve) => {
    const end = (how: Drain) => {
      clearTimeout(timer);
      res.off("drain", onDrain);
      res.off("close", onGone);
      ac.off("abort", onGone);
      ac.off("gone", onGone);
      resolve(how);
    };
    const onDrain = () => end("drained");
    const onGone = () => end("gone");
    const timer = setTimeout(() => end("idle"), idleMs);
    res.once("drain", onDrain);
    res.once("close", onGone);
    ac.once("abort", onGone);
    ac.once("gone", onGone);
  });
}

/** Slices of a large answer: each drain of one is the client's progress. A smaller answer is one write. */
const SLICE = 64 * 1024;
export const PACED_ABOVE = SLICE;

/**
 * Send a whole answer (head already set with writeHead) and end the response. One write when it is
 * small (the kernel takes it at once); a larger one goes out in slices, each after the client took
 * the last, so a client that stops reading is seen within the idle window. The last slice is a copy,
 * so the answer's buffer is not kept alive by bytes a client never reads.
 */
export async function sendPaced(
  res: ServerResponse,
  buf: Buffer,
  ac: CallAbort,
  idleMs: number,
): Promise<Drain | "done"> {
  if (buf.length <= SLICE) {
    res.end(buf);
    return "done";
  }
  for (let at = 0; at < buf.length; at += SLICE) {
    if (res.destroyed) return "gone";
    if (at + SLICE >= buf.length) {
      res.end(Buffer.from(buf.subarray(at)));
      return "done";
    }
    if (!res.write(buf.subarray(at, at + SLICE))) {
      const how = await drainedWithin(res, ac, idleMs);
      if (how !== "drained") return how;
    }
  }
  res.end();
  return "done";
}
