/**
 * Small HTTP pieces of the meter: per-call cancellation, body readers, backpressure, error bodies.
 */
import { EventEmitter } from "node:events";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { UpstreamBody } from "./upstream.js";

/** Why a call was aborted (its upstream request cancelled). */
export type AbortReason = "episode_closed" | "meter_stopped";

/**
 * A call's cancellation: undici accepts an EventEmitter that emits "abort" as a request signal, and
 * it costs far less per call than an AbortController (an EventTarget) on the hot path. "abort"
 * (episode closed, meter stopping) cancels the upstream request; "gone" (the client closed its
 * connection) does not — the answer is still read and booked — but ends waits and retries.
 */
export class CallAbort extends EventEmitter {
  aborted = false;
  reason: AbortReason | undefined;
  gone = false;

  abort(reason: AbortReason): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit("abort");
  }

  leave(): void {
    if (this.gone) return;
    this.gone = true;
    this.emit("gone");
  }

  /** Register `f` for whichever comes first, abort or leave (for cancellable waits). */
  onEnd(f: () => void): void {
    if (this.aborted || this.gone) {
      f();
      return;
    }
    this.once("abort", f);
    this.once("gone", f);
  }
}

/** An OpenAI-shaped error body. */
export function errorBody(message: string, type: string, code: string): string {
  return JSON.stringify({ error: { message, type, param: null, code } });
}

export function headerString(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/**
 * The request body, or "too_large" past the limit (the rest is not read), or "aborted". With a
 * declared length, a body that comes in one chunk is that chunk (no copy; a socket read is at most
 * 64 KiB), else it is read into one buffer of that size (no second copy to join chunks).
 */
export function readBody(req: IncomingMessage, max: number): Promise<Buffer | "too_large" | "aborted"> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > max) return Promise.resolve("too_large");
  const limit = Number.isInteger(declared) && declared > 0 ? declared : -1;
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let sized: Buffer | null = null;
    let size = 0;
    const onData = (c: Buffer) => {
      if (size + c.length > (limit < 0 ? max : limit)) {
        cleanup();
        req.pause();
        resolve(limit < 0 ? "too_large" : "aborted");
        return;
      }
      if (limit < 0 || (size === 0 && c.length === limit)) chunks.push(c);
      else {
        sized ??= Buffer.allocUnsafe(limit);
        c.copy(sized, size);
      }
      size += c.length;
    };
    const onEnd = () => {
      cleanup();
      if (limit >= 0) resolve(size !== limit ? "aborted" : sized !== null ? sized : chunks[0]!);
      else resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onAbort = () => {
      cleanup();
      resolve("aborted");
    };
    const cleanup = () => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onAbort);
      req.off("aborted", onAbort);
      req.off("close", onAbort);
    };
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onAbort);
    req.on("aborted", onAbort);
    req.on("close", onAbort);
  });
}

/** At most `max` bytes of a body (the rest is not read); rejects when the body fails. */
export function readLimited(body: UpstreamBody, max: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    body.attach({
      data: (c) => {
        if (done) return;
        size += c.length;
        if (size > max) {
          done = true;
          body.destroy();
          resolve(Buffer.concat(chunks));
          return;
        }
        chunks.push(c);
      },
      end: () => {
        done = true;
        resolve(Buffer.concat(chunks));
      },
      error: (err) => {
        done = true;
        reject(err);
      },
    });
  });
}

export class BodyTooLarge extends Error {}

/** The answer's bytes did not fit in what the meter holds for its episode (or for all). */
export class AnswerBytesLimit extends Error {}

/**
 * A whole response body, each chunk kept as the parser handed it over; `first` at the first byte,
 * `take` for each chunk's bytes before it is kept. Over `max` bytes it rejects with BodyTooLarge,
 * a chunk `take` refuses with AnswerBytesLimit (the body is destroyed).
 */
export function readAll(
  body: UpstreamBody,
  max: number,
  first: (at: number) => void,
  take: (bytes: number) => boolean = () => true,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    body.attach({
      data: (c) => {
        if (size === 0) first(performance.now());
        size += c.length;
        if (size > max || !take(c.length)) {
          body.destroy();
          reject(size > max ? new BodyTooLarge(`answer over ${max} bytes`) : new AnswerBytesLimit());
          return;
        }
        chunks.push(c);
      },
      end: () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)),
      error: reject,
    });
  });
}

/** Sleep before a retry; false (early) when the call is aborted or its client left meanwhile. */
export function wait(ms: number, ac: CallAbort): Promise<boolean> {
  if (ac.aborted || ac.gone) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onEnd = () => {
      clearTimeout(t);
      ac.off("abort", onEnd);
      ac.off("gone", onEnd);
      resolve(false);
    };
    const t = setTimeout(() => {
      ac.off("abort", onEnd);
      ac.off("gone", onEnd);
      resolve(true);
    }, ms);
    ac.once("abort", onEnd);
    ac.once("gone", onEnd);
  });
}

/** The operator's key (and anything after "Bearer ") never reaches a policy in an error body. */
export function redactSecret(buf: Buffer, secret: string | undefined): Buffer {
  if (secret === undefined || secret.length < 4 || buf.indexOf(secret) < 0) return buf;
  return Buffer.from(buf.toString("latin1").split(secret).join("[redacted]"), "latin1");
}

export const REMAINING_HEADER = "x-trajrl-budget-remaining-usd";

/** A whole JSON (or other) response with the budget header. */
export function send(
  res: ServerResponse,
  status: number,
  body: Buffer,
  remaining: string,
  type = "application/json",
): void {
  res.writeHead(status, {
    "content-type": type,
    "content-length": body.length,
    [REMAINING_HEADER]: remaining,
  });
  res.end(body);
}

/** An OpenAI-shaped error response with the budget header. */
export function sendError(
  res: ServerResponse,
  status: number,
  message: string,
  type: string,
  code: string,
  remaining: string,
): void {
  send(res, status, Buffer.from(errorBody(message, type, code)), remaining);
}
