/**
 * The one connection to the provider: an undici Pool with keep-alive, the operator's key added here
 * and nowhere else. Each attempt has one deadline for all of it — connection, head and body — as
 * upstream's `ClientTimeout(total=900)`; every request is cancelled when its call is aborted
 * (episode closed, meter stopping) or its client stops reading (relay.ts).
 *
 * The answer is delivered through undici's dispatch handler, not a Readable: its bytes reach the
 * relay's sink as the parser hands them over (no stream buffering, no async iterator), with flow
 * control (pause/resume) for a slow client.
 */
import { type Dispatcher, errors, Pool } from "undici";

export interface UpstreamOptions {
  /** Base URL including the API prefix, e.g. https://api.engy.ai/v1 */
  url: string;
  apiKey?: string;
  /** One attempt's deadline, from dispatch to the body's last byte (upstream: 900 s total). */
  timeoutMs: number;
  connectTimeoutMs?: number;
  connections?: number;
}

/** What a call's cancellation looks like to the upstream (CallAbort in http.ts). */
export interface AbortSource {
  readonly aborted: boolean;
  once(event: "abort", f: () => void): unknown;
  off(event: "abort", f: () => void): unknown;
}

/** Where an answer's body goes: each chunk as it arrives, then its end or its failure. */
export interface BodySink {
  data(chunk: Buffer): void;
  end(): void;
  error(err: Error): void;
}

/**
 * A provider answer's body. Chunks that arrive before a sink is attached (the head and the body
 * often come in one read) are held and handed over, in order, when it is; after that each chunk
 * goes straight to the sink.
 */
export class UpstreamBody {
  private sink: BodySink | null = null;
  private held: Buffer[] | null = null;
  private outcome: Error | "end" | null = null;
  private paused = false;
  private destroyed = false;
  /** Set by the handler: resume the socket, abort the request. */
  resumeFn: (() => void) | null = null;
  abortFn: ((err: Error) => void) | null = null;

  /** Deliver what is held, then everything as it comes. */
  attach(sink: BodySink): void {
    if (this.destroyed) return;
    this.sink = sink;
    const held = this.held;
    this.held = null;
    if (held !== null) for (const c of held) sink.data(c);
    const o = this.outcome;
    if (o === "end") sink.end();
    else if (o !== null) sink.error(o);
  }

  /** Stop reading from the provider (backpressure) until resume(). */
  pause(): void {
    this.paused = true;
  }

  resume(): void {
    if (!this.paused || this.destroyed) return;
    this.paused = false;
    this.resumeFn?.();
  }

  /** Abandon the body: the request is aborted if it is still running; nothing more is delivered. */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.sink = null;
    this.held = null;
    if (this.outcome === null) {
      this.outcome = new errors.RequestAbortedError();
      this.abortFn?.(this.outcome);
    }
  }

  /** Read to the end and discard (the connection is reused); over 128 KiB it is destroyed instead. */
  dump(): Promise<void> {
    return new Promise((resolve) => {
      let size = 0;
      this.attach({
        data: (c) => {
          size += c.length;
          if (size > 128 * 1024) {
            this.destroy();
            resolve();
          }
        },
        end: () => resolve(),
        error: () => resolve(),
      });
      if (this.destroyed) resolve();
    });
  }

  /** @internal the handler's side */
  push(chunk: Buffer): boolean {
    if (this.destroyed) return true;
    if (this.sink !== null) this.sink.data(chunk);
    else if (this.held === null) this.held = [chunk];
    else this.held.push(chunk);
    return !this.paused;
  }

  /** @internal */
  finish(o: Error | "end"): void {
    if (this.outcome !== null) return;
    this.outcome = o;
    const s = this.sink;
    if (s === null || this.destroyed) return;
    if (o === "end") s.end();
    else s.error(o);
  }
}

export interface UpstreamResponse {
  statusCode: number;
  /** Lower-case names; a repeated header is an array. */
  headers: Record<string, string | string[]>;
  body: UpstreamBody;
}

/** An attempt ran past its deadline (upstream's total timeout). */
export class UpstreamDeadline extends Error {
  readonly code = "METER_UPSTREAM_DEADLINE";
  constructor(ms: number) {
    super(`the provider's answer did not end within ${ms} ms`);
  }
}

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
    case "METER_UPSTREAM_DEADLINE":
      return "timeout";
    default:
      return "socket";
  }
}

function parseRawHeaders(raw: Buffer[]): Record<string, string | string[]> {
  const h: Record<string, string | string[]> = {};
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const k = raw[i]!.toString("latin1").toLowerCase();
    const v = raw[i + 1]!.toString("latin1");
    const prev = h[k];
    if (prev === undefined) h[k] = v;
    else if (Array.isArray(prev)) prev.push(v);
    else h[k] = [prev, v];
  }
  return h;
}

/** One request's undici handler (the legacy handler API undici runs natively). */
class CallHandler implements Dispatcher.DispatchHandler {
  private body: UpstreamBody | null = null;
  private abortFn: ((err: Error) => void) | null = null;
  private reason: Error | null = null;
  private settledHead = false;
  private readonly deadline: NodeJS.Timeout;

  constructor(
    private readonly signal: AbortSource,
    deadlineMs: number,
    private readonly resolve: (r: UpstreamResponse) => void,
    private readonly reject: (err: Error) => void,
  ) {
    signal.once("abort", this.onAbort);
    this.deadline = setTimeout(() => this.fail(new UpstreamDeadline(deadlineMs)), deadlineMs);
  }

  private readonly onAbort = (): void => this.fail(new errors.RequestAbortedError());

  /**
   * Abort the request. The failure reaches the body's sink through undici's onError; a request still
   * waiting for its head is rejected at once (it may wait in the pool's queue, never connected).
   */
  private fail(reason: Error): void {
    if (this.reason !== null) return;
    this.reason = reason;
    this.abortFn?.(reason);
    if (!this.settledHead) {
      this.settledHead = true;
      this.done();
      this.reject(reason);
    }
  }

  private done(): void {
    clearTimeout(this.deadline);
    this.signal.off("abort", this.onAbort);
  }

  onConnect(abort: (err?: Error) => void): void {
    if (this.reason !== null) {
      abort(this.reason);
      return;
    }
    this.abortFn = abort;
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (statusCode < 200 || this.settledHead) return true;
    const body = new UpstreamBody();
    body.resumeFn = resume;
    body.abortFn = this.abortFn;
    this.body = body;
    this.settledHead = true;
    this.resolve({ statusCode, headers: parseRawHeaders(rawHeaders), body });
    return true;
  }

  onData(chunk: Buffer): boolean {
    return this.body === null ? true : this.body.push(chunk);
  }

  onComplete(): void {
    this.done();
    this.body?.finish("end");
  }

  onError(err: Error): void {
    this.done();
    if (!this.settledHead) {
      this.settledHead = true;
      this.reject(err);
    } else this.body?.finish(this.reason ?? err);
  }
}

export class Upstream {
  private readonly pool: Pool;
  private readonly path: string;
  private readonly headers: Record<string, string>;
  private readonly deadlineMs: number;
  readonly origin: string;

  constructor(opts: UpstreamOptions) {
    const u = new URL(opts.url);
    this.origin = u.origin;
    this.path = `${u.pathname.replace(/\/+$/, "")}/chat/completions`;
    this.headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
    if (opts.apiKey) this.headers.authorization = `Bearer ${opts.apiKey}`;
    this.deadlineMs = opts.timeoutMs;
    // The attempt's deadline (CallHandler) bounds every phase; undici's own phase timeouts, set to
    // the same length, can never end an attempt first.
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

  /** The answer's head (its body to be attached), or the attempt's failure. */
  chatCompletions(body: Buffer | string, signal: AbortSource): Promise<UpstreamResponse> {
    if (signal.aborted) return Promise.reject(new errors.RequestAbortedError());
    return new Promise((resolve, reject) => {
      this.pool.dispatch(
        { origin: this.origin, path: this.path, method: "POST", headers: this.headers, body },
        new CallHandler(signal, this.deadlineMs, resolve, reject),
      );
    });
  }

  async close(): Promise<void> {
    await this.pool.close().catch(() => this.pool.destroy());
  }

  async destroy(): Promise<void> {
    await this.pool.destroy();
  }
}
