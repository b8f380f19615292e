/**
 * The meter: an OpenAI-compatible proxy in the daemon process that every model call of a policy
 * goes through. It alone holds the provider key; per episode it enforces the allowlist and the USD
 * cap (reserve the worst case before forwarding, settle on the provider's usage after) and records
 * a receipt per call. Thin shell: the arithmetic is in ledger.ts, the estimate in estimate.ts.
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { InfraError, InputError } from "../errors.js";
import { type Logger, silentLogger } from "../log.js";
import { AnswerAccumulator, errorInfo, isUsageOnlyEvent } from "./answer.js";
import { estimatePromptTokens, estimateTextTokens, tokensFromChars, UNBILLED_KEYS } from "./estimate.js";
import { CallAbort, drained, errorBody, headerString, readAll, readBody, readLimited, wait } from "./http.js";
import {
  type Budget,
  costOf,
  DEFAULT_MAX_TOKENS,
  newBudget,
  planReservation,
  remaining,
  reserve,
  settle,
  type Usage,
} from "./ledger.js";
import { formatUsd6, type Pico, picoToUsd, usdToPico } from "./money.js";
import { type Allowlist, compilePrices, type ModelPrice, type PriceTable, priceTableHash } from "./prices.js";
import { type RawScan, scanRequest, spliceMembers } from "./rawjson.js";
import { type Receipt, ReceiptQueue, type ReceiptSink } from "./receipt.js";
import { type ChatKnobs, parseChatKnobs } from "./request.js";
import { DEFAULT_RETRY, parseRetryAfter, type RetryPolicy, retryDelayMs } from "./retry.js";
import { type SseEvent, SseSplitter } from "./sse.js";
import { classifyFailure, Upstream, type UpstreamResponse } from "./upstream.js";

export interface MeterOptions {
  /** Provider base URL including /v1 (LLM_BASE_URL, or the simulator's url). */
  upstreamUrl: string;
  /** The operator's provider key; sent upstream only, never logged. */
  apiKey?: string;
  allowlist: Allowlist;
  prices: PriceTable;
  /** Receipts are also persisted here in batches (the SQLite ReceiptRepo). */
  receipts?: ReceiptSink;
  log?: Logger;
  /** Time to the response head, and the longest silence inside a stream. Default 300 s. */
  upstreamTimeoutMs?: number;
  retry?: Partial<RetryPolicy>;
  /** Largest request body accepted (default 64 MiB: agents resend whole conversations). */
  maxBodyBytes?: number;
  receiptFlushMs?: number;
  receiptBatch?: number;
}

export interface ModelUsage {
  calls: number;
  cost_usd: number;
  prompt_tokens: number;
  cached_tokens: number;
  completion_tokens: number;
}

export interface UsageSummary {
  episode_id: string;
  cap_usd: number;
  cost_usd: number;
  reserved_usd: number;
  /** Calls forwarded upstream (refusals are counted apart). */
  calls: number;
  /** Forwarded calls that failed upstream or were cut, plus malformed requests. */
  errors: number;
  refused_cap: number;
  refused_model: number;
  clamped: number;
  overshoot_usd: number;
  closed_by_overshoot: boolean;
  by_model: Record<string, ModelUsage>;
  tokens: { prompt: number; cached: number; completion: number };
}

export interface Activity {
  /** performance.now() when the token was minted. */
  startedAt: number;
  /** performance.now() when a forwarded call last finished (any status). */
  lastCompletedAt?: number;
  calls: number;
}

export interface Listener {
  host: string;
  port: number;
  close(): Promise<void>;
}

export interface Budget4 {
  cap_usd: number;
  spent_usd: number;
  reserved_usd: number;
  remaining_usd: number;
}

const REMAINING_HEADER = "x-trajrl-budget-remaining-usd";
/** Request members the meter replaces with its own values before forwarding. */
const REWRITTEN_KNOBS: ReadonlySet<string> = new Set([
  "max_tokens",
  "max_completion_tokens",
  "stream_options",
]);
const isBilled = (key: string) => !UNBILLED_KEYS.has(key);
const isNullish = (v: unknown): v is null | undefined => v === null || v === undefined;

/** The raw scan of a body JSON.parse accepted; null when it declines (or, defensively, fails). */
function scanOrNull(text: string): RawScan | null {
  try {
    return scanRequest(text, isBilled);
  } catch {
    return null;
  }
}
const RECENT_EPISODES = 256;
const MAX_ERROR_BODY = 1 << 20;

interface ModelAgg {
  calls: number;
  cost: Pico;
  prompt: number;
  cached: number;
  completion: number;
}

/** Receipts of one episode id (shared by its tokens), kept in memory until evicted after close. */
interface EpisodeRecord {
  episodeId: string;
  receipts: Receipt[];
  nextSeq: number;
  liveTokens: number;
}

class Episode {
  budget: Budget;
  calls = 0;
  errors = 0;
  refusedCap = 0;
  refusedModel = 0;
  clamped = 0;
  readonly byModel = new Map<string, ModelAgg>();
  readonly tokens = { prompt: 0, cached: 0, completion: 0 };
  readonly startedAt = performance.now();
  lastCompletedAt: number | undefined;
  readonly inflight = new Set<CallAbort>();
  closed = false;
  /**
   * The per-call line carries only the meter's own fields (no headers, no token), so it skips the
   * project-wide wildcard redaction, which costs more than the rest of a call's bookkeeping.
   */
  readonly callLog: Logger;

  constructor(
    readonly record: EpisodeRecord,
    cap: Pico,
    readonly log: Logger,
  ) {
    this.budget = newBudget(cap);
    this.callLog = log.child(
      {},
      { redact: { paths: ["token", "authorization", "apiKey"], censor: "[redacted]" } },
    );
  }
}

/** One call from arrival to receipt. */
interface Call {
  ep: Episode;
  seq: number;
  startedIso: string;
  t0: number;
  model: string;
  stream: boolean;
  price: ModelPrice | undefined;
  promptEstimate: number;
  choices: number;
  reserved: Pico;
  maxTokens: number | null;
  clamped: boolean;
  retries: number;
  tForward: number;
  ttfb: number | null;
  upstreamStatus: number | null;
  requestId: string | null;
  ac: CallAbort | null;
  /** Settled and receipted (exactly once). */
  settled: boolean;
}

interface Outcome {
  status: number;
  acc?: AnswerAccumulator;
  /** Bill on the provider's usage, or an estimate bounded by the reservation when it sent none. */
  billable: boolean;
  truncated: boolean;
  errorCode: string | null;
}

export class Meter {
  readonly priceTableHash: string;
  private readonly prices: Map<string, ModelPrice>;
  private readonly allowed: ReadonlySet<string>;
  private readonly modelsBody: Buffer;
  private readonly upstream: Upstream;
  private readonly log: Logger;
  private readonly retry: RetryPolicy;
  private readonly maxBodyBytes: number;
  private readonly queue: ReceiptQueue | null;
  private readonly sink: ReceiptSink | undefined;
  private readonly live = new Map<string, Episode>();
  /** Closed tokens, newest last, so close()/summary() stay answerable for a while. */
  private readonly recent = new Map<string, Episode>();
  private readonly records = new Map<string, EpisodeRecord>();
  private readonly servers = new Set<Server>();
  private readonly running = new Set<Promise<void>>();
  private stopped = false;

  constructor(opts: MeterOptions) {
    // Fails closed at start: an allowlisted model without a price is a configuration error.
    this.prices = compilePrices(opts.allowlist, opts.prices);
    this.allowed = new Set(opts.allowlist.models);
    this.priceTableHash = priceTableHash(opts.prices);
    this.modelsBody = Buffer.from(
      JSON.stringify({
        object: "list",
        data: opts.allowlist.models.map((id) => ({ id, object: "model", created: 0, owned_by: "engy" })),
      }),
    );
    this.log = (opts.log ?? silentLogger).child({ mod: "meter" });
    this.retry = { ...DEFAULT_RETRY, ...opts.retry };
    this.maxBodyBytes = opts.maxBodyBytes ?? 64 * 1024 * 1024;
    this.upstream = new Upstream({
      url: opts.upstreamUrl,
      apiKey: opts.apiKey,
      timeoutMs: opts.upstreamTimeoutMs ?? 300_000,
    });
    this.sink = opts.receipts;
    this.queue = opts.receipts
      ? new ReceiptQueue(opts.receipts, {
          flushMs: opts.receiptFlushMs,
          maxBatch: opts.receiptBatch,
          log: this.log,
        })
      : null;
  }

  // ---------------------------------------------------------------- episodes (harness API)

  /** A bearer token for one episode with its own cap: "ep-" + 24 random bytes, base64url. */
  mint(episodeId: string, capUsd: number): string {
    if (this.stopped) throw new InputError("meter_stopped", "the meter is stopped");
    if (!episodeId) throw new InputError("invalid_episode_id", "episode id must be non-empty");
    if (!Number.isFinite(capUsd) || capUsd < 0) throw new InputError("invalid_cap", `invalid cap: ${capUsd}`);
    const token = `ep-${randomBytes(24).toString("base64url")}`;
    let record = this.records.get(episodeId);
    if (record === undefined) {
      record = { episodeId, receipts: [], nextSeq: 1, liveTokens: 0 };
      this.records.set(episodeId, record);
    }
    record.liveTokens++;
    this.live.set(token, new Episode(record, usdToPico(capUsd), this.log.child({ episode: episodeId })));
    this.log.info({ episode: episodeId, cap_usd: capUsd }, "meter.episode.minted");
    return token;
  }

  /** Retire a token (later calls → 401), abort its calls in flight, and return its usage. */
  close(token: string): UsageSummary {
    const ep = this.live.get(token);
    if (ep === undefined) {
      const old = this.recent.get(token);
      if (old !== undefined) return this.summarize(old);
      throw new InputError("unknown_token", "unknown episode token");
    }
    this.live.delete(token);
    ep.closed = true;
    // Nothing may be billed to an episode after it ended; aborted calls settle on what they used.
    for (const ac of ep.inflight) ac.abort("episode_closed");
    ep.record.liveTokens--;
    this.recent.set(token, ep);
    this.evict();
    const summary = this.summarize(ep);
    ep.log.info({ ...summary, by_model: undefined }, "meter.episode.closed");
    return summary;
  }

  /** Live usage of a token (also answers for recently closed ones). */
  summary(token: string): UsageSummary {
    return this.summarize(this.episode(token));
  }

  /** For the episode watchdog: monotonic start, last finished forwarded call, count. */
  lastActivity(token: string): Activity {
    const ep = this.episode(token);
    const a: Activity = { startedAt: ep.startedAt, calls: ep.calls };
    if (ep.lastCompletedAt !== undefined) a.lastCompletedAt = ep.lastCompletedAt;
    return a;
  }

  /** The episode's receipts in arrival order (meter.json). Older episodes are read back from the sink. */
  receiptsFor(episodeId: string): Receipt[] {
    const rec = this.records.get(episodeId);
    if (rec !== undefined) return [...rec.receipts].sort((a, b) => a.seq - b.seq);
    if (this.sink?.listByEpisode) {
      this.queue?.flush();
      return this.sink.listByEpisode(episodeId);
    }
    return [];
  }

  /** {cap, spent, reserved, remaining} of a token, as GET /v1/budget reports it. */
  budget(token: string): Budget4 {
    return budgetView(this.episode(token).budget);
  }

  private episode(token: string): Episode {
    const ep = this.live.get(token) ?? this.recent.get(token);
    if (ep === undefined) throw new InputError("unknown_token", "unknown episode token");
    return ep;
  }

  private evict(): void {
    // A closed token's Episode holds its record (the receipts): keeping more closed tokens than
    // records would keep evicted receipts alive. Both are bounded by the same count.
    while (this.recent.size > RECENT_EPISODES) {
      const oldest = this.recent.keys().next().value as string;
      this.recent.delete(oldest);
    }
    let closedRecords = 0;
    for (const r of this.records.values()) if (r.liveTokens === 0) closedRecords++;
    for (const [id, r] of this.records) {
      if (closedRecords <= RECENT_EPISODES) break;
      if (r.liveTokens === 0) {
        this.records.delete(id);
        closedRecords--;
      }
    }
  }

  private summarize(ep: Episode): UsageSummary {
    const byModel: Record<string, ModelUsage> = {};
    for (const [m, a] of [...ep.byModel.entries()].sort((x, y) => (x[0] < y[0] ? -1 : 1))) {
      byModel[m] = {
        calls: a.calls,
        cost_usd: picoToUsd(a.cost),
        prompt_tokens: a.prompt,
        cached_tokens: a.cached,
        completion_tokens: a.completion,
      };
    }
    return {
      episode_id: ep.record.episodeId,
      cap_usd: picoToUsd(ep.budget.cap),
      cost_usd: picoToUsd(ep.budget.spent),
      reserved_usd: picoToUsd(ep.budget.reserved),
      calls: ep.calls,
      errors: ep.errors,
      refused_cap: ep.refusedCap,
      refused_model: ep.refusedModel,
      clamped: ep.clamped,
      overshoot_usd: picoToUsd(ep.budget.overshoot),
      closed_by_overshoot: ep.budget.closed,
      by_model: byModel,
      tokens: { ...ep.tokens },
    };
  }

  // ---------------------------------------------------------------- listeners

  /**
   * Serve on host:port (port 0: any). May be called several times: the loopback listener plus one
   * per episode on that episode's network gateway. A listener given `onlyToken` answers that one
   * token and treats every other as unknown, so an episode's network can only ever spend its own
   * budget, whatever token reaches it; without it, a listener accepts every live token.
   */
  async listen(host: string, port: number, onlyToken?: string): Promise<Listener> {
    if (this.stopped) throw new InputError("meter_stopped", "the meter is stopped");
    const server = createServer(
      { keepAliveTimeout: 30_000, headersTimeout: 60_000, requestTimeout: 0 },
      (req, res) => this.track(this.route(req, res, onlyToken)),
    );
    try {
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, host, () => {
          server.off("error", reject);
          resolve();
        });
      });
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

  private async closeServer(server: Server, graceMs = 2_000): Promise<void> {
    if (!this.servers.delete(server)) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    const t = setTimeout(() => server.closeAllConnections(), graceMs);
    t.unref();
    await closed;
    clearTimeout(t);
  }

  /** Close every listener, abort calls in flight, write the remaining receipts. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const ep of this.live.values()) for (const ac of ep.inflight) ac.abort("meter_stopped");
    await Promise.all([...this.servers].map((s) => this.closeServer(s, 500)));
    await Promise.allSettled([...this.running]);
    this.queue?.flush();
    await this.upstream.destroy();
    this.log.info(
      { receipts_written: this.queue?.written ?? 0, receipt_failures: this.queue?.failures ?? 0 },
      "meter.stopped",
    );
  }

  private track(p: Promise<void>): void {
    this.running.add(p);
    p.finally(() => this.running.delete(p));
  }

  // ---------------------------------------------------------------- HTTP

  private async route(req: IncomingMessage, res: ServerResponse, onlyToken?: string): Promise<void> {
    const tokenEpisode = (r: IncomingMessage) => this.tokenEpisode(r, onlyToken);
    try {
      const url = req.url ?? "/";
      const q = url.indexOf("?");
      const path = q < 0 ? url : url.slice(0, q);
      if (path === "/v1/chat/completions") {
        if (req.method !== "POST")
          return this.sendError(
            res,
            405,
            "method not allowed",
            "invalid_request_error",
            "method_not_allowed",
            null,
          );
        return await this.chat(req, res, onlyToken);
      }
      if (req.method !== "GET" && req.method !== "HEAD")
        return this.sendError(
          res,
          405,
          "method not allowed",
          "invalid_request_error",
          "method_not_allowed",
          tokenEpisode(req),
        );
      if (path === "/v1/models") return this.send(res, 200, this.modelsBody, tokenEpisode(req));
      if (path === "/health" || path === "/healthz")
        return this.send(
          res,
          200,
          Buffer.from(JSON.stringify({ ok: true, episodes: this.live.size })),
          tokenEpisode(req),
        );
      if (path === "/v1/budget") {
        const ep = tokenEpisode(req);
        if (ep === null)
          return this.sendError(res, 401, "unknown or closed episode token", "auth", "invalid_token", null);
        return this.send(res, 200, Buffer.from(JSON.stringify(budgetView(ep.budget))), ep);
      }
      return this.sendError(
        res,
        404,
        `no route ${path}`,
        "invalid_request_error",
        "not_found",
        tokenEpisode(req),
      );
    } catch (err) {
      // Our bug, not the policy's: answer once if we still can, and keep serving.
      this.log.error({ err, code: "meter_internal_error" }, "meter.internal_error");
      if (!res.headersSent)
        this.sendError(res, 500, "meter internal error", "server_error", "meter_internal_error", null);
      else res.destroy();
    }
  }

  /** The live episode of the request's bearer token (when the listener takes it), or null. */
  private tokenEpisode(req: IncomingMessage, onlyToken?: string): Episode | null {
    const auth = req.headers.authorization;
    if (auth === undefined || auth.length < 8 || !/^bearer /i.test(auth)) return null;
    const token = auth.slice(7).trim();
    if (onlyToken !== undefined && token !== onlyToken) return null;
    return this.live.get(token) ?? null;
  }

  private send(
    res: ServerResponse,
    status: number,
    body: Buffer,
    ep: Episode | null,
    type = "application/json",
  ): void {
    res.writeHead(status, {
      "content-type": type,
      "content-length": body.length,
      [REMAINING_HEADER]: ep === null ? "0.000000" : formatUsd6(remaining(ep.budget)),
    });
    res.end(body);
  }

  private sendError(
    res: ServerResponse,
    status: number,
    message: string,
    type: string,
    code: string,
    ep: Episode | null,
  ): void {
    this.send(res, status, Buffer.from(errorBody(message, type, code)), ep);
  }

  private async chat(req: IncomingMessage, res: ServerResponse, onlyToken?: string): Promise<void> {
    const t0 = performance.now();
    const ep = this.tokenEpisode(req, onlyToken);
    if (ep === null) {
      req.resume();
      return this.sendError(res, 401, "unknown or closed episode token", "auth", "invalid_token", null);
    }
    const call: Call = {
      ep,
      seq: 0,
      startedIso: new Date().toISOString(),
      t0,
      model: "",
      stream: false,
      price: undefined,
      promptEstimate: 0,
      choices: 1,
      reserved: 0n,
      maxTokens: null,
      clamped: false,
      retries: 0,
      tForward: 0,
      ttfb: null,
      upstreamStatus: null,
      requestId: null,
      ac: null,
      settled: false,
    };

    const raw = await readBody(req, this.maxBodyBytes);
    if (raw === "too_large") {
      call.seq = ep.record.nextSeq++;
      ep.errors++;
      this.refuse(
        call,
        res,
        413,
        `request body over ${this.maxBodyBytes} bytes`,
        "invalid_request_error",
        "body_too_large",
      );
      res.once("finish", () => req.destroy());
      return;
    }
    if (raw === "aborted") return;
    call.seq = ep.record.nextSeq++;
    let body: Record<string, unknown>;
    let knobs: ChatKnobs;
    const text = raw.toString("utf8");
    try {
      const parsed: unknown = JSON.parse(text);
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
        throw new Error("body: expected a JSON object");
      const r = parseChatKnobs(parsed as Record<string, unknown>);
      if (!r.ok) throw new Error(r.message);
      body = parsed as Record<string, unknown>;
      knobs = r.knobs;
    } catch (err) {
      ep.errors++;
      return this.refuse(
        call,
        res,
        400,
        `invalid request: ${(err as Error).message}`,
        "invalid_request_error",
        "invalid_request",
      );
    }
    call.model = knobs.model;
    call.stream = knobs.stream === true;

    if (!this.allowed.has(knobs.model)) {
      ep.refusedModel++;
      return this.refuse(
        call,
        res,
        400,
        `model '${knobs.model}' is not in the allowlist: ${[...this.allowed].join(", ")}`,
        "allowlist",
        "model_not_allowed",
      );
    }
    const price = this.prices.get(knobs.model)!;
    call.price = price;
    call.choices = knobs.n ?? 1;
    // The body is forwarded as the client wrote it, minus the knobs the meter rewrites (put in
    // front); the estimate is counted off the same text. A body the scan declines (a repeated
    // top-level key) is re-serialised from the parsed object instead.
    const scan = scanOrNull(text);
    let rest = "";
    if (scan !== null) call.promptEstimate = tokensFromChars(scan.billed);
    else {
      delete body.max_tokens;
      delete body.max_completion_tokens;
      delete body.stream_options;
      rest = JSON.stringify(body);
      call.promptEstimate = estimatePromptTokens(body, rest);
    }

    // Check and reserve in one synchronous step: no await between reading the room and booking it.
    const plan = planReservation(ep.budget, {
      price,
      promptTokens: call.promptEstimate,
      wantMaxTokens: knobs.max_tokens ?? knobs.max_completion_tokens ?? DEFAULT_MAX_TOKENS,
      choices: call.choices,
    });
    if (!plan.ok || ep.closed) {
      ep.refusedCap++;
      const why =
        plan.ok || plan.reason === "cap"
          ? `fewer than 64 completion tokens fit (remaining $${formatUsd6(remaining(ep.budget))})`
          : "the episode was closed after a call cost more than its reservation";
      return this.refuse(
        call,
        res,
        402,
        `episode safety cap $${picoToUsd(ep.budget.cap)}: ${why}`,
        "cap",
        plan.ok || plan.reason === "cap" ? "cap_exceeded" : "episode_closed_overshoot",
      );
    }
    ep.budget = reserve(ep.budget, plan.reserved);
    call.reserved = plan.reserved;
    call.maxTokens = plan.maxTokens;
    call.clamped = plan.clamped;
    if (plan.clamped) ep.clamped++;

    const clientWantsUsage = knobs.stream_options?.include_usage === true;
    let head = `"max_tokens":${plan.maxTokens}`;
    if (call.stream)
      head += `,"stream_options":${JSON.stringify({ ...(knobs.stream_options ?? {}), include_usage: true })}`;
    else if (!isNullish(knobs.stream_options))
      head += `,"stream_options":${JSON.stringify(knobs.stream_options)}`;
    const forwardBody =
      scan !== null
        ? spliceMembers(text, scan.members, REWRITTEN_KNOBS, head)
        : rest === "{}"
          ? `{${head}}`
          : `{${head},${rest.slice(1)}`;

    const ac = new CallAbort();
    call.ac = ac;
    ep.inflight.add(ac);
    // Not removed afterwards (removal costs more than the check): once the call is settled it is inert.
    res.once("close", () => {
      if (!res.writableFinished && !call.settled) ac.abort("client_disconnected");
    });
    try {
      const outcome = await this.forward(call, forwardBody, res, !clientWantsUsage);
      this.finish(call, outcome);
    } catch (err) {
      // Our bug: release the reservation before the router answers 500.
      this.finish(call, {
        status: 500,
        billable: false,
        truncated: false,
        errorCode: "meter_internal_error",
      });
      throw err;
    } finally {
      ep.inflight.delete(ac);
    }
  }

  /** A call refused before forwarding: error response and receipt, nothing billed. */
  private refuse(
    call: Call,
    res: ServerResponse,
    status: number,
    message: string,
    type: string,
    code: string,
  ): void {
    this.sendError(res, status, message, type, code, call.ep);
    this.record(call, { status, billable: false, truncated: false, errorCode: code }, 0n, null, false);
  }

  private async forward(
    call: Call,
    body: string,
    res: ServerResponse,
    stripUsage: boolean,
  ): Promise<Outcome> {
    const ac = call.ac!;
    call.tForward = performance.now();
    for (;;) {
      let up: UpstreamResponse;
      try {
        up = await this.upstream.chatCompletions(body, ac);
      } catch (err) {
        const kind = ac.aborted ? "aborted" : classifyFailure(err);
        if (kind === "aborted") return this.aborted(call, res, undefined);
        if (kind === "connect") {
          const wait = retryDelayMs(this.retry, call.retries, undefined, Math.random());
          if (wait !== null && (await this.backoff(call, wait))) continue;
          if (ac.aborted) return this.aborted(call, res, undefined);
        }
        const timeout = kind === "timeout";
        const code = timeout ? "upstream_timeout" : "upstream_unreachable";
        return this.failBeforeBytes(
          call,
          res,
          { status: timeout ? 504 : 502, billable: false, truncated: false, errorCode: code },
          timeout ? "the model provider did not answer in time" : "the model provider is unreachable",
        );
      }
      call.upstreamStatus = up.statusCode;
      const rid = up.headers["x-engy-request-id"];
      if (typeof rid === "string" && rid) call.requestId = rid;

      if (up.statusCode === 429 || up.statusCode === 503) {
        const wait = retryDelayMs(
          this.retry,
          call.retries,
          parseRetryAfter(headerString(up.headers["retry-after"]), Date.now()),
          Math.random(),
        );
        if (wait !== null) {
          await up.body.dump().catch(() => undefined);
          if (await this.backoff(call, wait)) continue;
          return this.aborted(call, res, undefined);
        }
      }
      if (up.statusCode !== 200) return this.passError(call, up, res);
      const ctype = headerString(up.headers["content-type"]) ?? "";
      if (ctype.startsWith("text/event-stream")) {
        const r = await this.relayStream(call, up, res, stripUsage);
        if (r === "retry") continue;
        return r;
      }
      return this.relayBody(call, up, res);
    }
  }

  /** Wait before a retry; false when the call was aborted meanwhile. */
  private async backoff(call: Call, ms: number): Promise<boolean> {
    call.retries++;
    call.ep.log.debug(
      { seq: call.seq, retry: call.retries, wait_ms: ms, status: call.upstreamStatus },
      "meter.retry",
    );
    return wait(ms, call.ac!);
  }

  private aborted(call: Call, res: ServerResponse, acc: AnswerAccumulator | undefined): Outcome {
    const reason = call.ac!.reason ?? "client_disconnected";
    const billable = acc !== undefined;
    if (!res.headersSent && !res.destroyed && reason !== "client_disconnected")
      return this.failBeforeBytes(
        call,
        res,
        { status: 503, acc, billable, truncated: true, errorCode: reason },
        `call aborted: ${reason}`,
      );
    if (!res.writableEnded) res.destroy();
    // 499: the client closed the request (nginx's convention); a started stream keeps its 200.
    return {
      status: res.headersSent ? res.statusCode : 499,
      acc,
      billable,
      truncated: true,
      errorCode: reason,
    };
  }

  /** A non-200 answer after retries: passed through OpenAI-shaped, nothing billed. */
  private async passError(call: Call, up: UpstreamResponse, res: ServerResponse): Promise<Outcome> {
    let buf: Buffer;
    try {
      buf = await readLimited(up.body, MAX_ERROR_BODY);
    } catch {
      buf = Buffer.alloc(0);
    }
    let status = up.statusCode;
    let out = buf;
    let code = `upstream_${status}`;
    let parsed: unknown;
    try {
      parsed = JSON.parse(buf.toString("utf8"));
    } catch {
      parsed = undefined;
    }
    const info =
      typeof parsed === "object" && parsed !== null ? errorInfo(parsed as Record<string, unknown>) : null;
    if (status === 401 || status === 403) {
      // The operator's key was refused: an infra fault, not the policy's token (which would be 401 here).
      status = 502;
      code = "upstream_auth_failed";
      out = Buffer.from(
        errorBody("the model provider refused the validator's credentials", "upstream_error", code),
      );
    } else if (info === null) {
      const text = buf.toString("utf8").slice(0, 300);
      out = Buffer.from(errorBody(text || `upstream status ${status}`, "upstream_error", code));
    }
    if (status < 400) status = 502;
    const outcome: Outcome = { status, billable: false, truncated: false, errorCode: code };
    this.finish(call, outcome);
    this.send(res, status, out, call.ep);
    return outcome;
  }

  /** Settle first (so the budget header is current), then answer with an OpenAI-shaped error. */
  private failBeforeBytes(call: Call, res: ServerResponse, o: Outcome, message: string): Outcome {
    this.finish(call, o);
    this.sendError(res, o.status, message, "upstream_error", o.errorCode ?? "upstream_error", call.ep);
    return o;
  }

  /** Non-stream answer: read whole, settle, then send the upstream bytes unchanged with the settled budget. */
  private async relayBody(call: Call, up: UpstreamResponse, res: ServerResponse): Promise<Outcome> {
    const acc = new AnswerAccumulator();
    let buf: Buffer;
    try {
      buf = await readAll(up.body, (t) => {
        call.ttfb ??= t - call.tForward;
      });
    } catch (err) {
      if (call.ac!.aborted) return this.aborted(call, res, acc);
      const code = classifyFailure(err) === "timeout" ? "upstream_timeout" : "upstream_cut";
      return this.failBeforeBytes(
        call,
        res,
        { status: 502, acc, billable: true, truncated: true, errorCode: code },
        "the model provider's answer was cut",
      );
    }
    try {
      acc.onBody(JSON.parse(buf.toString("utf8")));
    } catch {
      acc.unparsable++;
    }
    const outcome: Outcome = {
      status: 200,
      acc,
      billable: true,
      truncated: false,
      errorCode: acc.error
        ? "upstream_error_object"
        : acc.usage
          ? null
          : acc.badUsage
            ? "bad_usage"
            : "no_usage",
    };
    // Settle first so the header reflects this call's real cost; the receipt (fingerprints, the
    // durable row, the log line) is written once the bytes are on their way, in the same tick.
    const b = this.book(call, outcome);
    const headers: Record<string, string | number> = {
      "content-type": headerString(up.headers["content-type"]) ?? "application/json",
      "content-length": buf.length,
      [REMAINING_HEADER]: formatUsd6(remaining(call.ep.budget)),
    };
    if (call.requestId) headers["x-engy-request-id"] = call.requestId;
    try {
      res.writeHead(200, headers);
      res.end(buf);
    } finally {
      // Always: it marks the call settled, so nothing can book it a second time.
      this.record(call, outcome, b.actual, b.usage, b.estimated);
    }
    return outcome;
  }

  /**
   * Stream answer: bytes go to the client as they arrive. When the client did not ask for usage, the
   * injected usage-only event is held back (events are forwarded whole in that mode); otherwise every
   * chunk is written before it is parsed. A retryable error as the very first event is retried.
   */
  private async relayStream(
    call: Call,
    up: UpstreamResponse,
    res: ServerResponse,
    stripUsage: boolean,
  ): Promise<Outcome | "retry"> {
    const acc = new AnswerAccumulator();
    const splitter = new SseSplitter();
    const abort = call.ac!;
    const body = up.body;
    let started = false;
    let bug: unknown;
    const deferred: string[] = [];
    // Chunks are handled in 'data' events (an async iterator costs more per call than the rest of
    // the relay); a client socket that is full pauses the upstream until it drains.
    const ending = await new Promise<"end" | "cut" | "retry">((resolve) => {
      let done = false;
      const finish = (how: "end" | "cut" | "retry") => {
        if (done) return;
        done = true;
        body.off("data", onData);
        body.off("end", onEnd);
        body.off("error", onCut);
        body.off("close", onCut);
        abort.off("abort", onCut);
        resolve(how);
      };
      const onEnd = () => finish("end");
      const onCut = () => finish("cut");
      const onData = (chunk: Buffer) => {
        if (done) return;
        try {
          const events = splitter.push(chunk);
          if (!started) {
            call.ttfb ??= performance.now() - call.tForward;
            if (this.firstEventRetryable(call, events)) return finish("retry");
            started = true;
            const headers: Record<string, string> = {
              "content-type": headerString(up.headers["content-type"]) ?? "text/event-stream",
              "cache-control": "no-cache",
              [REMAINING_HEADER]: formatUsd6(remaining(call.ep.budget)),
            };
            if (call.requestId) headers["x-engy-request-id"] = call.requestId;
            res.writeHead(200, headers);
          }
          let ok: boolean;
          if (!stripUsage) {
            ok = res.write(chunk);
            for (const ev of events) if (ev.data !== null) acc.onEvent(ev.data);
          } else {
            try {
              ok = this.writeEvents(res, chunk, splitter.exact, events, deferred);
            } finally {
              // After the write: the client's bytes do not wait for the answer's bookkeeping.
              for (const d of deferred) acc.onEvent(d);
              deferred.length = 0;
            }
          }
          if (!ok) {
            body.pause();
            drained(res, abort).then(() => body.resume());
          }
        } catch (err) {
          bug = err;
          finish("cut");
        }
      };
      body.on("data", onData);
      body.once("end", onEnd);
      body.once("error", onCut);
      body.once("close", onCut);
      abort.once("abort", onCut);
    });
    if (bug !== undefined) {
      body.destroy();
      if (!res.headersSent) throw bug;
      res.destroy();
      throw bug;
    }
    if (ending === "retry") {
      body.destroy();
      if (await this.backoff(call, retryDelayMs(this.retry, call.retries, undefined, Math.random()) ?? 0))
        return "retry";
      return this.aborted(call, res, undefined);
    }
    if (ending === "cut") {
      body.destroy();
      this.tail(splitter, acc, null, false);
      if (abort.aborted) return this.aborted(call, res, acc);
      // The upstream cut the stream (socket closed, body timeout): pass the cut on, settle on what is known.
      if (!started)
        return this.failBeforeBytes(
          call,
          res,
          { status: 502, acc, billable: true, truncated: true, errorCode: "upstream_cut" },
          "the model provider's stream was cut before any token",
        );
      res.destroy();
      return { status: 200, acc, billable: true, truncated: true, errorCode: "upstream_cut" };
    }
    if (!started)
      return this.failBeforeBytes(
        call,
        res,
        { status: 502, acc, billable: true, truncated: true, errorCode: "upstream_empty" },
        "the model provider sent an empty stream",
      );
    this.tail(splitter, acc, res, stripUsage);
    res.end();
    const truncated = !acc.sawDone && acc.usage === undefined;
    return {
      status: 200,
      acc,
      billable: true,
      truncated,
      errorCode: acc.error
        ? "upstream_stream_error"
        : acc.usage
          ? null
          : acc.badUsage
            ? "bad_usage"
            : truncated
              ? "upstream_cut"
              : "no_usage",
    };
  }

  /** Strip mode: forward complete events, holding back only the usage-only one. */
  private writeEvents(
    res: ServerResponse,
    chunk: Buffer,
    exact: boolean,
    events: SseEvent[],
    deferred: string[],
  ): boolean {
    if (events.length === 0) return true;
    const out: Buffer[] = [];
    for (const ev of events) {
      if (ev.data === null) out.push(ev.raw);
      else {
        // A chunk naming usage may be the injected one the client did not ask for: that one event
        // is parsed now to decide; every event reaches the accumulator, in order, after the write.
        deferred.push(ev.data);
        if (!ev.data.includes('"usage"') || !isUsageOnlyEvent(ev.data)) out.push(ev.raw);
      }
    }
    if (out.length === 0) return true;
    // Nothing held back from a chunk that was whole events: forward the chunk as it came.
    if (exact && out.length === events.length) return res.write(chunk);
    return res.write(out.length === 1 ? out[0]! : Buffer.concat(out));
  }

  /** The unterminated last event: parse it, and forward it when the client is still there. */
  private tail(
    splitter: SseSplitter,
    acc: AnswerAccumulator,
    res: ServerResponse | null,
    stripUsage: boolean,
  ): void {
    const last = splitter.end();
    if (last === null) return;
    const usageOnly = last.data !== null && acc.onEvent(last.data);
    if (res !== null && stripUsage && !usageOnly) res.write(last.raw);
  }

  private firstEventRetryable(call: Call, events: SseEvent[]): boolean {
    const first = events.find((e) => e.data !== null);
    if (first === undefined || !first.data!.includes('"error"')) return false;
    let obj: unknown;
    try {
      obj = JSON.parse(first.data!);
    } catch {
      return false;
    }
    if (typeof obj !== "object" || obj === null) return false;
    const info = errorInfo(obj as Record<string, unknown>);
    return info?.retryable === true && call.retries < this.retry.maxRetries;
  }

  /** Settle a forwarded call and write its receipt. */
  private finish(call: Call, o: Outcome): void {
    if (call.settled) return;
    const b = this.book(call, o);
    this.record(call, o, b.actual, b.usage, b.estimated);
  }

  /**
   * Settle a call's cost against its episode's budget and counters (what the response's budget
   * header must already reflect). The receipt is written by record(), which may follow the response.
   */
  private book(call: Call, o: Outcome): { actual: Pico; usage: Usage | null; estimated: boolean } {
    const ep = call.ep;
    const price = call.price!;
    const acc = o.acc;
    let usage: Usage | undefined;
    let estimated = false;
    let actual = 0n;
    if (o.billable && acc?.usage) {
      usage = acc.usage;
      actual = costOf(price, usage);
    } else if (o.billable && acc !== undefined) {
      // No usage from the provider: the prompt at its estimate and the text seen so far, never more
      // than was reserved (an estimate must not close the episode as an overshoot would).
      const gen = acc.generatedChars();
      const completion = Math.min(
        estimateTextTokens(gen.ascii, gen.nonAscii),
        (call.maxTokens ?? 0) * call.choices,
      );
      usage = { promptTokens: call.promptEstimate, cachedTokens: 0, completionTokens: completion };
      estimated = true;
      const est = costOf(price, usage);
      actual = minPico(est, call.reserved);
    }
    const s = settle(ep.budget, call.reserved, actual);
    ep.budget = s.budget;
    ep.calls++;
    ep.lastCompletedAt = performance.now();
    if (o.status !== 200 || o.errorCode !== null) ep.errors++;
    if (usage !== undefined) {
      ep.tokens.prompt += usage.promptTokens;
      ep.tokens.cached += Math.min(usage.cachedTokens, usage.promptTokens);
      ep.tokens.completion += usage.completionTokens;
    }
    let agg = ep.byModel.get(call.model);
    if (agg === undefined) {
      agg = { calls: 0, cost: 0n, prompt: 0, cached: 0, completion: 0 };
      ep.byModel.set(call.model, agg);
    }
    agg.calls++;
    agg.cost += actual;
    if (usage !== undefined) {
      agg.prompt += usage.promptTokens;
      agg.cached += Math.min(usage.cachedTokens, usage.promptTokens);
      agg.completion += usage.completionTokens;
    }
    if (s.overshoot > 0n)
      ep.log.warn(
        {
          seq: call.seq,
          model: call.model,
          overshoot_usd: picoToUsd(s.overshoot),
          reserved_usd: picoToUsd(call.reserved),
        },
        "meter.overshoot",
      );
    if (acc !== undefined && call.requestId === null)
      call.requestId = acc.engyRequestId ?? acc.responseId ?? null;
    return { actual, usage: usage ?? null, estimated };
  }

  private record(call: Call, o: Outcome, actual: Pico, usage: Usage | null, estimated: boolean): void {
    call.settled = true;
    const fp = o.acc?.fingerprint();
    const r: Receipt = {
      episode_id: call.ep.record.episodeId,
      seq: call.seq,
      started_at: call.startedIso,
      model: call.model,
      status: o.status,
      upstream_status: call.upstreamStatus,
      stream: call.stream,
      prompt_tokens: usage?.promptTokens ?? 0,
      cached_tokens: usage ? Math.min(usage.cachedTokens, usage.promptTokens) : 0,
      completion_tokens: usage?.completionTokens ?? 0,
      usd: picoToUsd(actual),
      usd_pico: actual.toString(),
      reserved_usd: picoToUsd(call.reserved),
      reserved_pico: call.reserved.toString(),
      max_tokens: call.maxTokens,
      clamped: call.clamped,
      retries: call.retries,
      ttfb_ms: call.ttfb === null ? null : round3(call.ttfb),
      duration_ms: round3(performance.now() - call.t0),
      request_id: call.requestId,
      content_sha: fp?.contentSha ?? null,
      tool_sha: fp?.toolSha ?? null,
      tool_calls: fp?.toolCalls ?? 0,
      finish_reason: o.acc?.finishReason ?? null,
      truncated: o.truncated,
      usage_estimated: estimated,
      error_code: o.errorCode,
    };
    call.ep.record.receipts.push(r);
    this.queue?.push(r);
    // Every call is a receipt (SQLite, meter.json); the log carries the ones worth an operator's eye
    // at info (refused, failed, clamped, retried, cut) and plain successes only at debug.
    const notable = r.status !== 200 || r.error_code !== null || r.clamped || r.retries > 0 || r.truncated;
    const log = call.ep.callLog;
    if (notable || log.isLevelEnabled("debug"))
      log[notable ? "info" : "debug"](
        {
          seq: r.seq,
          model: r.model,
          status: r.status,
          stream: r.stream,
          usd: r.usd,
          clamped: r.clamped,
          retries: r.retries,
          ttfb_ms: r.ttfb_ms,
          ms: r.duration_ms,
          code: r.error_code ?? undefined,
        },
        "meter.call",
      );
  }
}

function budgetView(b: Budget): Budget4 {
  return {
    cap_usd: picoToUsd(b.cap),
    spent_usd: picoToUsd(b.spent),
    reserved_usd: picoToUsd(b.reserved),
    remaining_usd: picoToUsd(remaining(b)),
  };
}

function minPico(a: Pico, b: Pico): Pico {
  return a < b ? a : b;
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}
