/**
 * The meter's HTTP face: listeners (node:http), routing, and the small read-only routes. The chat
 * route is handed to the chat path with its episode.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { InfraError } from "../errors.js";
import type { Logger } from "../log.js";
import type { ChatPath } from "./chat.js";
import { budgetView, type Episode, type Episodes, remainingHeader } from "./episodes.js";
import { send, sendError } from "./http.js";

export interface Listener {
  host: string;
  port: number;
  close(): Promise<void>;
}

export interface ServerLimits {
  /** Time to receive a whole request, headers and body (a slow sender is cut). */
  requestTimeoutMs: number;
  /** Connections one listener holds at once; more are refused by the kernel's backlog. */
  maxConnections: number;
}

export interface ListenOptions {
  /** Answer this token alone. */
  onlyToken?: string;
  /** When the port is taken, listen on an ephemeral port instead (as upstream's meter does). */
  fallbackToEphemeral?: boolean;
}

export class MeterServer {
  private readonly servers = new Set<Server>();
  private readonly running = new Set<Promise<void>>();

  constructor(
    private readonly episodes: Episodes,
    private readonly chat: ChatPath,
    private readonly modelsBody: Buffer,
    private readonly log: Logger,
    private readonly limits: ServerLimits,
  ) {}

  /**
   * Serve on host:port (port 0: any). A listener given `onlyToken` answers that one token and treats
   * every other as unknown; without it, a listener accepts every live token.
   */
  async listen(host: string, port: number, opts: ListenOptions = {}): Promise<Listener> {
    const { onlyToken } = opts;
    const server = createServer(
      {
        keepAliveTimeout: 30_000,
        headersTimeout: Math.min(60_000, this.limits.requestTimeoutMs),
        requestTimeout: this.limits.requestTimeoutMs,
      },
      (req, res) => this.track(this.route(req, res, onlyToken)),
    );
    server.maxConnections = this.limits.maxConnections;
    const bind = (p: number) =>
      new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(p, host, () => {
          server.off("error", reject);
          resolve();
        });
      });
    try {
      try {
        await bind(port);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (!(opts.fallbackToEphemeral && code === "EADDRINUSE" && port !== 0)) throw err;
        this.log.warn({ host, port, code }, "meter.port_busy_using_ephemeral");
        await bind(0);
      }
    } catch (err) {
      throw new InfraError(
        "meter_listen_failed",
        `meter cannot listen on ${host}:${port}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
        { cause: err },
      );
    }
    this.servers.add(server);
    const addr = server.address() as AddressInfo;
    this.log.info({ host: addr.address, port: addr.port }, "meter.listening");
    return { host: addr.address, port: addr.port, close: () => this.closeServer(server) };
  }

  /** Close every listener and wait for the requests being served. */
  async close(): Promise<void> {
    await Promise.all([...this.servers].map((s) => this.closeServer(s, 500)));
    await Promise.allSettled([...this.running]);
  }

  private async closeServer(server: Server, graceMs = 2_000): Promise<void> {
    if (!this.servers.delete(server)) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    const t = setTimeout(() => server.closeAllConnections(), graceMs);
    t.unref();
    await closed;
    clearTimeout(t);
  }

  private track(p: Promise<void>): void {
    this.running.add(p);
    p.finally(() => this.running.delete(p));
  }

  private async route(req: IncomingMessage, res: ServerResponse, onlyToken?: string): Promise<void> {
    try {
      const url = req.url ?? "/";
      const q = url.indexOf("?");
      const path = q < 0 ? url : url.slice(0, q);
      if (path === "/v1/chat/completions") {
        if (req.method !== "POST")
          return sendError(
            res,
            405,
            "method not allowed",
            "invalid_request_error",
            "method_not_allowed",
            "0.000000",
          );
        const t0 = performance.now();
        const ep = this.tokenEpisode(req, onlyToken);
        if (ep === null) {
          req.resume();
          return sendError(res, 401, "unknown or closed episode token", "auth", "invalid_token", "0.000000");
        }
        return await this.chat.handle(req, res, ep, t0);
      }
      const ep = this.tokenEpisode(req, onlyToken);
      const rem = remainingHeader(ep);
      if (req.method !== "GET" && req.method !== "HEAD")
        return sendError(res, 405, "method not allowed", "invalid_request_error", "method_not_allowed", rem);
      if (path === "/v1/models") return send(res, 200, this.modelsBody, rem);
      if (path === "/health" || path === "/healthz")
        return send(
          res,
          200,
          Buffer.from(JSON.stringify({ ok: true, episodes: this.episodes.liveCount })),
          rem,
        );
      if (path === "/v1/budget") {
        if (ep === null)
          return sendError(res, 401, "unknown or closed episode token", "auth", "invalid_token", rem);
        return send(res, 200, Buffer.from(JSON.stringify(budgetView(ep))), rem);
      }
      return sendError(res, 404, `no route ${path}`, "invalid_request_error", "not_found", rem);
    } catch (err) {
      // Our bug, not the policy's: answer once if we still can, and keep serving.
      this.log.error({ err, code: "meter_internal_error" }, "meter.internal_error");
      if (!res.headersSent)
        sendError(res, 500, "meter internal error", "server_error", "meter_internal_error", "0.000000");
      else res.destroy();
    }
  }

  /** The live episode of the request's bearer token (when the listener takes it), or null. */
  private tokenEpisode(req: IncomingMessage, onlyToken?: string): Episode | null {
    const auth = req.headers.authorization;
    if (auth === undefined || auth.length < 8 || !/^bearer /i.test(auth)) return null;
    const token = auth.slice(7).trim();
    if (onlyToken !== undefined && token !== onlyToken) return null;
    return this.episodes.liveEpisode(token);
  }
}
