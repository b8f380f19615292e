/**
 * The TrajectoryRL platform API client (v6 winner-challenger protocol). Thin: builds signed
 * requests, sends them through the transport (transport.ts: bounded HTTP, zod-checked answers), and
 * maps HTTP outcomes onto typed results (score.ts for the score's wire rules). Endpoints, shapes and
 * sources: src/platform/README.md.
 */
import { type Dispatcher, FormData } from "undici";
import { InputError, type ValidatorError } from "../errors.js";
import { type Logger, silentLogger } from "../log.js";
import { UPSTREAM_RELEASE } from "../subnet.js";
import type { BoundedResponse } from "./http.js";
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
  type ScoreVerdict,
  scenarioProgressEventSchema,
  scoreReceiptSchema,
  scoreVerdictSchema,
  type WinnerCurrent,
  winnerCurrentSchema,
} from "./schemas.js";
import { assertEpochId, buildScoreBody, dropUndefined, type ScoreOutcome, scoreOutcomeOf } from "./score.js";
import { PREFIX, type Signer, signFields } from "./signing.js";
import {
  failedPost,
  notOk,
  PlatformTransport,
  type PostResult,
  type Reachability,
  safeJson,
  safeJsonText,
} from "./transport.js";

export { buildScoreBody, classifyConflict, type ScoreOutcome, scoreOutcomeOf } from "./score.js";
export type { PostResult, Reachability } from "./transport.js";

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
/** Scenario progress is decorative: at most this many in flight, the rest are dropped. */
const DEFAULT_PROGRESS_IN_FLIGHT = 4;

export interface PlatformClientOptions {
  /** e.g. https://trajrl.com (config.platform.baseUrl); no trailing slash needed. */
  baseUrl: string;
  signer: Signer;
  log?: Logger;
  /**
   * Sent as `version` in score, progress and heartbeat bodies; default the upstream release whose
   * rules this build implements (subnet.ts UPSTREAM_RELEASE), which the platform's filter gates on.
   */
  version?: string;
  /** Wall clock in ms for signature timestamps (the server checks ±5 min). Injectable for tests. */
  now?: () => number;
  timeouts?: Partial<PlatformTimeouts>;
  dispatcher?: Dispatcher;
  progressInFlight?: number;
  /** Told after every request whether the platform answered (health's outage clock). */
  onReachability?: Reachability;
}

export interface CallOptions {
  signal?: AbortSignal;
}

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

export class PlatformClient {
  readonly baseUrl: string;
  private readonly signer: Signer;
  private readonly log: Logger;
  private readonly version: string;
  private readonly now: () => number;
  private readonly timeouts: PlatformTimeouts;
  private readonly http: PlatformTransport;
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
    this.version = opts.version ?? UPSTREAM_RELEASE;
    this.now = opts.now ?? Date.now;
    this.timeouts = { ...DEFAULT_TIMEOUTS, ...opts.timeouts };
    this.http = new PlatformTransport(this.log, opts.dispatcher, opts.onReachability);
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
    const res = await this.http.send(endpoint, {
      method: "GET",
      url: `${this.baseUrl}/api/v2/winner/current`,
      timeoutMs: this.timeouts.read,
      signal: opts.signal,
    });
    if (res.status === 404) return { ...COLD_START, submissions: [] };
    this.http.expectOk(endpoint, res);
    return this.http.parse(endpoint, res, winnerCurrentSchema);
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
    const res = await this.http.send(endpoint, {
      method: "GET",
      url: `${this.baseUrl}/api/v2/epoch/current?${q.toString()}`,
      timeoutMs: this.timeouts.read,
      signal: opts.signal,
    });
    if (res.status === 404) return null;
    this.http.expectOk(endpoint, res);
    const parsed = this.http.parse(endpoint, res, epochCurrentSchema);
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
      res = await this.http.send(endpoint, {
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
      return await this.http.firePost(endpoint, {
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
      const r = await this.http.firePost(endpoint, {
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
      const r = await this.http.firePost(endpoint, {
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
}
