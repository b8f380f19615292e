/**
 * The eval loop's work (EVAL_ENABLED only): poll the challenge epoch, decide, fetch the pack,
 * evaluate it, queue the verdict. The decisions are in decide.ts; this is the shell around them.
 * The winner is refreshed by its own loop (winner-loop.ts), never by an eval tick.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Config } from "../config.js";
import { isAbortError, toValidatorError, ValidatorError } from "../errors.js";
import type { BenchFacts, Verdict } from "../evaluation/index.js";
import type { Logger } from "../log.js";
import {
  type EpochCurrent,
  type ObtainedPack,
  obtainPack,
  type PackCache,
  type PlatformClient,
  type ScoreVerdict,
  stillCurrent,
} from "../platform/index.js";
import type { LiveStatus } from "../status/index.js";
import type {
  EvaluationRepo,
  PlatformMarksRepo,
  ScoredEpochRepo,
  VerdictOutboxRepo,
} from "../store/index.js";
import { LOCKED_JUDGE_MODEL, llmModelLabel } from "../subnet.js";
import {
  discardRetryDelayMs,
  type EpochPlan,
  healthIssueOf,
  ProgressTracker,
  packFetchRejection,
  planEpoch,
  withLastHarness,
} from "./decide.js";
import { BENCH_MARK, benchTelemetryOf, type HealthIssue, lastHarness } from "./heartbeat.js";
import type { LogRecording, LogTap } from "./log-archive.js";
import type { OpenedEnvironment, PackEvaluation, Pipeline } from "./pipeline.js";

export const ALARM = {
  consensusDivergence: "consensus_divergence",
  evaluationDiscarded: "evaluation_discarded",
  platformUnreachable: "platform_unreachable",
  verdictRejected: "verdict_rejected",
  voteNotCounted: "vote_not_counted",
  winnerCacheStale: "winner_cache_stale",
  weightsBlocked: "weights_blocked",
  weightsFailing: "weights_failing",
  chainUnreachable: "chain_unreachable",
  uncaughtError: "uncaught_error",
  /** The daemon's start was refused and is held (hold.ts): the process waits for the fix. */
  startHeld: "start_held",
} as const;

/** What the daemon hands the log archiver once a verdict is queued. */
export interface FinishedEvaluation {
  plan: Extract<EpochPlan, { action: "evaluate" }>;
  evaluationId: string | null;
  verdict: ScoreVerdict;
  blockHeight: number;
  log: string | null;
  startedAtMs: number;
}

export interface EpochEvaluatorDeps {
  config: Config;
  log: Logger;
  live: LiveStatus;
  /** Wall clock, ms. */
  now: () => number;
  hotkey: string;
  platform: Pick<PlatformClient, "getEpochCurrent" | "postScenarioProgress">;
  pipeline: Pipeline;
  env: OpenedEnvironment;
  evaluations: EvaluationRepo;
  outbox: VerdictOutboxRepo;
  scored: ScoredEpochRepo;
  marks: PlatformMarksRepo;
  packCache: PackCache;
  /** Explicit scenario subset (tests, demos); production runs the epoch's spec. */
  scenarios?: string[];
  /** The spec a verdict made without the pipeline reports (fetch failures): the epoch's, resolved locally. */
  specFor(requested: number | null): Promise<number>;
  onVerdictQueued(): void;
  /** The heartbeat's health_issue: set here when a run is discarded (cleared by a posted score). */
  health?: HealthIssue;
  onEvaluationFinished?(f: FinishedEvaluation): void;
  logTap?: LogTap;
  packFetchAttempts: number;
  packFetchRetryMs: number;
}

export class EpochEvaluator {
  private readonly log: Logger;
  private readonly discards = new Map<number, { count: number; notBefore: number }>();
  private lastSkip = "";

  constructor(private readonly d: EpochEvaluatorDeps) {
    this.log = d.log.child({ component: "eval" });
  }

  /** One eval tick. An evaluation, when there is one to run, runs inside it (minutes). */
  async tick(signal: AbortSignal): Promise<undefined> {
    const d = this.d;
    const current = await d.platform.getEpochCurrent({ signal });
    const now = d.now();
    const epoch = current?.epoch ?? null;
    if (epoch) {
      const closed = d.outbox.closeEpochsBefore(d.hotkey, epoch.challenge_epoch_id, now);
      if (closed > 0) this.log.info({ epoch: epoch.challenge_epoch_id, closed }, "outbox.epochs_closed");
      this.abandonStaleEvaluations(epoch.challenge_epoch_id);
      for (const id of this.discards.keys()) if (id < epoch.challenge_epoch_id) this.discards.delete(id);
    }
    const plan = planEpoch(current, {
      isScored: (id) => d.scored.has(id, d.hotkey),
      hasResumable: (id, hash) => this.resumable(id, hash),
      retryNotBefore: (id) => this.discards.get(id)?.notBefore,
      nowMs: now,
    });
    d.live.setEpoch(
      epoch
        ? {
            epochId: epoch.challenge_epoch_id,
            challengerHotkey: epoch.challenger_hotkey,
            packHash: epoch.challenger_pack_hash,
            specNumber: epoch.spec_number,
            decision: plan.action === "evaluate" ? (plan.resume ? "resuming" : "evaluating") : plan.reason,
            seenAt: now,
          }
        : null,
    );
    if (plan.action === "skip") {
      // Every 10 s the same answer: log it when it changes.
      const key = `${plan.epochId}:${plan.reason}`;
      if (key !== this.lastSkip) this.log.info({ epoch: plan.epochId, reason: plan.reason }, "eval.skip");
      this.lastSkip = key;
      return undefined;
    }
    this.lastSkip = "";
    await this.runEpoch(plan, current!, signal);
    return undefined;
  }

  /** An evaluation of this epoch and pack that a stopped process left running. */
  private resumable(epochId: number, packHash: string): boolean {
    return this.d.evaluations
      .running()
      .some((r) => r.source === "epoch" && r.epochId === String(epochId) && r.packHash === packHash);
  }

  /** Interrupted evaluations of epochs that are over can never be posted: close them. */
  private abandonStaleEvaluations(currentEpochId: number): void {
    for (const r of this.d.evaluations.running()) {
      if (r.source !== "epoch" || r.epochId === String(currentEpochId)) continue;
      if (this.d.evaluations.finish(r.id, "aborted", "epoch_changed", null))
        this.log.info({ evaluation: r.id, epoch: r.epochId }, "eval.stale_evaluation_closed");
    }
  }

  private async runEpoch(
    plan: Extract<EpochPlan, { action: "evaluate" }>,
    current: EpochCurrent,
    signal: AbortSignal,
  ): Promise<void> {
    const d = this.d;
    const log = this.log.child({ epoch: plan.epochId, pack: plan.packHash.slice(0, 12) });
    const startedAtMs = d.now();
    const blockHeight = current.current_block ?? 0;

    // A verdict produced by a process that died before queueing it is the verdict: never run twice.
    const stored = this.storedVerdict(plan);
    if (stored) return this.requeue(plan, stored, { blockHeight, startedAtMs, log });

    log.info(
      {
        challenger: plan.challengerHotkey,
        uid: plan.challengerUid,
        spec: plan.specNumber,
        resume: plan.resume,
      },
      "eval.epoch_selected",
    );
    let pack: ObtainedPack;
    try {
      pack = await this.obtain(plan, signal, log);
    } catch (err) {
      if (signal.aborted) return;
      const e = toValidatorError(err);
      log.warn({ code: e.code, err: e.message }, "eval.pack_unavailable");
      const verdict = await this.unfetchable(plan);
      this.queue(plan, verdict, log);
      d.onEvaluationFinished?.({ plan, evaluationId: null, verdict, blockHeight, log: null, startedAtMs });
      return;
    }

    // The spec and the harness are the prepared bench's (onPrepared), as upstream stamps its own.
    const tracker = new ProgressTracker({
      minerHotkey: plan.challengerHotkey,
      minerUid: plan.challengerUid,
      llmModel: llmModelLabel(d.config.llm.defaultModel),
    });
    const { result, logText } = await this.evaluateObtained(plan, pack, { signal, log, tracker });
    this.settle(plan, result, { blockHeight, startedAtMs, log, logText });
  }

  /** The pack evaluated for the epoch, with the loop kept alive on the status page and the logs recorded. */
  private async evaluateObtained(
    plan: Extract<EpochPlan, { action: "evaluate" }>,
    pack: ObtainedPack,
    c: { signal: AbortSignal; log: Logger; tracker: ProgressTracker },
  ): Promise<{ result: PackEvaluation; logText: string | null }> {
    const d = this.d;
    const { signal, log, tracker } = c;
    const recording: LogRecording | undefined = d.logTap?.start();
    // The loop is alive while it evaluates for half an hour: tell the status page so.
    const alive = setInterval(() => d.live.tick("eval"), Math.max(1_000, d.config.platform.pollIntervalMs));
    let result: PackEvaluation;
    let logText: string | null = null;
    try {
      const specNumber = plan.specNumber ?? d.config.evaluation.specNumber;
      result = await d.env.evaluatePack({
        pack: pack.result,
        rejectedHash: plan.packHash,
        label: `epoch ${plan.epochId} / ${plan.challengerHotkey.slice(0, 8)}…`,
        ...(specNumber !== undefined ? { specNumber } : {}),
        ...(d.scenarios ? { scenarios: d.scenarios } : {}),
        source: "epoch",
        epochId: plan.epochId,
        signal,
        onPrepared: (p) => this.prepared(p, tracker),
        onEvent: (e) => {
          const ev = tracker.next(e);
          // Decorative, bounded and never throwing: not awaited.
          if (ev) void d.platform.postScenarioProgress(plan.epochId, ev);
        },
        stillCurrent: () => this.probe(plan, signal, log),
      });
    } finally {
      clearInterval(alive);
      if (recording && d.logTap) logText = d.logTap.stop(recording);
    }

    return { result, logText };
  }

  /** A verdict is queued to be posted; a discard is retried later with an alarm; an abort is only logged. */
  private settle(
    plan: Extract<EpochPlan, { action: "evaluate" }>,
    result: PackEvaluation,
    c: { blockHeight: number; startedAtMs: number; log: Logger; logText: string | null },
  ): void {
    const d = this.d;
    const { blockHeight, startedAtMs, log, logText } = c;
    switch (result.kind) {
      case "verdict": {
        // A rejection before the bench was prepared carries the bench last pulled, as upstream's.
        const verdict = withLastHarness(d.pipeline.toScoreVerdict(result.verdict), lastHarness(d.marks));
        this.queue(plan, verdict, log.child({ evaluation: result.evaluationId }));
        this.discards.delete(plan.epochId);
        d.live.clear(ALARM.evaluationDiscarded);
        d.onEvaluationFinished?.({
          plan,
          evaluationId: result.evaluationId,
          verdict,
          blockHeight,
          log: logText,
          startedAtMs,
        });
        return;
      }
      case "discarded": {
        const prev = this.discards.get(plan.epochId)?.count ?? 0;
        const wait = discardRetryDelayMs(prev + 1);
        this.discards.set(plan.epochId, { count: prev + 1, notBefore: d.now() + wait });
        log.error(
          { evaluation: result.evaluationId, code: result.code, err: result.message, retryInMs: wait },
          "eval.discarded_not_posted",
        );
        d.live.raise(
          ALARM.evaluationDiscarded,
          `epoch ${plan.epochId}: evaluation discarded (${result.code}): ${result.message}; not posted`,
          "error",
        );
        d.health?.set(healthIssueOf(plan.epochId, result.code, result.message));
        return;
      }
      case "aborted":
        if (result.reason === "shutdown")
          log.info({ evaluation: result.evaluationId }, "eval.interrupted_resumes_at_next_start");
        else log.warn({ evaluation: result.evaluationId, reason: result.reason }, "eval.aborted_not_posted");
        return;
    }
  }

  /** The verdict for a pack that could not be fetched, with what upstream's carries (decide.ts). */
  private async unfetchable(plan: Extract<EpochPlan, { action: "evaluate" }>): Promise<ScoreVerdict> {
    const d = this.d;
    return packFetchRejection({
      specNumber: await d.specFor(plan.specNumber),
      llmBaseUrl: d.config.llm.baseUrl,
      llmModel: llmModelLabel(d.config.llm.defaultModel),
      judgeModel: LOCKED_JUDGE_MODEL,
      harness: lastHarness(d.marks),
    });
  }

  /**
   * The bench is prepared: progress reports take its spec and harness, and the mark its facts — what
   * the harness last pulled, which upstream's payloads carry (heartbeat, rejections before a pull).
   */
  private prepared(p: { spec: number; bench: BenchFacts }, tracker: ProgressTracker): void {
    const b = p.bench;
    tracker.update({
      specNumber: p.spec,
      ...(b.harnessName ? { harnessName: b.harnessName } : {}),
      ...(b.harnessVersion ? { harnessVersion: b.harnessVersion } : {}),
    });
    const facts = benchTelemetryOf({
      bench_image_hash: b.benchImageHash,
      harness_image_hash: b.harnessImageHash,
      bench_version: b.benchVersion,
      harness_name: b.harnessName,
      harness_version: b.harnessVersion,
    } as Record<string, string>);
    if (facts !== null) this.d.marks.set(BENCH_MARK, this.d.now(), facts);
  }

  /** A verdict a process that died before queueing it produced: queued now, then archived with its evidence. */
  private requeue(
    plan: Extract<EpochPlan, { action: "evaluate" }>,
    stored: Verdict,
    at: { blockHeight: number; startedAtMs: number; log: Logger },
  ): void {
    at.log.warn({ evaluation: stored.evaluationId }, "eval.stored_verdict_requeued");
    const verdict = this.d.pipeline.toScoreVerdict(stored);
    this.queue(plan, verdict, at.log);
    const { blockHeight, startedAtMs } = at;
    this.d.onEvaluationFinished?.({
      plan,
      evaluationId: stored.evaluationId,
      verdict,
      blockHeight,
      log: null,
      startedAtMs,
    });
  }

  /** A finished verdict for this epoch and pack that never reached the outbox (crash in between). */
  private storedVerdict(plan: Extract<EpochPlan, { action: "evaluate" }>): Verdict | undefined {
    for (const r of this.d.evaluations.recent(50)) {
      if (r.source !== "epoch" || r.epochId !== String(plan.epochId) || r.packHash !== plan.packHash)
        continue;
      if ((r.status === "scored" || r.status === "rejected") && r.verdict) return r.verdict as Verdict;
    }
    return undefined;
  }

  private queue(plan: Extract<EpochPlan, { action: "evaluate" }>, verdict: ScoreVerdict, log: Logger): void {
    const d = this.d;
    const now = d.now();
    const { entry, created } = d.outbox.enqueue({
      epochId: plan.epochId,
      validatorHotkey: d.hotkey,
      verdict,
      nowMs: now,
      challengerHotkey: plan.challengerHotkey,
      packHash: plan.packHash,
    });
    // The bench that produced it: the heartbeat reports its digests and version (kept across restarts).
    // last_eval_at is the platform's acceptance of a score, marked by the outbox (upstream's `ok`).
    const bench = benchTelemetryOf(verdict);
    if (bench !== null) d.marks.set(BENCH_MARK, now, bench);
    log.info(
      {
        outbox: entry.id,
        created,
        score: verdict.challenger.score,
        qualified: verdict.challenger.qualified,
        rejected: verdict.challenger.rejected ?? false,
        rejection: verdict.challenger.rejection_detail ?? undefined,
        spec: verdict.spec_number,
      },
      "eval.verdict_queued",
    );
    d.onVerdictQueued();
  }

  /** obtainPack, retrying what may be passing (5xx, timeouts) a few times before it counts as a rejection. */
  private async obtain(
    plan: Extract<EpochPlan, { action: "evaluate" }>,
    signal: AbortSignal,
    log: Logger,
  ): Promise<ObtainedPack> {
    const attempts = Math.max(1, this.d.packFetchAttempts);
    for (let n = 1; ; n++) {
      try {
        return await obtainPack(plan.packUrl, plan.packHash, { cache: this.d.packCache, signal, log });
      } catch (err) {
        const again =
          n < attempts &&
          !signal.aborted &&
          err instanceof ValidatorError &&
          err.retryable &&
          !isAbortError(err);
        if (!again || (err as ValidatorError).code === "aborted") throw err;
        log.warn({ attempt: n, code: err.code }, "eval.pack_fetch_retry");
        await sleep(this.d.packFetchRetryMs * n, undefined, { signal }).catch(() => {});
      }
    }
  }

  /** The pipeline's "is this epoch still the one we evaluate?" probe. A failed probe says yes (as Python). */
  private async probe(
    plan: Extract<EpochPlan, { action: "evaluate" }>,
    signal: AbortSignal,
    log: Logger,
  ): Promise<boolean> {
    let current: EpochCurrent | null | undefined;
    try {
      current = await this.d.platform.getEpochCurrent({ signal });
    } catch {
      current = undefined;
    }
    const still = stillCurrent(current, plan.epochId, plan.packHash);
    if (!still)
      log.warn(
        { now: current?.epoch?.challenge_epoch_id ?? null, status: current?.epoch?.status ?? null },
        "eval.epoch_moved_on",
      );
    return still;
  }
}
