/**
 * The simulator's HTTP shell (node:http, no framework: it is also the upstream of the meter's
 * zero-latency benchmark). Everything it decides comes from the pure modules beside it.
 */
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { InfraError, isAbortError } from "../errors.js";
import { type Logger, silentLogger } from "../log.js";
import { planTurn } from "./brain.js";
import { PrefixCache } from "./cache.js";
import { chatRequestSchema, maxTokensOf, normaliseMessages, toolNamesOf } from "./conversation.js";
import {
  type Fault,
  FaultHeaderError,
  type FaultPlan,
  FaultSchedule,
  mergeFaults,
  parseFaultHeader,
  type RequestFaults,
} from "./faults.js";
import {
  loadProfileFile,
  resolveProfile,
  SIM_MODELS,
  type SimProfile,
  type SimProfileOverride,
} from "./profile.js";
import { loadScenarios, type SimScenario } from "./scenarios.js";
import { promptTokens } from "./tokens.js";
import {
  applyMaxTokens,
  type Completion,
  completionBody,
  completionTokensOf,
  type ErrorShape,
  errorBody,
  streamErrorEvent,
  streamEvents,
} from "./wire.js";

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

export interface EngySimStats {
  /** Chat-completion requests that passed auth and the model check (faulted ones included). */
  requests: number;
  byModel: Record<string, number>;
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

const MAX_BODY_BYTES = 64 * 1024 * 1024;
const MODELS_CREATED = 1_767_225_600;
const FAULT_HEADER = "x-sim-fault";

class HttpError extends Error {
  constructor(readonly shape: ErrorShape) {
    super(shape.message);
  }
}

const invalid = (message: string, code = "invalid_request", status = 400): HttpError =>
  new HttpError({ status, type: "invalid_request_error", code, message });

function sendError(res: ServerResponse, e: ErrorShape, headers: Record<string, string> = {}): void {
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

function readBody(req: IncomingMessage): Promise<Buffer> {
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

const hex = (...parts: (string | number)[]) =>
  createHash("sha256").update(parts.join("\u001f")).digest("hex");

export async function startEngySim(opts: EngySimOptions = {}): Promise<EngySim> {
  const log = (opts.log ?? silentLogger).child({ component: "engy-sim" });
  const seed = opts.seed ?? 11;
  const scale = opts.latencyScale ?? 0;
  if (!(scale >= 0) || !Number.isFinite(scale))
    throw new InfraError("invalid_latency_scale", `latencyScale ${scale}`);
  const profile =
    typeof opts.profile === "string" ? await loadProfileFile(opts.profile) : resolveProfile(opts.profile);
  const scenariosDir = resolve(opts.scenariosDir ?? "scenarios");
  const scenarios: SimScenario[] = await loadScenarios(scenariosDir);
  const keys = opts.apiKeys ?? "any";
  const now = opts.now ?? (() => Math.floor(Date.now() / 1000));
  const faults = new FaultSchedule(seed, { rules: profile.faults });
  const cache = new PrefixCache();
  const stats: EngySimStats = { requests: 0, byModel: {} };
  let served = 0;
  const modelsBody = JSON.stringify({
    object: "list",
    data: SIM_MODELS.map((id) => ({ id, object: "model", created: MODELS_CREATED, owned_by: "engy" })),
  });

  const authorised = (req: IncomingMessage): boolean => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? "");
    if (!m) return false;
    return keys === "any" || keys.includes(m[1]!);
  };

  async function chat(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let json: unknown;
    try {
      json = JSON.parse((await readBody(req)).toString("utf8"));
    } catch (err) {
      if (err instanceof HttpError) throw err;
      throw invalid("request body is not valid JSON", "invalid_json");
    }
    const parsed = chatRequestSchema.safeParse(json);
    if (!parsed.success) {
      const why = parsed.error.issues.map((i) => `${i.path.join(".") || "(body)"}: ${i.message}`).join("; ");
      throw invalid(why);
    }
    const body = parsed.data;
    if (!profile.models[body.model])
      throw new HttpError({
        status: 404,
        type: "invalid_request_error",
        code: "model_not_found",
        param: "model",
        message: `The model \`${body.model}\` does not exist or you do not have access to it.`,
      });
    let headerFaults: Fault[] = [];
    const header = req.headers[FAULT_HEADER];
    if (typeof header === "string") {
      try {
        headerFaults = parseFaultHeader(header);
      } catch (err) {
        if (err instanceof FaultHeaderError) throw invalid(`${FAULT_HEADER}: ${err.message}`, err.code);
        throw err;
      }
    }
    stats.requests++;
    stats.byModel[body.model] = (stats.byModel[body.model] ?? 0) + 1;
    const requestId = `req_${hex(seed, "request", ++served).slice(0, 24)}`;
    const f = mergeFaults([...headerFaults, ...faults.next(body.model)]);
    const t0 = performance.now();
    const until = async (at: number) => {
      const wait = at - performance.now();
      if (wait > 0) await sleep(wait, undefined, { signal: closedSignal(res) });
    };
    if (f.stallMs > 0) await until(t0 + f.stallMs);
    const idHeader = { "x-engy-request-id": requestId };
    if (f.status) {
      const e: ErrorShape =
        f.status.code === 429
          ? {
              status: 429,
              type: "requests",
              code: "rate_limit_exceeded",
              message: "Rate limit reached for requests. Please retry after a short wait.",
            }
          : {
              status: 503,
              type: "server_error",
              code: "service_unavailable",
              message: "The engine is currently overloaded, please try again later.",
            };
      log.debug({ request_id: requestId, model: body.model, status: e.status }, "engy_sim.fault_status");
      sendError(res, e, { ...idHeader, "retry-after": String(f.status.retryAfterS) });
      return;
    }

    const model = profile.models[body.model]!;
    const messages = normaliseMessages(body);
    const plan = planTurn({
      seed,
      model: body.model,
      profile,
      scenarios,
      messages,
      toolNames: toolNamesOf(body),
    });
    const cut = applyMaxTokens(plan.content, plan.toolCalls, maxTokensOf(body));
    const id = `chatcmpl-${hex(seed, body.model, JSON.stringify(body.messages), JSON.stringify(body.tools ?? null), maxTokensOf(body) ?? "").slice(0, 24)}`;
    const prompt = promptTokens(messages, body.tools ?? undefined);
    const cached = model.cache ? cache.lookupAndRecord(body.model, messages, body.tools ?? undefined) : 0;
    const completionTokens = completionTokensOf(cut.content, cut.toolCalls);
    const completion: Completion = {
      id,
      created: now(),
      model: body.model,
      requestId,
      content: cut.content,
      toolCalls: cut.toolCalls.map((tc, i) => ({ ...tc, id: `call_${hex(id, i).slice(0, 24)}` })),
      finishReason: cut.truncated ? "length" : cut.toolCalls.length > 0 ? "tool_calls" : "stop",
      usage: {
        prompt_tokens: prompt,
        completion_tokens: completionTokens,
        total_tokens: prompt + completionTokens,
        prompt_tokens_details: { cached_tokens: cached },
      },
    };
    log.debug(
      {
        request_id: requestId,
        model: body.model,
        step: plan.step,
        scenario: plan.scenario,
        malformed: plan.malformed,
        prompt_tokens: prompt,
        cached_tokens: cached,
        completion_tokens: completionTokens,
        finish_reason: completion.finishReason,
        stream: body.stream === true,
        faults: describe(f),
      },
      "engy_sim.request",
    );
    const ttftAt = t0 + f.stallMs + model.ttft_ms * scale;
    const msPerToken = (1000 / model.tokens_per_s) * scale;

    if (body.stream !== true) {
      if (f.error) {
        await until(ttftAt);
        sendError(
          res,
          {
            status: 500,
            type: "server_error",
            code: "engy_internal_error",
            message: "The server had an error while processing your request. Sorry about that!",
          },
          idHeader,
        );
        return;
      }
      const text = completionBody(completion, { usage: !f.noUsage });
      await until(ttftAt + completionTokens * msPerToken);
      res.writeHead(200, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(text),
        ...idHeader,
      });
      if (f.cut) {
        const bytes = Buffer.from(text);
        cutAfter(res, bytes.subarray(0, Math.floor(bytes.length / 2)));
        return;
      }
      if (f.dripMs > 0) {
        const bytes = Buffer.from(text);
        const start = performance.now();
        for (let i = 0; i < bytes.length; i += 64) {
          if (i > 0) await until(start + (i / 64) * f.dripMs);
          res.write(bytes.subarray(i, i + 64));
        }
        res.end();
        return;
      }
      res.end(text);
      return;
    }

    const includeUsage = body.stream_options?.include_usage === true && !f.noUsage;
    let events = streamEvents(completion, { usage: includeUsage, chunkChars: f.dripMs > 0 ? 4 : 32 });
    let ending: "done" | "cut" | "error" = "done";
    if (f.cut || f.error) {
      const after = (f.cut ?? f.error)!.afterChunks ?? Math.floor(events.length / 2);
      // A cut always lets at least the first chunk out: "headers, then nothing" is a stall, not a cut.
      events = events.slice(0, Math.min(Math.max(after, f.cut ? 1 : 0), events.length - 1));
      ending = f.cut ? "cut" : "error";
    }
    if (ending === "error") events.push(streamErrorEvent(requestId));
    await until(ttftAt);
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
      ...idHeader,
    });
    const perEvent = events.length > 2 ? (completionTokens * msPerToken) / (events.length - 2) : 0;
    const gap = Math.max(perEvent, f.dripMs);
    if (gap === 0) {
      // Zero-latency mode: one write, the cheapest thing the server can do.
      if (ending === "cut") cutAfter(res, events.join(""));
      else res.end(events.join(""));
      return;
    }
    const start = performance.now();
    for (const [i, e] of events.entries()) {
      if (i > 0) await until(start + i * gap);
      if (ending === "cut" && i === events.length - 1) cutAfter(res, e);
      else res.write(e);
    }
    if (ending !== "cut") res.end();
  }

  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0]!.replace(/\/+$/, "");
    const run = async () => {
      if (path === "/health" && req.method === "GET") {
        res.writeHead(200, { "content-type": "application/json" }).end('{"status":"ok"}');
        return;
      }
      const route = path === "/v1/models" ? "models" : path === "/v1/chat/completions" ? "chat" : undefined;
      if (!route)
        throw new HttpError({
          status: 404,
          type: "invalid_request_error",
          code: "unknown_url",
          message: `Unknown request URL: ${req.method} ${path}`,
        });
      if (!authorised(req))
        throw new HttpError({
          status: 401,
          type: "invalid_request_error",
          code: "invalid_api_key",
          message: "Missing or invalid Authorization header (expected: Bearer <api key>).",
        });
      if (route === "models") {
        if (req.method !== "GET") throw invalid(`${req.method} not allowed`, "method_not_allowed", 405);
        res.writeHead(200, {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(modelsBody),
        });
        res.end(modelsBody);
        return;
      }
      if (req.method !== "POST") throw invalid(`${req.method} not allowed`, "method_not_allowed", 405);
      await chat(req, res);
    };
    run().catch((err: unknown) => {
      if (isAbortError(err)) return; // the client went away mid-wait: nothing to answer
      if (err instanceof HttpError) return sendError(res, err.shape);
      log.error({ err }, "engy_sim.internal_error");
      sendError(res, { status: 500, type: "server_error", code: "engy_sim_bug", message: String(err) });
    });
  });
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;

  const host = opts.host ?? "127.0.0.1";
  await new Promise<void>((ok, fail) => {
    server.once("error", (err) =>
      fail(new InfraError("listen_failed", `engy-sim: ${err.message}`, { cause: err })),
    );
    server.listen(opts.port ?? 0, host, () => ok());
  });
  const port = (server.address() as AddressInfo).port;
  const urlHost = host.includes(":") ? `[${host}]` : host === "0.0.0.0" ? "127.0.0.1" : host;
  const url = `http://${urlHost}:${port}/v1`;
  log.info(
    { url, seed, latency_scale: scale, scenarios: scenarios.length, scenarios_dir: scenariosDir },
    "engy_sim.listening",
  );

  return {
    url,
    port,
    scenarios: scenarios.map((s) => s.name),
    profile,
    stats: () => ({ requests: stats.requests, byModel: { ...stats.byModel } }),
    setFaults: (plan) => faults.set(plan),
    close: () =>
      new Promise<void>((ok) => {
        server.close(() => ok());
        server.closeAllConnections();
      }),
  };
}

/**
 * Aborts when the client goes away, so waits (stall, latency, drip) end with it. Made on first
 * need only: zero-latency requests never wait, and an AbortController per request shows in profiles.
 */
const closedSignals = new WeakMap<ServerResponse, AbortSignal>();
function closedSignal(res: ServerResponse): AbortSignal {
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
function cutAfter(res: ServerResponse, data: string | Buffer): void {
  res.write(data, () => res.socket?.destroy());
}

function describe(f: RequestFaults): string | undefined {
  const parts: string[] = [];
  if (f.stallMs) parts.push(`stall=${f.stallMs}`);
  if (f.dripMs) parts.push(`drip=${f.dripMs}`);
  if (f.cut) parts.push("cut");
  if (f.error) parts.push("error");
  if (f.noUsage) parts.push("no_usage");
  return parts.length ? parts.join(",") : undefined;
}
