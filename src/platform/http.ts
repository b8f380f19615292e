/**
 * One bounded HTTP exchange over undici: a deadline (AbortSignal, monotonic timers), the caller's
 * cancellation, and a cap on the response body read as it streams. Every transport failure becomes
 * a ValidatorError with a stable code; HTTP statuses are returned, never thrown, so callers classify.
 */
import type { IncomingHttpHeaders } from "node:http";
import { type Dispatcher, type FormData, request } from "undici";
import { InfraError, ValidatorError } from "../errors.js";

export interface BoundedRequest {
  method: "GET" | "POST";
  url: string;
  headers?: Record<string, string>;
  /** FormData must be undici's (Node's global one is a different copy that this undici cannot stream). */
  body?: string | Uint8Array | FormData;
  /** Whole exchange (connect, headers, body) must finish within this. */
  timeoutMs: number;
  maxBodyBytes: number;
  signal?: AbortSignal;
  dispatcher?: Dispatcher;
  /** Error code prefix: "platform" → platform_timeout, platform_unreachable, … */
  codePrefix: CodePrefix;
}

/** Whose request it is: "platform" → platform_timeout, platform_unreachable, … */
export type CodePrefix = "platform" | "pack_fetch";

export interface BoundedResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** Wall time of the exchange, monotonic. */
  elapsedMs: number;
}

/** Thrown when the body exceeds maxBodyBytes; `class` decided by the caller's context. */
export class BodyTooLargeError extends InfraError {
  constructor(codePrefix: CodePrefix, limit: number, seen: number) {
    super(`${codePrefix}_response_too_large`, `response body exceeds ${limit} bytes (read ${seen})`, {
      retryable: false,
      detail: { limit, seen },
    });
  }
}

export async function boundedRequest(req: BoundedRequest): Promise<BoundedResponse> {
  const started = performance.now();
  const deadline = AbortSignal.timeout(req.timeoutMs);
  const signal = req.signal ? AbortSignal.any([req.signal, deadline]) : deadline;
  const fail = (err: unknown): never => {
    if (err instanceof ValidatorError) throw err;
    if (req.signal?.aborted) {
      throw new InfraError("aborted", "the request was aborted", { cause: err, retryable: false });
    }
    if (deadline.aborted) {
      throw new InfraError(`${req.codePrefix}_timeout`, `no complete response within ${req.timeoutMs} ms`, {
        cause: err,
        detail: { timeoutMs: req.timeoutMs },
      });
    }
    const code = (err as { code?: string }).code;
    throw new InfraError(
      `${req.codePrefix}_unreachable`,
      `request failed: ${(err as Error)?.message ?? String(err)}`,
      { cause: err, detail: { cause: code } },
    );
  };

  let res: Dispatcher.ResponseData;
  try {
    res = await request(req.url, {
      method: req.method,
      headers: req.headers,
      body: req.body,
      signal,
      dispatcher: req.dispatcher,
    });
  } catch (err) {
    return fail(err);
  }

  const declared = Number(res.headers["content-length"]);
  if (Number.isFinite(declared) && declared > req.maxBodyBytes) {
    res.body.destroy();
    throw new BodyTooLargeError(req.codePrefix, req.maxBodyBytes, declared);
  }
  const chunks: Buffer[] = [];
  let seen = 0;
  try {
    for await (const chunk of res.body) {
      const buf = chunk as Buffer;
      seen += buf.byteLength;
      if (seen > req.maxBodyBytes) {
        // Stop reading at once: a hostile server must not make us buffer more than the cap.
        res.body.destroy();
        throw new BodyTooLargeError(req.codePrefix, req.maxBodyBytes, seen);
      }
      chunks.push(buf);
    }
  } catch (err) {
    return fail(err);
  }
  return {
    status: res.statusCode,
    headers: res.headers,
    body: Buffer.concat(chunks),
    elapsedMs: performance.now() - started,
  };
}
