/**
 * One pack over one scenario set: bounded parallelism, retries of what is not the miner's fault,
 * abort, and resumption after a crash. Every step is written to SQLite as it happens; the verdict is
 * produced once (the finishing UPDATE only succeeds while the evaluation is still 'running').
 */
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import pLimit from "p-limit";
import { isAbortError, toValidatorError } from "../errors.js";
import { sha256Hex } from "../hash.js";
import type { Logger } from "../log.js";
import type { EvaluationRepo } from "../store/index.js";
import type {
  EpisodeOutcome,
  EpisodeRunner,
  EvaluationEvent,
  EvaluationResult,
  Provenance,
  ScenarioVerdict,
} from "./types.js";
import {
  backoffMs,
  buildVerdict,
  chargedToPack,
  type Disposition,
  discardReason,
  dispose,
  followsThePack,
  MAX_ATTEMPTS,
  retryReason,
  scenarioVerdict,
} from "./verdict.js";

/** Abort with this reason to stop for a restart: the evaluation stays resumable instead of being aborted. */
export const SHUTDOWN = Object.freeze({ code: "shutdown", message: "the validator is shutting down" });

export interface EvaluateOptions {
  repo: EvaluationRepo;
  runner: EpisodeRunner;
  packHash: string;
  spec: number;
  /** Scenario names, in the order results are reported. */
  scenarios: string[];
  concurrency: number;
  capUsd: number;
  log: Logger;
  /** Called once at the end, when image digests and the like are known. */
  provenance: () => Provenance;
  signal?: AbortSignal;
  onEvent?: (e: EvaluationEvent) => void;
  source?: "local" | "epoch";
  epochId?: string;
  resumeKey?: string;
  /** For people: a file name, or "epoch 42". Stored with the evaluation. */
  label?: string;
  maxAttempts?: number;
  /** Multiplies the retry back-off (tests use a small one). */
  backoffScale?: number;
  /** The order to start the pending scenarios in (default: as given); results stay in `scenarios` order. */
  dispatchOrder?: (pending: string[]) => string[];
}

interface Settled {
  scenario: string;
  outcome: EpisodeOutcome;
  disposition: Disposition;
  attempts: number;
  episodeId: string;
}

export function resumeKeyOf(
  o: Pick<EvaluateOptions, "packHash" | "spec" | "scenarios" | "source" | "epochId">,
): string {
  return sha256Hex(JSON.stringify([o.packHash, o.spec, o.scenarios, o.source ?? "local", o.epochId ?? null]));
}

export function newEvaluationId(): string {
  const t = Date.now().toString(36).padStart(9, "0");
  return `ev_${t}${randomBytes(5).toString("hex")}`;
}

const nowIso = () => new Date().toISOString();

/** Upstream's `timed_out`: the agent was stopped by its deadline or the policy-stall watchdog. */
function timedOutOf(o: EpisodeOutcome): boolean {
  const k = o.agent?.killedBy;
  return k === "deadline" || k === "watchdog_no_call" || k === "watchdog_idle";
}

function failedOutcome(scenario: string, err: unknown): EpisodeOutcome {
  const e = toValidatorError(err, "episode_crashed");
  return {
    scenario,
    status: "failed",
    quality: 0,
    tests: 0,
    passed: 0,
    failure: {
      class: e.failureClass === "input" ? "infra" : e.failureClass,
      code: e.code,
      message: e.message,
    },
    costUsd: 0,
    byModel: {},
    billedCalls: 0,
    truncatedBeforeToolCall: false,
    timings: { setupMs: 0, agentMs: 0, verifyMs: 0, totalMs: 0 },
    imageDigests: {},
  };
}

/** One scenario's rows so far, re-runs so far, and the outcomes of those re-runs (the pack-following rule reads them). */
interface History {
  rows: number;
  retries: number;
  tries: EpisodeOutcome[];
}

type ProgressEvent = Omit<EvaluationEvent, "evaluationId" | "capUsd">;

/** What every step of one evaluation shares. */
interface Run {
  o: EvaluateOptions;
  evaluationId: string;
  log: Logger;
  signal: AbortSignal;
  maxAttempts: number;
  emit: (e: ProgressEvent) => void;
}

export async function evaluate(o: EvaluateOptions): Promise<EvaluationResult> {
  const maxAttempts = o.maxAttempts ?? MAX_ATTEMPTS;
  const signal = o.signal ?? new AbortController().signal;
  const { evaluation, resumed } = openEvaluation(o);
  const evaluationId = evaluation.id;
  const log = o.log.child({ evaluation: evaluationId, pack: o.packHash.slice(0, 12) });
  const startedAt = (resumed ? evaluation.createdAt : undefined) ?? nowIso();
  const { done, history } = resumed ? restoreProgress(o, evaluationId, log) : startFresh(o, log);
  const run: Run = { o, evaluationId, log, signal, maxAttempts, emit: emitterOf(o, evaluationId, log) };
  announceScenarios(run, done);

  const limit = pLimit(o.concurrency);
  const pending = pendingInDispatchOrder(o, done);
  const settled = await Promise.allSettled(
    pending.map((s) => limit(() => runScenario(run, s, history.get(s)))),
  );
  if (signal.aborted) {
    limit.clearQueue();
    return finishAborted(run);
  }
  collectSettled(run, pending, settled, done);
  return finishEvaluation(
    run,
    o.scenarios.map((s) => done.get(s)!),
    startedAt,
  );
}

/** The evaluation a previous process left unfinished under the same key, or a new one. */
function openEvaluation(o: EvaluateOptions) {
  const resumeKey = o.resumeKey ?? resumeKeyOf(o);
  const found = o.repo.findResumable(resumeKey);
  if (found) return { evaluation: found, resumed: true };
  const evaluation = o.repo.create({
    id: newEvaluationId(),
    resumeKey,
    packHash: o.packHash,
    spec: o.spec,
    scenarios: o.scenarios,
    source: o.source ?? "local",
    epochId: o.epochId ?? null,
    meta: { capUsd: o.capUsd, concurrency: o.concurrency, ...(o.label ? { label: o.label } : {}) },
  });
  return { evaluation, resumed: false };
}

function startFresh(o: EvaluateOptions, log: Logger) {
  log.info({ scenarios: o.scenarios, spec: o.spec, concurrency: o.concurrency }, "evaluation.started");
  return { done: new Map<string, Settled>(), history: new Map<string, History>() };
}

/** What a previous process finished is kept; what it left running is re-run. */
function restoreProgress(o: EvaluateOptions, evaluationId: string, log: Logger) {
  const done = new Map<string, Settled>();
  const history = new Map<string, History>();
  const interrupted = o.repo.interruptRunning(evaluationId);
  for (const row of [...o.repo.episodes(evaluationId)].sort((a, b) => a.attempt - b.attempt)) {
    const h = history.get(row.scenario) ?? { rows: 0, retries: 0, tries: [] };
    h.rows = Math.max(h.rows, row.attempt);
    if (row.status === "retry") {
      h.retries++;
      if (row.outcome) h.tries.push(row.outcome as EpisodeOutcome);
    }
    history.set(row.scenario, h);
    if ((row.status === "final" || row.status === "unresolved") && row.outcome) {
      done.set(row.scenario, {
        scenario: row.scenario,
        outcome: row.outcome as EpisodeOutcome,
        disposition: row.status === "final" ? "final" : "unresolved",
        attempts: h.retries + 1,
        episodeId: row.id,
      });
    }
  }
  log.info({ kept: done.size, interrupted, of: o.scenarios.length }, "evaluation.resumed");
  return { done, history };
}

/** A failing progress listener is logged, never allowed to break the evaluation. */
function emitterOf(o: EvaluateOptions, evaluationId: string, log: Logger) {
  return (e: ProgressEvent) => {
    try {
      o.onEvent?.({ evaluationId, capUsd: o.capUsd, ...e });
    } catch (err) {
      log.warn({ err }, "evaluation.event_listener_failed");
    }
  };
}

/** One event per scenario up front: the kept ones as finished, the rest as queued. */
function announceScenarios(run: Run, done: Map<string, Settled>): void {
  for (const s of run.o.scenarios) {
    const d = done.get(s);
    if (d) {
      run.emit({
        scenario: s,
        phase: d.outcome.status === "scored" ? "done" : "failed",
        attempt: d.attempts,
        spentUsd: d.outcome.costUsd,
        elapsedMs: d.outcome.timings.totalMs,
        quality: d.outcome.quality,
        timedOut: timedOutOf(d.outcome),
      });
    } else run.emit({ scenario: s, phase: "queued", attempt: 0, spentUsd: 0, elapsedMs: 0 });
  }
}

/** Whatever the dispatch hook returns, each pending scenario runs exactly once. */
function pendingInDispatchOrder(o: EvaluateOptions, done: Map<string, Settled>): string[] {
  const remaining = o.scenarios.filter((s) => !done.has(s));
  const ordered = o.dispatchOrder?.(remaining) ?? remaining;
  return ordered.length === remaining.length &&
    new Set(ordered).size === remaining.length &&
    ordered.every((s) => remaining.includes(s))
    ? ordered
    : remaining;
}

/** One scenario's attempts until it is final or unresolved; a retry waits its back-off first. */
async function runScenario(
  run: Run,
  scenario: string,
  h: History = { rows: 0, retries: 0, tries: [] },
): Promise<Settled> {
  let row = h.rows;
  let retries = h.retries;
  const tries = [...h.tries];
  const t0 = performance.now();
  while (true) {
    run.signal.throwIfAborted();
    row++;
    const attempt = retries + 1;
    const episodeId = `${run.evaluationId}.${scenario}.${row}`;
    const elog = run.log.child({ scenario, episode: episodeId, attempt });
    const { outcome: raw, spent } = await runAttempt(run, { scenario, episodeId, attempt, row, t0, elog });
    tries.push(raw);
    const { outcome, disposition } = settleAttempt(run, raw, attempt, tries, elog);
    run.o.repo.finishEpisode(episodeId, disposition, outcome);
    elog.info(
      {
        disposition,
        quality: outcome.quality,
        usd: outcome.costUsd,
        failure: outcome.failure,
        truncated: outcome.truncatedBeforeToolCall,
      },
      "episode.finished",
    );
    if (disposition === "retry") {
      retries++;
      await waitBeforeRetry(run, { scenario, attempt, spent, t0, outcome, retries });
      continue;
    }
    emitFinished(run, scenario, attempt, outcome, t0);
    return { scenario, outcome, disposition, attempts: attempt, episodeId };
  }
}

interface Attempt {
  scenario: string;
  episodeId: string;
  attempt: number;
  row: number;
  t0: number;
  elog: Logger;
}

/** One episode through the runner; a crash of ours becomes a failed outcome, an abort stops here. */
async function runAttempt(run: Run, a: Attempt): Promise<{ outcome: EpisodeOutcome; spent: number }> {
  const { scenario, episodeId, attempt, t0, elog } = a;
  const { signal, evaluationId } = run;
  run.o.repo.startEpisode({ id: episodeId, evaluationId, scenario, attempt: a.row });
  let spent = 0;
  run.emit({ scenario, phase: "starting", attempt, spentUsd: 0, elapsedMs: performance.now() - t0 });
  elog.info("episode.started");
  let outcome: EpisodeOutcome;
  try {
    outcome = await run.o.runner({
      evaluationId,
      episodeId,
      scenario,
      attempt,
      signal,
      onProgress: (p) => {
        if (p.spentUsd !== undefined) spent = p.spentUsd;
        if (p.phase)
          run.emit({ scenario, phase: p.phase, attempt, spentUsd: spent, elapsedMs: performance.now() - t0 });
      },
    });
  } catch (err) {
    if (signal.aborted) throw err;
    elog.error({ err: toValidatorError(err).toJSON() }, "episode.crashed");
    outcome = failedOutcome(scenario, err);
  }
  if (signal.aborted) {
    run.o.repo.finishEpisode(episodeId, signal.reason === SHUTDOWN ? "interrupted" : "aborted", null);
    signal.throwIfAborted();
  }
  return { outcome, spent };
}

/** Final, retry or unresolved; an unresolved failure that follows the pack is charged to it. */
function settleAttempt(
  run: Run,
  outcome: EpisodeOutcome,
  attempt: number,
  tries: EpisodeOutcome[],
  elog: Logger,
) {
  const disposition = dispose(outcome, attempt, run.maxAttempts);
  if (disposition === "unresolved") {
    const packs = followsThePack(tries, run.maxAttempts);
    if (packs) {
      elog.warn({ code: packs.code, attempts: tries.length }, "episode.charged_to_pack");
      return { outcome: chargedToPack(outcome, packs), disposition: "final" as Disposition };
    }
  }
  return { outcome, disposition };
}

async function waitBeforeRetry(
  run: Run,
  r: {
    scenario: string;
    attempt: number;
    spent: number;
    t0: number;
    outcome: EpisodeOutcome;
    retries: number;
  },
): Promise<void> {
  const wait = backoffMs(r.retries, run.o.backoffScale ?? 1, retryReason(r.outcome));
  run.emit({
    scenario: r.scenario,
    phase: "retrying",
    attempt: r.attempt,
    spentUsd: r.spent,
    elapsedMs: performance.now() - r.t0,
    failure: r.outcome.failure,
  });
  await sleep(wait, undefined, { signal: run.signal });
}

function emitFinished(
  run: Run,
  scenario: string,
  attempt: number,
  outcome: EpisodeOutcome,
  t0: number,
): void {
  run.emit({
    scenario,
    phase: outcome.status === "scored" ? "done" : "failed",
    attempt,
    // The meter's spend on this episode, and this episode's own duration (as upstream reports them).
    spentUsd: outcome.costUsd,
    elapsedMs: outcome.timings.totalMs > 0 ? outcome.timings.totalMs : performance.now() - t0,
    quality: outcome.quality,
    timedOut: timedOutOf(outcome),
    ...(outcome.failure ? { failure: outcome.failure } : {}),
  });
}

/** A shutdown leaves the evaluation resumable; any other abort ends it. */
function finishAborted(run: Run): EvaluationResult {
  const { o, evaluationId, signal, log } = run;
  if (signal.reason === SHUTDOWN) {
    o.repo.interruptRunning(evaluationId);
    log.info("evaluation.interrupted_for_shutdown");
    return { kind: "aborted", evaluationId, reason: "shutdown" };
  }
  const reason = typeof signal.reason?.code === "string" ? signal.reason.code : "aborted";
  o.repo.finish(evaluationId, "aborted", reason, null);
  log.warn({ reason }, "evaluation.aborted");
  return { kind: "aborted", evaluationId, reason };
}

function collectSettled(
  run: Run,
  pending: string[],
  settled: PromiseSettledResult<Settled>[],
  done: Map<string, Settled>,
): void {
  settled.forEach((r, k) => {
    const scenario = pending[k]!;
    if (r.status === "fulfilled") done.set(scenario, r.value);
    else {
      // Our own bug escaped the episode loop: it is infra, and it must not score.
      const err = r.reason;
      run.log.error(
        { err: isAbortError(err) ? "aborted" : toValidatorError(err).toJSON(), scenario },
        "evaluation.scenario_crashed",
      );
      done.set(scenario, {
        scenario,
        outcome: failedOutcome(scenario, err),
        disposition: "unresolved",
        attempts: run.maxAttempts,
        episodeId: "",
      });
    }
  });
}

/** Discarded, or scored once: the finishing UPDATE only succeeds while the evaluation is still running. */
function finishEvaluation(run: Run, finals: Settled[], startedAt: string): EvaluationResult {
  const { o, evaluationId, log } = run;
  const discard = discardReason(finals, run.maxAttempts);
  if (discard) {
    o.repo.finish(evaluationId, "discarded", discard.code, { code: discard.code, message: discard.message });
    log.error(discard, "evaluation.discarded");
    return { kind: "discarded", evaluationId, ...discard };
  }
  const scenarios: ScenarioVerdict[] = finals.map((f) => scenarioVerdict(f.outcome, f.attempts, f.episodeId));
  const provenance = o.provenance();
  for (const f of finals) Object.assign(provenance.imageDigests, f.outcome.imageDigests);
  const verdict = buildVerdict({
    evaluationId,
    packHash: o.packHash,
    spec: o.spec,
    scenarios,
    provenance,
    startedAt,
    finishedAt: nowIso(),
  });
  if (!o.repo.finish(evaluationId, "scored", null, verdict)) {
    // Someone (a previous run of this very process) already produced it: the stored verdict is the verdict.
    const stored = o.repo.get(evaluationId);
    log.warn("evaluation.verdict_already_produced");
    if (stored?.verdict) return { kind: "verdict", evaluationId, verdict: stored.verdict as typeof verdict };
  }
  log.info({ score: verdict.score, qualified: verdict.qualified, usd: verdict.costUsd }, "evaluation.scored");
  return { kind: "verdict", evaluationId, verdict };
}
