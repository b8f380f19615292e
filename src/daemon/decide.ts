/**
 * The eval side's pure decisions: which epoch to evaluate (and whether to resume one past its
 * start gate), scenario progress events, the verdict for a pack that could not be fetched, and
 * the log upload's eval id. No I/O, no clock. The winner cross-checks are in winner-check.ts.
 */
import type { ErrorCode } from "../errors.js";
import type { EpisodePhase, EvaluationEvent } from "../evaluation/index.js";
import {
  assessEpoch,
  type EpochCurrent,
  type ScenarioProgressEvent,
  type ScenarioState,
  type ScoreVerdict,
} from "../platform/index.js";

// ---------------------------------------------------------------------------------------------
// Which epoch to evaluate
// ---------------------------------------------------------------------------------------------

export interface EpochFacts {
  /** This validator already judged the epoch (a verdict is queued or delivered). */
  isScored(epochId: number): boolean;
  /** An evaluation of this epoch and pack was interrupted (shutdown) and can be resumed. */
  hasResumable(epochId: number, packHash: string): boolean;
  /** A discarded run of this epoch asked to wait until this wall-clock ms before trying again. */
  retryNotBefore(epochId: number): number | undefined;
  nowMs: number;
}

export type EpochPlan =
  | {
      action: "evaluate";
      epochId: number;
      packUrl: string;
      packHash: string;
      specNumber: number | null;
      challengerHotkey: string;
      /** -1 when the server does not say (the Python daemon sends -1 too). */
      challengerUid: number;
      /** Resuming an interrupted evaluation (allowed past the 50 % start gate). */
      resume: boolean;
    }
  | {
      action: "skip";
      epochId: number | null;
      reason:
        | "no_epoch"
        | "already_scored"
        | "too_late"
        | "no_pack_url"
        | "not_in_progress"
        | "retry_backoff";
    };

/**
 * assessEpoch's gates (already scored, > 50 % elapsed, no pack URL), plus two of the daemon's own:
 * an evaluation interrupted by a restart is resumed even past the start gate (most of its episodes
 * are done; letting it lapse would waste them and skip the epoch), and a run that was discarded
 * (provider or infra failure) is retried only after its back-off.
 */
export function planEpoch(current: EpochCurrent | null, facts: EpochFacts): EpochPlan {
  const d = assessEpoch(current, facts.isScored);
  const epoch = current?.epoch;
  if (!d.evaluate) {
    const url = epoch?.challenger_pack_url;
    if (
      d.reason === "too_late" &&
      epoch &&
      url &&
      facts.hasResumable(epoch.challenge_epoch_id, epoch.challenger_pack_hash)
    ) {
      return evaluatePlan(epoch, url, true);
    }
    return { action: "skip", epochId: d.epochId, reason: d.reason };
  }
  const notBefore = facts.retryNotBefore(d.epochId);
  if (notBefore !== undefined && facts.nowMs < notBefore)
    return { action: "skip", epochId: d.epochId, reason: "retry_backoff" };
  return evaluatePlan(epoch!, d.packUrl, facts.hasResumable(d.epochId, d.packHash));
}

function evaluatePlan(
  epoch: NonNullable<EpochCurrent["epoch"]>,
  packUrl: string,
  resume: boolean,
): EpochPlan {
  return {
    action: "evaluate",
    epochId: epoch.challenge_epoch_id,
    packUrl,
    packHash: epoch.challenger_pack_hash,
    specNumber: epoch.spec_number,
    challengerHotkey: epoch.challenger_hotkey,
    challengerUid: epoch.challenger_uid ?? -1,
    resume,
  };
}

/** Wait before re-running an epoch whose run was discarded: 1 min × 2^(n−1), at most 10 min. */
export function discardRetryDelayMs(discards: number): number {
  const n = Math.max(1, Math.floor(discards));
  return Math.min(10 * 60_000, 60_000 * 2 ** Math.min(n - 1, 10));
}

// ---------------------------------------------------------------------------------------------
// Scenario progress (decorative: the platform's live /challenge page)
// ---------------------------------------------------------------------------------------------

/** running → running, verifying → verifying, done/failed → complete; other phases are not posted. */
export function progressStateOf(phase: EpisodePhase): ScenarioState | null {
  switch (phase) {
    case "running":
      return "running";
    case "verifying":
      return "verifying";
    case "done":
    case "failed":
      return "complete";
    default:
      return null;
  }
}

export interface ProgressContext {
  minerHotkey: string;
  minerUid: number;
  /** The spec the evaluation runs (the resolved one, as upstream's `eval_spec`). */
  specNumber?: number;
  /** The bench's agent harness (its probe's `harness_name`/`harness_version`); absent → not sent. */
  harnessName?: string;
  harnessVersion?: string;
  /** `policy:auto (default <testee>)`. */
  llmModel: string;
}

/**
 * Turns an evaluation's events into the platform's progress events (upstream's
 * `submit_scenario_progress`): one per scenario and state change (a resumed evaluation replays its
 * finished scenarios once), with the scenario's index in the order the evaluation announced them.
 * On `complete`: the quality, the meter's spend on the episode (`cost_usd`), the episode's own
 * duration and `timed_out` (the agent stopped by its deadline or the policy-stall watchdog).
 */
export class ProgressTracker {
  private readonly order = new Map<string, number>();
  private readonly last = new Map<string, ScenarioState>();
  private ctx: ProgressContext;
  constructor(ctx: ProgressContext) {
    this.ctx = { ...ctx };
  }

  /** What becomes known once the bench is prepared: the resolved spec and the harness. */
  update(ctx: Partial<ProgressContext>): void {
    this.ctx = { ...this.ctx, ...ctx };
  }

  next(e: EvaluationEvent): ScenarioProgressEvent | null {
    if (!this.order.has(e.scenario)) this.order.set(e.scenario, this.order.size);
    const state = progressStateOf(e.phase);
    if (state === null || this.last.get(e.scenario) === state) return null;
    this.last.set(e.scenario, state);
    const ev: ScenarioProgressEvent = {
      miner_hotkey: this.ctx.minerHotkey,
      miner_uid: this.ctx.minerUid,
      scenario_name: e.scenario,
      scenario_index: this.order.get(e.scenario)!,
      total_scenarios: this.order.size,
      state,
      llm_model: this.ctx.llmModel,
    };
    if (this.ctx.harnessName) ev.harness_name = this.ctx.harnessName;
    if (this.ctx.harnessVersion) ev.harness_version = this.ctx.harnessVersion;
    if (this.ctx.specNumber !== undefined) ev.spec_number = this.ctx.specNumber;
    if (state === "complete") {
      ev.quality = clamp01(e.quality ?? 0);
      ev.cost_usd = Math.max(0, e.spentUsd);
      ev.duration_s = Math.max(0, Math.round(e.elapsedMs) / 1000);
      ev.timed_out = e.timedOut ?? false;
    }
    return ev;
  }
}

const clamp01 = (x: number) => (Number.isFinite(x) ? Math.min(1, Math.max(0, x)) : 0);

// ---------------------------------------------------------------------------------------------
// The heartbeat's health_issue
// ---------------------------------------------------------------------------------------------

/** Upstream's bound on the heartbeat's `health_issue`, in characters (code points). */
export const HEALTH_ISSUE_MAX = 256;

/**
 * What the heartbeat says while this validator scores nothing: set when a run is discarded, cleared
 * by the next score POST the platform accepts (validator.py `_health_issue`). A provider failure reads
 * as upstream's line; any other discard names its code and reason. Never longer than 256 characters.
 */
export function healthIssueOf(epochId: number, code: ErrorCode, message: string): string {
  const text =
    code === "llm_provider_failure"
      ? `infra: every scenario failed with no billed model call (epoch ${epochId}); check the Engy key, credits, network, and the policy sidecar's route to the meter`
      : `infra: evaluation discarded (${code}, epoch ${epochId}): ${message}`;
  return clipChars(text, HEALTH_ISSUE_MAX);
}

/** The first `n` characters (code points: a surrogate pair is never cut in half). */
export function clipChars(s: string, n: number): string {
  const chars = Array.from(s);
  return chars.length <= n ? s : chars.slice(0, n).join("");
}

// ---------------------------------------------------------------------------------------------
// Verdicts the daemon makes itself
// ---------------------------------------------------------------------------------------------

/**
 * The bench facts upstream's payloads carry beside the verdict (validator.py `_harness_metadata` at
 * 2f32a51b8e3b): the digests, the bench's version and its harness's name and version, as the
 * harness holds them — what it last pulled and probed, "unknown"/None (left out) before its first
 * pull. Snake-case, as sent.
 */
export interface HarnessMetadata {
  bench_image_hash?: string;
  harness_image_hash?: string;
  bench_version?: string;
  harness_name?: string;
  harness_version?: string;
}

export const HARNESS_METADATA_KEYS = [
  "bench_image_hash",
  "harness_image_hash",
  "bench_version",
  "harness_name",
  "harness_version",
] as const;

/** Only the keys that hold a value (upstream leaves "unknown" and None out). */
export function harnessMetadataOf(v: Partial<Record<string, unknown>>): HarnessMetadata {
  const out: HarnessMetadata = {};
  for (const k of HARNESS_METADATA_KEYS) {
    const x = v[k];
    if (typeof x === "string" && x !== "" && x !== "unknown") out[k] = x;
  }
  return out;
}

/**
 * The verdict for a pack that could not be fetched: a rejection, score 0, posted like any verdict.
 * The Python daemon folds fetch and hash failures alike into `pack_verify_failed` (validator.py
 * `_score_challenger` at 2f32a51b8e3b, miner_eval.py SKIP_PACK_VERIFY) and posts the bare code, as
 * for every rejection, with the same metadata as any score: the resolved spec, `llm_base_url`,
 * `llm_model`, `judge_model` and `**_harness_metadata()` — the bench the harness last pulled, since
 * the pack is verified before this evaluation's pull. Our log names the fetch error's code, never its
 * text (it may hold the signed URL).
 */
export function packFetchRejection(args: {
  specNumber: number;
  llmBaseUrl: string;
  llmModel: string;
  judgeModel: string;
  harness: HarnessMetadata;
}): ScoreVerdict {
  return {
    spec_number: args.specNumber,
    challenger: {
      score: 0,
      qualified: false,
      rejected: true,
      rejection_detail: "pack_verify_failed",
    },
    llm_base_url: args.llmBaseUrl,
    llm_model: args.llmModel,
    judge_model: args.judgeModel,
    ...harnessMetadataOf(args.harness as Record<string, unknown>),
  };
}

/**
 * A rejection made before this evaluation's bench was prepared (the pack's hash, structure or
 * SKILL.md) carries no bench of its own; upstream's carries what its harness last pulled. Anything
 * else passes unchanged.
 */
export function withLastHarness(v: ScoreVerdict, last: HarnessMetadata): ScoreVerdict {
  if (v.challenger.rejected !== true) return v;
  if (HARNESS_METADATA_KEYS.some((k) => v[k] !== undefined)) return v;
  return { ...v, ...harnessMetadataOf(last as Record<string, unknown>) };
}

/** `YYYYMMDD_HHMMSS_e{epoch}` (UTC), as the Python v6 daemon names an eval cycle. */
export function evalIdOf(epochId: number, atMs: number): string {
  const iso = new Date(atMs).toISOString(); // 2026-01-02T03:04:05.678Z
  const d = iso.slice(0, 10).replaceAll("-", "");
  const t = iso.slice(11, 19).replaceAll(":", "");
  return `${d}_${t}_e${epochId}`;
}
