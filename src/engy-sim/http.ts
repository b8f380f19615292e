/** The simulator's small HTTP pieces: OpenAI-shaped errors, the body reader, waits and cuts. */
import type { IncomingMessage, ServerResponse } from "node:http";
import { ValidatorError } from "../errors.js";
import { type ErrorShape, errorBody } from "./wire.js";

export const MAX_BODY_BYTES = 64 * 1024 * 1024;

/**
 * An error answer of the simulator, in OpenAI's shape (`shape.code` is the wire's code). A refusal
 * of the request is the caller's input; a 429 or 5xx stands for the provider (upstream).
 */
export class HttpError extends ValidatorError {
  constructor(readonly shape: ErrorShape) {
    const upstream = shape.status === 429 || shape.status >= 500;
    super(upstream ? "upstream" : "input", "engy_sim_http_error", shape.message, { retryable: upstream });
    this.name = "HttpError";
  }
}

export const invalid = (message: string, code = "invalid_request", status = 400): HttpError =>
  new HttpError({ status, type: "invalid_request_error", code, message });

export function sendError(res: ServerResponse, e: ErrorShape, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = errorBody(e);
  res.writeHead(e.status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    ...headers,
  });
  res.end(body);
}

export function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolveBody, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        reject(invalid(`request body over ${MAX_BODY_BYTES} bytes`, "request_too_large", 413));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on("end", () => resolveBody(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

/**
 * Aborts when the client goes away, so waits (stall, latency, drip) end with it. Made on first
 * need only: zero-latency requests never wait, and an AbortController per request shows in profiles.
 */
const closedSignals = new WeakMap<ServerResponse, AbortSignal>();
export function closedSignal(res: ServerResponse): AbortSignal {
  let signal = closedSignals.get(res);
  if (!signal) {
    const ac = new AbortController();
    if (res.closed) ac.abort();
    else res.once("close", () => ac.abort());
    signal = ac.signal;
    closedSignals.set(res, signal);
  }
  return signal;
}

/** Write what goes out, then kill the connection once it is flushed: a stream cut mid-way. */
export function cutAfter(res: ServerResponse, data: string | Buffer): void {
  res.write(data, () => res.socket?.destroy());
}
