/**
 * The one connection to the provider: an undici Pool with keep-alive and connect/headers/body
 * timeouts, the operator's key added here and nowhere else. Every request carries the call's
 * AbortSignal (client gone, episode closed, meter stopping).
 */
import type { EventEmitter } from "node:events";
import { type Dispatcher, Pool } from "undici";

export interface UpstreamOptions {
  /** Base URL including the API prefix, e.g. https://api.engy.ai/v1 */
  url: string;
  apiKey?: string;
  /** Headers timeout (time to the response head) and body timeout (longest silence inside a stream). */
  timeoutMs: number;
  connectTimeoutMs?: number;
  connections?: number;
}

export type UpstreamResponse = Dispatcher.ResponseData;

/** How a failed request attempt is classified (undici / net error codes). */
export type AttemptFailure = "connect" | "timeout" | "socket" | "aborted";

export function classifyFailure(err: unknown): AttemptFailure {
  const e = err as { code?: string; name?: string };
  if (e?.name === "AbortError" || e?.code === "UND_ERR_ABORTED" || e?.code === "ABORT_ERR") return "aborted";
  switch (e?.code) {
    case "ECONNREFUSED":
    case "UND_ERR_CONNECT_TIMEOUT":
    case "ENOTFOUND":
    case "EAI_AGAIN":
    case "EHOSTUNREACH":
    case "ENETUNREACH":
      return "connect";
    case "UND_ERR_HEADERS_TIMEOUT":
    case "UND_ERR_BODY_TIMEOUT":
      return "timeout";
    default:
      return "socket";
  }
}

export class Upstream {
  private readonly pool: Pool;
  private readonly path: string;
  private readonly headers: Record<string, string>;
  readonly origin: string;

  constructor(opts: UpstreamOptions) {
    const u = new URL(opts.url);
    this.origin = u.origin;
    this.path = `${u.pathname.replace(/\/+$/, "")}/chat/completions`;
    this.headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
    if (opts.apiKey) this.headers.authorization = `Bearer ${opts.apiKey}`;
    this.pool = new Pool(this.origin, {
      connections: opts.connections ?? 256,
      pipelining: 1,
      keepAliveTimeout: 30_000,
      keepAliveMaxTimeout: 600_000,
      connectTimeout: opts.connectTimeoutMs ?? 10_000,
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
    });
  }

  /** `signal`: an AbortSignal, or an EventEmitter with `aborted` that emits "abort" (undici accepts both). */
  chatCompletions(body: Buffer | string, signal: AbortSignal | EventEmitter): Promise<UpstreamResponse> {
    return this.pool.request({ path: this.path, method: "POST", headers: this.headers, body, signal });
  }

  async close(): Promise<void> {
    await this.pool.close().catch(() => this.pool.destroy());
  }

  async destroy(): Promise<void> {
    await this.pool.destroy();
  }
}
