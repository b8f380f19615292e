/**
 * HTTP to the platform: every request bounded in time and size (boundedRequest), every failure a
 * ValidatorError with a platform code, every response checked (status, JSON, zod schema) and logged
 * as one event. Fire-and-forget POSTs return their failure instead of throwing.
 */
import type { Dispatcher, FormData } from "undici";
import { type ErrorCode, InfraError, isAbortError, ValidatorError } from "../errors.js";
import type { Logger } from "../log.js";
import { USER_AGENT } from "../version.js";
import { BodyTooLargeError, type BoundedResponse, boundedRequest } from "./http.js";
import { describeZodError, errorText } from "./schemas.js";

/** Our cap on any platform JSON response (winner/current with every vote is a few KiB). */
const MAX_RESPONSE_BYTES = 4 * 1024 * 1024;
/** Result of a fire-and-forget POST (heartbeat, logs, progress): never throws. */
export type PostResult<R = undefined> =
  | { ok: true; status: number; receipt: R | null }
  | { ok: false; status: number | null; code: ErrorCode; message: string; retryable: boolean };

export const isRetryableStatus = (status: number) =>
  status === 408 || status === 425 || status === 429 || status >= 500;

/**
 * Whether the platform answered a request: false for no answer (refused, reset, timed out) or a 5xx,
 * with the reason; true for any other status. A request the caller cancelled says nothing.
 */
export type Reachability = (ok: boolean, reason: string) => void;

export type ZodResult<T> = { success: true; data: T } | { success: false; error: import("zod").ZodError };

export class PlatformTransport {
  constructor(
    private readonly log: Logger,
    private readonly dispatcher: Dispatcher | undefined,
    private readonly reachability: Reachability = () => {},
  ) {}

  /** A POST whose failure is logged and returned, never thrown. Keeps the raw body for receipts. */
  async firePost(
    endpoint: string,
    req: {
      url: string;
      headers?: Record<string, string>;
      body: string | FormData;
      timeoutMs: number;
      signal?: AbortSignal;
      quiet404?: boolean;
    },
  ): Promise<PostResult<never> & { raw?: Buffer }> {
    let res: BoundedResponse;
    try {
      res = await this.send(endpoint, { method: "POST", ...req });
    } catch (err) {
      const e = err as ValidatorError;
      this.log.warn({ endpoint, code: e.code }, "platform.post.failed");
      return notOk(null, e.code, e.message, e.retryable);
    }
    if (res.status >= 200 && res.status < 300)
      return { ok: true, status: res.status, receipt: null, raw: res.body };
    const message = errorText(res.body.toString("utf8"));
    const level = req.quiet404 && res.status === 404 ? "debug" : "warn";
    this.log[level]({ endpoint, status: res.status, error: message }, "platform.post.failed");
    return notOk(res.status, "platform_http_error", message, isRetryableStatus(res.status));
  }

  async send(
    endpoint: string,
    req: {
      method: "GET" | "POST";
      url: string;
      headers?: Record<string, string>;
      body?: string | FormData;
      timeoutMs: number;
      signal?: AbortSignal;
    },
  ): Promise<BoundedResponse> {
    try {
      const res = await boundedRequest({
        ...req,
        headers: { accept: "application/json", "user-agent": USER_AGENT, ...req.headers },
        maxBodyBytes: MAX_RESPONSE_BYTES,
        dispatcher: this.dispatcher,
        codePrefix: "platform",
      });
      this.log.debug({ endpoint, status: res.status, ms: Math.round(res.elapsedMs) }, "platform.response");
      this.reachability(res.status < 500, `${endpoint}: HTTP ${res.status}`);
      return res;
    } catch (err) {
      const e =
        err instanceof ValidatorError
          ? err
          : new InfraError("platform_unreachable", String(err), { cause: err });
      if (e.code !== "aborted") {
        this.log.warn({ endpoint, code: e.code, err: e.message }, "platform.request.failed");
        if (e.code === "platform_unreachable" || e.code === "platform_timeout")
          this.reachability(false, `${endpoint}: ${e.code}: ${e.message}`);
      }
      throw e instanceof BodyTooLargeError
        ? new InfraError("platform_malformed_response", e.message, { cause: e, detail: { endpoint } })
        : e;
    }
  }

  expectOk(endpoint: string, res: BoundedResponse): void {
    if (res.status >= 200 && res.status < 300) return;
    const message = errorText(res.body.toString("utf8"));
    throw new InfraError("platform_http_error", `${endpoint}: HTTP ${res.status} ${message}`, {
      retryable: isRetryableStatus(res.status),
      detail: { endpoint, status: res.status, error: message },
    });
  }

  parse<T>(endpoint: string, res: BoundedResponse, schema: { safeParse(v: unknown): ZodResult<T> }): T {
    let json: unknown;
    try {
      json = JSON.parse(res.body.toString("utf8"));
    } catch (err) {
      return this.malformed(endpoint, `body is not JSON: ${(err as Error).message}`);
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) return this.malformed(endpoint, describeZodError(parsed.error));
    return parsed.data;
  }

  private malformed(endpoint: string, reason: string): never {
    this.log.warn({ endpoint, reason }, "platform.malformed_response");
    throw new InfraError("platform_malformed_response", `${endpoint}: malformed response: ${reason}`, {
      detail: { endpoint, reason },
    });
  }
}

export function notOk(status: number | null, code: ErrorCode, message: string, retryable: boolean) {
  return { ok: false as const, status, code, message, retryable };
}

export function failedPost(err: unknown) {
  const e = err instanceof ValidatorError ? err : null;
  if (isAbortError(err)) return notOk(null, "aborted", "aborted", false);
  return notOk(null, e?.code ?? "internal_error", e?.message ?? String(err), e?.retryable ?? false);
}

export function safeJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString("utf8"));
  } catch {
    return undefined;
  }
}

export function safeJsonText(r: { raw?: Buffer }): unknown {
  return r.raw ? safeJson(r.raw) : undefined;
}
