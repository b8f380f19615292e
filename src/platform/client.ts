/**
 * The TrajectoryRL platform API client (v6 winner-challenger protocol). Thin: builds signed
 * requests, sends them through boundedRequest, parses every response with zod, and maps HTTP
 * outcomes onto typed results. Endpoints, shapes and sources: src/platform/README.md.
 */
import { type Dispatcher, FormData } from "undici";
import { InfraError, InputError, isAbortError, ValidatorError } from "../errors.js";
import { type Logger, silentLogger } from "../log.js";
import { VERSION } from "../version.js";
import { BodyTooLargeError, type BoundedResponse, boundedRequest } from "./http.js";
import {
  COLD_START,
  describeZodError,
  type EpochCurrent,
  epochCurrentSchema,
  errorText,
  type HeartbeatInfo,
  heartbeatInfoSchema,
  heartbeatReceiptSchema,
  type LogReceipt,
  logReceiptSchema,
  type ScenarioProgressEvent,
  type ScoreReceipt,
  type ScoreVerdict,
  scenarioProgressEventSchema,
  scoreReceiptSchema,
  scoreVerdictSchema,
  type WinnerCurrent,
  winnerCurrentSchema,
} from "./schemas.js";
import { PREFIX, type Signer, signFields } from "./signing.js";

/** Per-endpoint deadlines, ms. Defaults are the Python client's (trajrl_api.py). */
export interface PlatformTimeouts {
  read: number;
  score: number;
  progress: number;
  heartbeat: number;
  logs: number;
}
export const DEFAULT_TIMEOUTS: PlatformTimeouts = {
  read: 15_000,
  score: 30_000,
  progress: 10_000,
  heartbeat: 10_000,
  logs: 30_000,
};

/** The server rejects archives over 10 MB (docs/API.md; the Python daemon uses 10 * 1024 * 1024). */
export const MAX_LOG_ARCHIVE_BYTES = 10 * 1024 * 1024;
/** Our cap on any platform JSON response (winner/current with every vote is a few KiB). */
const MAX_RESPONSE_BYTES = 4 * 1024 * 1024;
/** Scenario progress is decorative: at most this many in flight, the rest are dropped. */
const DEFAULT_PROGRESS_IN_FLIGHT = 4;

export interface PlatformClientOptions {
  /** e.g. https://trajrl.com (config.platform.baseUrl); no trailing slash needed. */
  baseUrl: string;
  signer: Signer;
  log?: Logger;
  /** Sent as `version` in score, progress and heartbeat bodies. */
  version?: string;
  /** Wall clock in ms for signature timestamps (the server checks ±5 min). Injectable for tests. */
  now?: () => number;
  timeouts?: Partial<PlatformTimeouts>;
  dispatcher?: Dispatcher;
  progressInFlight?: number;
}

export interface CallOptions {
  signal?: AbortSignal;
}

/** How a score POST ended. Only `retryable` is worth sending again. */
export type ScoreOutcome =
  | { kind: "delivered"; status: number; receipt: ScoreReceipt | null }
  /** 409: this validator already scored this epoch; counts as delivered. */
  | { kind: "duplicate"; status: 409; message: string }
  /** 409: the epoch is closed; nothing more to do for it. */
  | { kind: "finalized"; status: 409; message: string }
  /** Timeout, network failure, 408/425/429, 5xx, or a 2xx other than 200. */
  | { kind: "retryable"; status: number | null; code: string; message: string }
  /** Any other 4xx (bad body, bad signature, not a validator, unknown epoch): sending again will not help. */
  | { kind: "rejected"; status: number; code: string; message: string };

/** Result of a fire-and-forget POST (heartbeat, logs, progress): never throws. */
export type PostResult<R = undefined> =
  | { ok: true; status: number; receipt: R | null }
  | { ok: false; status: number | null; code: string; message: string; retryable: boolean };

export interface EvalLogUpload {
  /** Eval cycle id, `YYYYMMDD_HHMMSS` (+ suffix) as the Python daemon forms it. */
  eval_id: string;
  miner_hotkey: string;
  miner_uid: number;
  block_height: number;
  pack_hash: string;
  /** The challenge epoch id (the Python v6 daemon sends it as epoch_number). */
  epoch_number?: number;
  spec_number?: number;
  /** .tar.gz bytes, ≤ 10 MiB. */
  archive: Uint8Array;
}

export interface CycleLogUpload {
  eval_id: string;
  block_height: number;
  epoch_number?: number;
  spec_number?: number;
  archive: Uint8Array;
}

/** 409 texts: the documented ones are "epoch is finalized" and "duplicate". */
export function classifyConflict(text: string): "finalized" | "duplicate" | "conflict" {
  if (/finali[sz]ed|closed|not in[ _-]?progress|no longer/i.test(text)) return "finalized";
  if (/duplicate|already/i.test(text)) return "duplicate";
  return "conflict";
}

const isRetryableStatus = (status: number) =>
  status === 408 || status === 425 || status === 429 || status >= 500;

export class PlatformClient {
  readonly baseUrl: string;
  private readonly signer: Signer;
  private readonly log: Logger;
  private readonly version: string;
  private readonly now: () => number;
  private readonly timeouts: PlatformTimeouts;
  private readonly dispatcher: Dispatcher | undefined;
  private readonly progressLimit: number;
  private progressInFlight = 0;

  constructor(opts: PlatformClientOptions) {
    let base: URL;
    try {
      base = new URL(opts.baseUrl);
    } catch {
      throw new InputError("invalid_platform_url", `not a URL: ${opts.baseUrl}`);
    }
    if (base.protocol !== "https:" && base.protocol !== "http:") {
      throw new InputError("invalid_platform_url", `platform URL must be http(s): ${opts.baseUrl}`);
    }
    this.baseUrl = opts.baseUrl.replace(/\/+$/, "");
    this.signer = opts.signer;
    this.log = (opts.log ?? silentLogger).child({ component: "platform" });
    this.version = opts.version ?? VERSION;
    this.now = opts.now ?? Date.now;
    this.timeouts = { ...DEFAULT_TIMEOUTS, ...opts.timeouts };
    this.dispatcher = opts.dispatcher;
    this.progressLimit = opts.progressInFlight ?? DEFAULT_PROGRESS_IN_FLIGHT;
  }

  get hotkey(): string {
    return this.signer.ss58;
  }

  /**
   * GET /api/v2/winner/current: the seated winner, the last finalized epoch and its votes.
   * Public, unsigned. 404 is a cold start. Throws ValidatorError on transport failure, a non-2xx
   * status (platform_http_error) or a body that does not match the schema (platform_malformed_response).
   */
  async getWinnerCurrent(opts: CallOptions = {}): Promise<WinnerCurrent> {
    const endpoint = "winner.current";
    const res = await this.send(endpoint, {
      method: "GET",
      url: `${this.baseUrl}/api/v2/winner/current`,
      timeoutMs: this.timeouts.read,
      signal: opts.signal,
    });
    if (res.status === 404) return { ...COLD_START, submissions: [] };
    this.expectOk(endpoint, res);
    return this.parse(endpoint, res, winnerCurrentSchema);
  }

  /**
   * Signed GET /api/v2/epoch/current (query `hotkey, timestamp, signature` unlocks the pack URL).
   * null when no epoch is in progress (404, or a 200 whose `epoch` is null). Throws like getWinnerCurrent.
   */
  async getEpochCurrent(opts: CallOptions = {}): Promise<EpochCurrent | null> {
    const endpoint = "epoch.current";
    const signed = signFields(this.signer, PREFIX.epochCurrent, this.now());
    const q = new URLSearchParams({
      hotkey: signed.hotkey,
      timestamp: String(signed.timestamp),
      signature: signed.signature,
    });
    const res = await this.send(endpoint, {
      method: "GET",
      url: `${this.baseUrl}/api/v2/epoch/current?${q.toString()}`,
      timeoutMs: this.timeouts.read,
      signal: opts.signal,
    });
    if (res.status === 404) return null;
    this.expectOk(endpoint, res);
    const parsed = this.parse(endpoint, res, epochCurrentSchema);
    return parsed.epoch === null ? null : parsed;
  }

  /**
   * POST /api/v2/epoch/{id}/score, signed `trajectoryrl-challenge-score:{hotkey}:{ts}:{id}`. Signed
   * afresh on every call (the server allows ±5 min), so an outbox retry hours later still verifies.
   * Never throws for an HTTP or network outcome; throws InputError for an invalid verdict and
   * InfraError("aborted") when the caller's signal fires.
   */
  async postScore(
    challengeEpochId: number,
    verdict: ScoreVerdict,
    opts: CallOptions = {},
  ): Promise<ScoreOutcome> {
    const endpoint = "epoch.score";
    assertEpochId(challengeEpochId);
    const checked = scoreVerdictSchema.safeParse(verdict);
    if (!checked.success) {
      throw new InputError("invalid_verdict", `score verdict is invalid: ${describeZodError(checked.error)}`);
    }
    const signed = signFields(this.signer, PREFIX.challengeScore, this.now(), challengeEpochId);
    const body = buildScoreBody(checked.data, signed, this.version);
    let res: BoundedResponse;
    try {
      res = await this.send(endpoint, {
        method: "POST",
        url: `${this.baseUrl}/api/v2/epoch/${challengeEpochId}/score`,
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
        timeoutMs: this.timeouts.score,
        signal: opts.signal,
      });
    } catch (err) {
      const e = err as ValidatorError;
      if (e.code === "aborted") throw e;
      return { kind: "retryable", status: null, code: e.code, message: e.message };
    }
    const outcome = scoreOutcomeOf(res);
    if (outcome.kind === "delivered") {
      const receipt = scoreReceiptSchema.safeParse(safeJson(res.body));
      if (!receipt.success) {
        // HTTP 200 is the server's acceptance (the Python client checks nothing else); keep it,
        // but say the body was not what the docs describe.
        this.log.warn(
          { endpoint, epoch: challengeEpochId, reason: describeZodError(receipt.error) },
          "platform.malformed_response",
        );
      }
      const result = { ...outcome, receipt: receipt.success ? receipt.data : null };
      this.log.info({ endpoint, epoch: challengeEpochId, status: res.status }, "platform.score.delivered");
      return result;
    }
    this.log.warn(
      {
        endpoint,
        epoch: challengeEpochId,
        status: res.status,
        outcome: outcome.kind,
        error: errorText(res.body.toString("utf8")),
      },
      "platform.score.not_delivered",
    );
    return outcome;
  }

  /**
   * POST /api/v2/epoch/{id}/scenario_progress, signed with the epoch id and scenario name. Decorative
   * (the live /challenge page): bounded in flight and in time, never throws, 404 logged at debug.
   */
  async postScenarioProgress(
    challengeEpochId: number,
    event: ScenarioProgressEvent,
    opts: CallOptions = {},
  ): Promise<PostResult> {
    const endpoint = "epoch.scenario_progress";
    if (this.progressInFlight >= this.progressLimit) {
      this.log.debug(
        { endpoint, epoch: challengeEpochId, scenario: event.scenario_name },
        "platform.progress.dropped",
      );
      return {
        ok: false,
        status: null,
        code: "platform_progress_dropped",
        message: "too many in flight",
        retryable: false,
      };
    }
    this.progressInFlight++;
    try {
      assertEpochId(challengeEpochId);
      const ev = scenarioProgressEventSchema.safeParse(event);
      if (!ev.success) {
        return notOk(null, "invalid_progress_event", describeZodError(ev.error), false);
      }
      const signed = signFields(
        this.signer,
        PREFIX.scenarioProgress,
        this.now(),
        challengeEpochId,
        ev.data.scenario_name,
      );
      const body = dropUndefined({
        validator_hotkey: signed.hotkey,
        ...ev.data,
        quality: ev.data.quality ?? 0,
        timestamp: signed.timestamp,
        signature: signed.signature,
        version: this.version,
      });
      return await this.firePost(endpoint, {
        url: `${this.baseUrl}/api/v2/epoch/${challengeEpochId}/scenario_progress`,
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
        timeoutMs: this.timeouts.progress,
        signal: opts.signal,
        quiet404: true,
      });
    } catch (err) {
      return failedPost(err);
    } finally {
      this.progressInFlight--;
    }
  }

  /** POST /api/v2/validators/heartbeat, signed `trajectoryrl-heartbeat:{hotkey}:{ts}`. Never throws. */
  async postHeartbeat(info: HeartbeatInfo = {}, opts: CallOptions = {}): Promise<PostResult> {
    const endpoint = "validators.heartbeat";
    try {
      const parsed = heartbeatInfoSchema.safeParse(info);
      if (!parsed.success) return notOk(null, "invalid_heartbeat", describeZodError(parsed.error), false);
      const signed = signFields(this.signer, PREFIX.heartbeat, this.now());
      const body = dropUndefined({
        hotkey: signed.hotkey,
        version: this.version,
        timestamp: signed.timestamp,
        signature: signed.signature,
        ...parsed.data,
      });
      const r = await this.firePost(endpoint, {
        url: `${this.baseUrl}/api/v2/validators/heartbeat`,
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
        timeoutMs: this.timeouts.heartbeat,
        signal: opts.signal,
      });
      if (r.ok && !heartbeatReceiptSchema.safeParse(safeJsonText(r)).success) {
        this.log.warn({ endpoint }, "platform.malformed_response");
      }
      return r.ok ? { ok: true, status: r.status, receipt: null } : r;
    } catch (err) {
      return failedPost(err);
    }
  }

  /** POST /api/validators/logs/upload (multipart), signed `trajectoryrl-logs:{hotkey}:{ts}`. Never throws. */
  uploadLogs(upload: EvalLogUpload, opts: CallOptions = {}): Promise<PostResult<LogReceipt>> {
    const fields: Record<string, string> = {
      eval_id: upload.eval_id,
      miner_hotkey: upload.miner_hotkey,
      miner_uid: String(upload.miner_uid),
      block_height: String(upload.block_height),
      pack_hash: upload.pack_hash,
    };
    return this.upload("logs.upload", "/api/validators/logs/upload", "logs.tar.gz", fields, upload, opts);
  }

  /** POST /api/validators/logs/cycle (multipart): the validator log of one eval cycle. Never throws. */
  uploadCycleLogs(upload: CycleLogUpload, opts: CallOptions = {}): Promise<PostResult<LogReceipt>> {
    const fields: Record<string, string> = {
      eval_id: upload.eval_id,
      block_height: String(upload.block_height),
    };
    return this.upload("logs.cycle", "/api/validators/logs/cycle", "cycle.tar.gz", fields, upload, opts);
  }

  // -------------------------------------------------------------------------------------------

  private async upload(
    endpoint: string,
    path: string,
    filename: string,
    fields: Record<string, string>,
    upload: { archive: Uint8Array; epoch_number?: number; spec_number?: number },
    opts: CallOptions,
  ): Promise<PostResult<LogReceipt>> {
    try {
      if (upload.archive.byteLength > MAX_LOG_ARCHIVE_BYTES) {
        return notOk(
          null,
          "log_archive_too_large",
          `log archive is ${upload.archive.byteLength} bytes, limit ${MAX_LOG_ARCHIVE_BYTES}`,
          false,
        );
      }
      const signed = signFields(this.signer, PREFIX.logs, this.now());
      const form = new FormData();
      form.set("validator_hotkey", signed.hotkey);
      for (const [k, v] of Object.entries(fields)) form.set(k, v);
      if (upload.epoch_number !== undefined) form.set("epoch_number", String(upload.epoch_number));
      if (upload.spec_number !== undefined) form.set("spec_number", String(upload.spec_number));
      form.set("timestamp", String(signed.timestamp));
      form.set("signature", signed.signature);
      form.set("log_archive", new Blob([upload.archive], { type: "application/gzip" }), filename);
      const r = await this.firePost(endpoint, {
        url: `${this.baseUrl}${path}`,
        body: form,
        timeoutMs: this.timeouts.logs,
        signal: opts.signal,
      });
      if (!r.ok) return r;
      const receipt = logReceiptSchema.safeParse(safeJsonText(r));
      if (!receipt.success) {
        this.log.warn({ endpoint, reason: describeZodError(receipt.error) }, "platform.malformed_response");
      }
      return { ok: true, status: r.status, receipt: receipt.success ? receipt.data : null };
    } catch (err) {
      return failedPost(err);
    }
  }

  /** A POST whose failure is logged and returned, never thrown. Keeps the raw body for receipts. */
  private async firePost(
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

  private async send(
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
        headers: { accept: "application/json", ...req.headers },
        maxBodyBytes: MAX_RESPONSE_BYTES,
        dispatcher: this.dispatcher,
        codePrefix: "platform",
      });
      this.log.debug({ endpoint, status: res.status, ms: Math.round(res.elapsedMs) }, "platform.response");
      return res;
    } catch (err) {
      const e =
        err instanceof ValidatorError
          ? err
          : new InfraError("platform_unreachable", String(err), { cause: err });
      if (e.code !== "aborted")
        this.log.warn({ endpoint, code: e.code, err: e.message }, "platform.request.failed");
      throw e instanceof BodyTooLargeError
        ? new InfraError("platform_malformed_response", e.message, { cause: e, detail: { endpoint } })
        : e;
    }
  }

  private expectOk(endpoint: string, res: BoundedResponse): void {
    if (res.status >= 200 && res.status < 300) return;
    const message = errorText(res.body.toString("utf8"));
    throw new InfraError("platform_http_error", `${endpoint}: HTTP ${res.status} ${message}`, {
      retryable: isRetryableStatus(res.status),
      detail: { endpoint, status: res.status, error: message },
    });
  }

  private parse<T>(
    endpoint: string,
    res: BoundedResponse,
    schema: { safeParse(v: unknown): ZodResult<T> },
  ): T {
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

type ZodResult<T> = { success: true; data: T } | { success: false; error: import("zod").ZodError };

/** The score body on the wire: signing fields first, then the verdict, undefined fields omitted. */
export function buildScoreBody(
  verdict: ScoreVerdict,
  signed: { hotkey: string; timestamp: number; signature: string },
  version: string,
): Record<string, unknown> {
  const challenger = dropUndefined({ ...verdict.challenger });
  return dropUndefined({
    validator_hotkey: signed.hotkey,
    timestamp: signed.timestamp,
    signature: signed.signature,
    version,
    ...verdict,
    challenger,
  });
}

/**
 * Map a score POST's HTTP response to its outcome (receipt parsed by the caller). Delivered means
 * 200, as upstream (`submit_challenge_score` returns True on 200 only; on anything else its daemon
 * scores the epoch again and posts again): another 2xx is sent again.
 */
export function scoreOutcomeOf(res: { status: number; body: Buffer }): ScoreOutcome {
  const { status } = res;
  if (status === 200) return { kind: "delivered", status, receipt: null };
  if (status > 200 && status < 300)
    return {
      kind: "retryable",
      status,
      code: "platform_unexpected_status",
      message: `HTTP ${status} is not the 200 that records a score`,
    };
  const message = errorText(res.body.toString("utf8"));
  if (status === 409) {
    const c = classifyConflict(message);
    if (c === "finalized") return { kind: "finalized", status: 409, message };
    if (c === "duplicate") return { kind: "duplicate", status: 409, message };
    return { kind: "rejected", status, code: "platform_conflict", message };
  }
  if (isRetryableStatus(status)) return { kind: "retryable", status, code: "platform_http_error", message };
  // Our clock is off by more than the server's ±5 min: each attempt signs a fresh timestamp, so the
  // verdict goes out once the host's clock is fixed (NTP) instead of being dropped.
  if (status === 401 && /timestamp|drift|clock/i.test(message))
    return { kind: "retryable", status, code: "platform_clock_skew", message };
  const code =
    status === 401 || status === 403
      ? "platform_unauthorized"
      : status === 404
        ? "platform_epoch_not_found"
        : "platform_rejected";
  return { kind: "rejected", status, code, message };
}

function assertEpochId(id: number): void {
  if (!Number.isSafeInteger(id) || id <= 0) {
    throw new InputError("invalid_epoch_id", `challenge_epoch_id must be a positive integer (${id})`);
  }
}

function notOk(status: number | null, code: string, message: string, retryable: boolean) {
  return { ok: false as const, status, code, message, retryable };
}

function failedPost(err: unknown) {
  const e = err instanceof ValidatorError ? err : null;
  if (isAbortError(err)) return notOk(null, "aborted", "aborted", false);
  return notOk(null, e?.code ?? "internal_error", e?.message ?? String(err), e?.retryable ?? false);
}

function safeJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString("utf8"));
  } catch {
    return undefined;
  }
}

function safeJsonText(r: { raw?: Buffer }): unknown {
  return r.raw ? safeJson(r.raw) : undefined;
}

function dropUndefined<T extends Record<string, unknown>>(o: T): T {
  for (const k of Object.keys(o)) if (o[k] === undefined) delete o[k];
  return o;
}
