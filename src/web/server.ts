/**
 * The status web server (node:http): the page, its live fragment, the JSON API, server-sent events,
 * /metrics, /healthz (liveness) and /readyz (readiness: healthy, not degraded). Bound to STATUS_HOST:STATUS_PORT (loopback by default: the page shows
 * hotkeys and spend, and has no authentication). Read-only apart from the /healthz write probe.
 */
import { readFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";
import type { Config } from "../config.js";
import { InfraError, toValidatorError } from "../errors.js";
import type { Logger } from "../log.js";
import type { LiveStatus } from "../status/index.js";
import type { Db, NetworkId } from "../store/index.js";
import {
  CachedProbe,
  databaseProbe,
  decideHealth,
  dockerNotUsed,
  dockerProbe,
  type HealthReport,
  type ProbeResult,
  readinessReport,
  stillStale,
} from "./health.js";
import { renderHeader, renderMain, renderPage } from "./html.js";
import { METRICS_CONTENT_TYPE, ValidatorMetrics } from "./metrics.js";
import { StatusReader, type StatusSnapshot } from "./snapshot.js";
import { EventHub } from "./sse.js";
import { Tally } from "./tally.js";

export interface StatusServerOptions {
  live: LiveStatus;
  db: Db;
  /** Whose rows the page shows: the daemon's network (null while it holds before knowing it). */
  network: NetworkId | null;
  config: Config;
  log: Logger;
  /**
   * Test seam: replaces the Docker engine ping (production pings config.evaluation.dockerSocket when
   * EVAL_ENABLED is on; weight-only mode uses no Docker).
   */
  dockerPing?: () => Promise<ProbeResult>;
  /** Test seam: SSE heartbeat interval. */
  heartbeatMs?: number;
}

export interface StatusServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

const STATIC_FILES = {
  "/static/app.js": { file: "app.js", type: "text/javascript; charset=utf-8" },
  "/static/style.css": { file: "style.css", type: "text/css; charset=utf-8" },
  "/static/components.css": { file: "components.css", type: "text/css; charset=utf-8" },
} as const;

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const limitQuery = z.coerce.number().int().min(1).max(200).catch(20);
const evaluationId = z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/);

/** Docker is pinged at most this often; a scrape storm must not become a ping storm. */
const DOCKER_PROBE_TTL_MS = 5000;
const DB_PROBE_TTL_MS = 2000;

async function loadStatic(log: Logger): Promise<Map<string, { body: Buffer; type: string }>> {
  const out = new Map<string, { body: Buffer; type: string }>();
  for (const [path, f] of Object.entries(STATIC_FILES)) {
    const url = new URL(`./static/${f.file}`, import.meta.url);
    try {
      out.set(path, { body: await readFile(url), type: f.type });
    } catch (err) {
      // The page still renders server-side without them; say loudly that the build missed a step.
      log.error({ file: url.pathname, err: (err as Error).message }, "web.static_missing");
    }
  }
  return out;
}

function send(
  res: ServerResponse,
  status: number,
  type: string,
  body: string | Buffer,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, {
    "content-type": type,
    "content-length": String(Buffer.byteLength(body)),
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    ...headers,
  });
  res.end(body);
}

const sendJson = (res: ServerResponse, status: number, value: unknown) =>
  send(res, status, "application/json; charset=utf-8", `${JSON.stringify(value)}\n`);

const sendError = (res: ServerResponse, status: number, code: string, message: string) =>
  sendJson(res, status, { error: { code, message } });

/** The health decision on the probes' (cached) results and the live state's loops, alarms and outages. */
async function healthNow(
  live: LiveStatus,
  dbProbe: CachedProbe,
  docker: CachedProbe,
  degradedAfterMs: number,
): Promise<HealthReport> {
  const [database, dockerResult] = await Promise.all([dbProbe.get(), docker.get()]);
  // The live state's clock, so "silent for N s" agrees with how staleness was judged.
  const snap = live.snapshot();
  return decideHealth(
    {
      staleLoops: stillStale(live.staleLoops(), snap.now),
      database,
      docker: dockerResult,
      alarms: snap.alarms,
      outages: [...live.outages.values()],
      degradedAfterMs,
    },
    snap.now,
  );
}

/** What the server answers with: the health decision, the snapshot, and the parts that read the database. */
interface Routes {
  health: () => Promise<HealthReport>;
  snapshot: () => Promise<StatusSnapshot>;
  reader: StatusReader;
  metrics: ValidatorMetrics;
  hub: EventHub;
  statics: Map<string, { body: Buffer; type: string }>;
}

/** One request, by its path (GET and HEAD only). */
async function route(r: Routes, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { health, snapshot, reader, metrics, hub, statics } = r;
  const url = new URL(req.url ?? "/", "http://status.local");
  const path = url.pathname;
  if (req.method !== "GET" && req.method !== "HEAD") {
    send(res, 405, "text/plain; charset=utf-8", "method not allowed\n", { allow: "GET, HEAD" });
    return;
  }
  if (path === "/" || path === "/index.html") {
    send(res, 200, "text/html; charset=utf-8", renderPage(await snapshot()), {
      "content-security-policy": CSP,
    });
    return;
  }
  if (path === "/fragment") {
    const s = await snapshot();
    sendJson(res, 200, { now: s.now, header: renderHeader(s), main: renderMain(s) });
    return;
  }
  if (path === "/favicon.ico") {
    res.writeHead(204, { "cache-control": "max-age=86400" }).end();
    return;
  }
  const file = statics.get(path);
  if (file) {
    send(res, 200, file.type, file.body, { "cache-control": "no-cache" });
    return;
  }
  if (path === "/healthz") {
    const report = await health();
    sendJson(res, report.status, report);
    return;
  }
  if (path === "/readyz") {
    const report = readinessReport(await health());
    sendJson(res, report.status, report);
    return;
  }
  if (path === "/metrics") {
    send(res, 200, METRICS_CONTENT_TYPE, await metrics.render(await snapshot()));
    return;
  }
  if (path === "/api/status") {
    sendJson(res, 200, await snapshot());
    return;
  }
  if (path === "/api/evaluations") {
    const limit = limitQuery.parse(url.searchParams.get("limit") ?? undefined);
    sendJson(res, 200, { evaluations: reader.recentEvaluations(limit) });
    return;
  }
  if (path.startsWith("/api/evaluations/")) {
    const id = evaluationId.safeParse(decodeURIComponent(path.slice("/api/evaluations/".length)));
    if (!id.success) return sendError(res, 400, "bad_evaluation_id", "not an evaluation id");
    const found = reader.evaluation(id.data);
    if (!found) return sendError(res, 404, "evaluation_not_found", `no evaluation ${id.data}`);
    sendJson(res, 200, found);
    return;
  }
  if (path === "/api/events") {
    if (!hub.accept(req, res)) sendError(res, 503, "too_many_clients", "too many event streams open");
    return;
  }
  sendError(res, 404, "not_found", `no route ${path}`);
}

/** The HTTP server: each request routed, a failure answered 500 and logged, every request logged at debug. */
function httpServer(routes: Routes, log: Logger): Server {
  let reqSeq = 0;
  const server = createServer((req, res) => {
    const id = ++reqSeq;
    const t0 = performance.now();
    route(routes, req, res)
      .catch((err) => {
        const e = toValidatorError(err);
        log.error({ req: id, path: req.url, err: e.toJSON() }, "web.request_failed");
        if (!res.headersSent) sendError(res, 500, e.code, e.message);
        else res.destroy();
      })
      .finally(() => {
        log.debug(
          {
            req: id,
            method: req.method,
            path: req.url,
            status: res.statusCode,
            ms: Math.round(performance.now() - t0),
          },
          "web.request",
        );
      });
  });
  server.keepAliveTimeout = 5000;
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  return server;
}

/** Listens on host:port; a port someone holds is status_port_in_use, never a stack trace. */
function listen(server: Server, host: string, port: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      reject(
        new InfraError(
          err.code === "EADDRINUSE" ? "status_port_in_use" : "status_listen_failed",
          `status server cannot listen on ${host}:${port}: ${err.message}`,
          { cause: err, retryable: false },
        ),
      );
    };
    server.once("error", onError);
    server.listen(port, host, () => {
      server.off("error", onError);
      resolve();
    });
  });
}

export async function startStatusServer(opts: StatusServerOptions): Promise<StatusServer> {
  const { live, db, config } = opts;
  const log = opts.log.child({ component: "web" });
  const reader = new StatusReader(db, opts.network);
  const tally = new Tally();
  const detachTally = tally.attach(live);
  const metrics = new ValidatorMetrics();
  const hub = new EventHub(live, { log, ...(opts.heartbeatMs ? { heartbeatMs: opts.heartbeatMs } : {}) });
  const dbProbe = new CachedProbe(databaseProbe(db), DB_PROBE_TTL_MS);
  const docker = new CachedProbe(
    opts.dockerPing ??
      (config.evaluation.enabled ? dockerProbe(config.evaluation.dockerSocket) : dockerNotUsed()),
    DOCKER_PROBE_TTL_MS,
  );
  const statics = await loadStatic(log);

  // When each scenario's last progress event arrived, so active scenarios' elapsed time keeps counting.
  const seen = new Map<string, number>();
  const onProgress = (e: { scenario: string }) => seen.set(e.scenario, Date.now());
  const onEvaluation = () => seen.clear();
  live.on("progress", onProgress);
  live.on("evaluation", onEvaluation);

  const health = () => healthNow(live, dbProbe, docker, config.status.degradedAfterMs);
  const snapshot = async (): Promise<StatusSnapshot> =>
    reader.snapshot({
      config,
      live,
      counters: tally.snapshot(),
      health: await health(),
      progressSeenAt: (s) => seen.get(s),
    });

  const routes: Routes = { health, snapshot, reader, metrics, hub, statics };
  const server = httpServer(routes, log);
  await listen(server, config.status.host, config.status.port).catch((err) => {
    hub.close();
    detachTally();
    live.off("progress", onProgress);
    live.off("evaluation", onEvaluation);
    throw err;
  });
  server.on("error", (err) => log.error({ err: err.message }, "web.server_error"));

  const port = (server.address() as AddressInfo).port;
  const host = config.status.host;
  // A wildcard bind is reachable on loopback; IPv6 literals need brackets in a URL.
  const urlHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
  const url = `http://${urlHost}:${port}`;
  log.info({ url, bind: host, port }, "web.listening");

  let closed: Promise<void> | undefined;
  return {
    url,
    port,
    close() {
      closed ??= new Promise<void>((resolve) => {
        hub.close();
        detachTally();
        live.off("progress", onProgress);
        live.off("evaluation", onEvaluation);
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closed;
    },
  };
}
