/**
 * The simulator's HTTP shell (node:http, no framework: it is also the upstream of the meter's
 * zero-latency benchmark). Everything it decides comes from the pure modules beside it.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { resolve } from "node:path";
import { InfraError, isAbortError } from "../errors.js";
import { type Logger, silentLogger } from "../log.js";
import { PrefixCache } from "./cache.js";
import { type ChatContext, type EngySimStats, handleChat } from "./chat.js";
import { type FaultPlan, FaultSchedule } from "./faults.js";
import { HttpError, invalid, sendError } from "./http.js";
import {
  loadProfileFile,
  resolveProfile,
  SIM_MODELS,
  type SimProfile,
  type SimProfileOverride,
} from "./profile.js";
import { loadScenarios, type SimScenario } from "./scenarios.js";
import { tokenizer } from "./tokens.js";

export type { EngySimStats } from "./chat.js";

export interface EngySimOptions {
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 0 (an ephemeral port). */
  port?: number;
  /** Default 11 (ENGY_SIM_SEED's default). */
  seed?: number;
  /** A profile override object, or the path of a JSON file; merged over the shipped defaults. */
  profile?: SimProfileOverride | string;
  /** Default ./scenarios (resolved against the working directory); a missing dir means no scenarios. */
  scenariosDir?: string;
  /** Multiplies every latency; default 0 (zero-latency mode, for tests and benchmarks). */
  latencyScale?: number;
  /** Accepted bearer tokens; "any" (default) accepts any non-empty one. */
  apiKeys?: string[] | "any";
  log?: Logger;
  /** Clock for `created` (unix seconds); tests pin it to compare whole bodies byte for byte. */
  now?: () => number;
}

export interface EngySim {
  /** Base URL, e.g. http://127.0.0.1:PORT/v1 */
  url: string;
  port: number;
  close(): Promise<void>;
  stats(): EngySimStats;
  /** Replace the fault plan (per-rule counters restart). */
  setFaults(f: FaultPlan): void;
  /** Names of the scenarios it recognises. */
  scenarios: string[];
  profile: SimProfile;
}

const MODELS_CREATED = 1_767_225_600;

export async function startEngySim(opts: EngySimOptions = {}): Promise<EngySim> {
  const log = (opts.log ?? silentLogger).child({ component: "engy-sim" });
  const { ctx, scenariosDir } = await chatContext(opts, log);
  const keys = opts.apiKeys ?? "any";
  const server = createServer((req, res) => {
    route(ctx, keys, req, res).catch((err: unknown) => answerFailure(log, res, err));
  });
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  const { url, port } = await listen(server, opts.host ?? "127.0.0.1", opts.port ?? 0);
  log.info(
    {
      url,
      seed: ctx.seed,
      latency_scale: ctx.scale,
      scenarios: ctx.scenarios.length,
      scenarios_dir: scenariosDir,
    },
    "engy_sim.listening",
  );
  return {
    url,
    port,
    scenarios: ctx.scenarios.map((s) => s.name),
    profile: ctx.profile,
    stats: () => snapshotStats(ctx.stats),
    setFaults: (plan) => ctx.faults.set(plan),
    close: () =>
      new Promise<void>((ok) => {
        server.close(() => ok());
        server.closeAllConnections();
      }),
  };
}

/** The options resolved once: profile and scenarios loaded, fault plan, cache and stats started. */
async function chatContext(
  opts: EngySimOptions,
  log: Logger,
): Promise<{ ctx: ChatContext; scenariosDir: string }> {
  const seed = opts.seed ?? 11;
  const scale = opts.latencyScale ?? 0;
  if (!(scale >= 0) || !Number.isFinite(scale))
    throw new InfraError("invalid_latency_scale", `latencyScale ${scale}`);
  const profile =
    typeof opts.profile === "string" ? await loadProfileFile(opts.profile) : resolveProfile(opts.profile);
  const scenariosDir = resolve(opts.scenariosDir ?? "scenarios");
  const scenarios: SimScenario[] = await loadScenarios(scenariosDir);
  const ctx: ChatContext = {
    seed,
    profile,
    scenarios,
    faults: new FaultSchedule(seed, { rules: profile.faults }),
    cache: new PrefixCache(),
    stats: { requests: 0, byModel: {}, billed: {} },
    log,
    now: opts.now ?? (() => Math.floor(Date.now() / 1000)),
    scale,
    served: 0,
    tokenizer: tokenizer(profile.tokenizer),
  };
  return { ctx, scenariosDir };
}

const MODELS_BODY = JSON.stringify({
  object: "list",
  data: SIM_MODELS.map((id) => ({ id, object: "model", created: MODELS_CREATED, owned_by: "engy" })),
});

/** `/health` without auth; `/v1/models` and `/v1/chat/completions` behind the bearer check. */
async function route(
  ctx: ChatContext,
  keys: string[] | "any",
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const path = (req.url ?? "/").split("?")[0]!.replace(/\/+$/, "");
  if (path === "/health" && req.method === "GET") {
    res.writeHead(200, { "content-type": "application/json" }).end('{"status":"ok"}');
    return;
  }
  const target = path === "/v1/models" ? "models" : path === "/v1/chat/completions" ? "chat" : undefined;
  if (!target)
    throw new HttpError({
      status: 404,
      type: "invalid_request_error",
      code: "unknown_url",
      message: `Unknown request URL: ${req.method} ${path}`,
    });
  if (!authorised(req, keys))
    throw new HttpError({
      status: 401,
      type: "invalid_request_error",
      code: "invalid_api_key",
      message: "Missing or invalid Authorization header (expected: Bearer <api key>).",
    });
  if (target === "models") {
    if (req.method !== "GET") throw invalid(`${req.method} not allowed`, "method_not_allowed", 405);
    res.writeHead(200, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(MODELS_BODY),
    });
    res.end(MODELS_BODY);
    return;
  }
  if (req.method !== "POST") throw invalid(`${req.method} not allowed`, "method_not_allowed", 405);
  await handleChat(ctx, req, res);
}

function authorised(req: IncomingMessage, keys: string[] | "any"): boolean {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? "");
  if (!m) return false;
  return keys === "any" || keys.includes(m[1]!);
}

function answerFailure(log: Logger, res: ServerResponse, err: unknown): void {
  if (isAbortError(err)) return; // the client went away mid-wait: nothing to answer
  if (err instanceof HttpError) sendError(res, err.shape);
  else {
    log.error({ err }, "engy_sim.internal_error");
    sendError(res, { status: 500, type: "server_error", code: "engy_sim_bug", message: String(err) });
  }
}

async function listen(server: Server, host: string, port: number): Promise<{ url: string; port: number }> {
  await new Promise<void>((ok, fail) => {
    server.once("error", (err) =>
      fail(new InfraError("listen_failed", `engy-sim: ${err.message}`, { cause: err })),
    );
    server.listen(port, host, () => ok());
  });
  const bound = (server.address() as AddressInfo).port;
  const urlHost = host.includes(":") ? `[${host}]` : host === "0.0.0.0" ? "127.0.0.1" : host;
  return { url: `http://${urlHost}:${bound}/v1`, port: bound };
}

/** A copy of the stats, so a caller's later reads do not move. */
function snapshotStats(stats: EngySimStats): EngySimStats {
  return {
    requests: stats.requests,
    byModel: { ...stats.byModel },
    billed: Object.fromEntries(Object.entries(stats.billed).map(([m, b]) => [m, { ...b }])),
  };
}
