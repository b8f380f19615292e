/**
 * Small HTTP pieces of the meter: per-call cancellation, body readers, backpressure, error bodies.
 */
import { EventEmitter } from "node:events";
import type { IncomingMessage, ServerResponse } from "node:http";

/** Why a call was aborted. */
export type AbortReason = "client_disconnected" | "episode_closed" | "meter_stopped";

/**
 * A call's cancellation: undici accepts an EventEmitter that emits "abort" as a request signal, and
 * it costs far less per call than an AbortController (an EventTarget) on the hot path.
 */
export class CallAbort extends EventEmitter {
  aborted = false;
  reason: AbortReason | undefined;

  abort(reason: AbortReason): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit("abort");
  }
}

/** An OpenAI-shaped error body. */
export function errorBody(message: string, type: string, code: string): string {
  return JSON.stringify({ error: { message, type, param: null, code } });
}

export function headerString(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** The request body, or "too_large" past the limit (the rest is not read), or "aborted". */
export function readBody(req: IncomingMessage, max: number): Promise<Buffer | "too_large" | "aborted"> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > max) return Promise.resolve("too_large");
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (c: Buffer) => {
      size += c.length;
      if (size > max) {
        cleanup();
        req.pause();
        resolve("too_large");
        return;
      }
      chunks.push(c);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
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
    };
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onAbort);
    req.on("aborted", onAbort);
  });
}

export async function readLimited(
  body: AsyncIterable<Buffer> & { destroy(): void },
  max: number,
): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of body) {
    size += c.length;
    if (size > max) {
      body.destroy();
      break;
    }
    chunks.push(c);
  }
  return Buffer.concat(chunks);
}

/** A whole response body, through events (an async iterator costs more per call); `first` at the first byte. */
export function readAll(body: NodeJS.ReadableStream, first: (at: number) => void): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    body.on("data", (c: Buffer) => {
      if (size === 0) first(performance.now());
      chunks.push(c);
      size += c.length;
    });
    body.once("end", () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)));
    body.once("error", reject);
  });
}

/** Resolve on 'drain', or when the call is aborted (a gone client never drains). */
export function drained(res: ServerResponse, abort: CallAbort): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      abort.off("abort", done);
      resolve();
    };
    res.once("drain", done);
    res.once("close", done);
    abort.once("abort", done);
  });
}

/** Sleep before a retry; false (early) when the call is aborted meanwhile. */
export function wait(ms: number, abort: CallAbort): Promise<boolean> {
  if (abort.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(t);
      resolve(false);
    };
    const t = setTimeout(() => {
      abort.off("abort", onAbort);
      resolve(true);
    }, ms);
    abort.once("abort", onAbort);
  });
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
