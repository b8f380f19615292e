/**
 * Server-sent events for the status page: LiveStatus events forwarded as they happen. Bounded: a
 * capped number of clients, and a client that stops reading (its buffer grows past a limit) is
 * dropped rather than letting the daemon's memory grow.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "../log.js";
import type { LiveStatus, LiveStatusEvents } from "../status/index.js";

/** The events the page reacts to (meter calls are too frequent to forward one by one). */
export const FORWARDED = [
  "progress",
  "evaluation",
  "epoch",
  "alarm",
  "loop",
  "weights",
  "episodeEnd",
] as const;
export type ForwardedEvent = (typeof FORWARDED)[number];

/** One SSE frame. `data` is JSON on one line (JSON.stringify never emits raw newlines). */
export function sseFrame(event: string, data: unknown, id?: number): string {
  return `${id === undefined ? "" : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

export interface EventHubOptions {
  log: Logger;
  maxClients?: number;
  heartbeatMs?: number;
  /** Bytes queued for one client beyond which it is dropped. */
  maxBufferedBytes?: number;
}

export class EventHub {
  private readonly clients = new Set<ServerResponse>();
  private readonly detach: () => void;
  private readonly heartbeat: NodeJS.Timeout;
  private seq = 0;
  private readonly maxClients: number;
  private readonly maxBuffered: number;

  constructor(
    live: LiveStatus,
    private readonly opts: EventHubOptions,
  ) {
    this.maxClients = opts.maxClients ?? 32;
    this.maxBuffered = opts.maxBufferedBytes ?? 1 << 20;
    const handlers = FORWARDED.map((name) => {
      const fn = (payload: LiveStatusEvents[typeof name][0]) => this.broadcast(name, payload);
      live.on(name, fn as never);
      return [name, fn] as const;
    });
    this.detach = () => {
      for (const [name, fn] of handlers) live.off(name, fn as never);
    };
    // A comment line keeps proxies and idle connections from timing the stream out.
    this.heartbeat = setInterval(() => this.writeAll(": ping\n\n"), opts.heartbeatMs ?? 15_000);
    this.heartbeat.unref();
  }

  get size(): number {
    return this.clients.size;
  }

  /** Serve GET /api/events; false when the hub is full (the caller answers 503). */
  accept(req: IncomingMessage, res: ServerResponse): boolean {
    if (this.clients.size >= this.maxClients) return false;
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    });
    // retry: how long EventSource waits before reconnecting after the daemon restarts.
    res.write(`retry: 3000\n${sseFrame("hello", { now: Date.now() }, ++this.seq)}`);
    this.clients.add(res);
    const drop = () => this.clients.delete(res);
    req.on("close", drop);
    res.on("close", drop);
    res.on("error", drop);
    return true;
  }

  broadcast(event: ForwardedEvent | "hello", data: unknown): void {
    this.writeAll(sseFrame(event, data, ++this.seq));
  }

  private writeAll(frame: string): void {
    for (const res of this.clients) {
      if (res.writableLength > this.maxBuffered) {
        this.opts.log.warn({ buffered: res.writableLength }, "web.sse_client_dropped");
        this.clients.delete(res);
        res.destroy();
        continue;
      }
      res.write(frame);
    }
  }

  close(): void {
    clearInterval(this.heartbeat);
    this.detach();
    for (const res of this.clients) res.end();
    this.clients.clear();
  }
}
