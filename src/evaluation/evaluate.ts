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

export async function evaluate(o: EvaluateOptions): Promise<EvaluationResult> {
  const maxAttempts = o.maxAttempts ?? MAX_ATTEMPTS;
  const resumeKey = o.resumeKey ?? resumeKeyOf(o);
  const signal = o.signal ?? new AbortController().signal;

  let evaluation = o.repo.findResumable(resumeKey);
  const resumed = evaluation !== undefined;
  if (!evaluation) {
    evaluation = o.repo.create({
      id: newEvaluationId(),
      resumeKey,
      packHash: o.packHash,
      spec: o.spec,
      scenarios: o.scenarios,
      source: o.source ?? "local",
      epochId: o.epochId ?? null,
      meta: { capUsd: o.capUsd, concurrency: o.concurrency, ...(o.label ? { label: o.label } : {}) },
    });
  }
  const evaluationId = evaluation.id;
  const log = o.log.child({ evaluation: evaluationId, pack: o.packHash.slice(0, 12) });
  const startedAt = (resumed ? evaluation.createdAt : undefined) ?? nowIso();

  // What a previous process finished is kept; what it left running is re-run.
  const done = new Map<string, Settled>();
  // Per scenario: rows so far, re-runs so far, and the outcomes of those re-runs (the pack-following rule reads them).
  const history = new Map<string, { rows: number; retries: number; tries: EpisodeOutcome[] }>();
  if (resumed) {
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
  } else {
    log.info({ scenarios: o.scenarios, spec: o.spec, concurrency: o.concurrency }, "evaluation.started");
  }

  const emit = (e: Omit<EvaluationEvent, "evaluationId" | "capUsd">) => {
    try {
      o.onEvent?.({ evaluationId, capUsd: o.capUsd, ...e });
    } catch (err) {
      log.warn({ err }, "evaluation.event_listener_failed");
    }
  };
  for (const s of o.scenarios) {
    const d = done.get(s);
    if (d) {
      emit({
        scenario: s,
        phase: d.outcome.status === "scored" ? "done" : "failed",
        attempt: d.attempts,
        spentUsd: d.outcome.costUsd,
        elapsedMs: d.outcome.timings.totalMs,
        quality: d.outcome.quality,
        timedOut: timedOutOf(d.outcome),
      });
    } else emit({ scenario: s, phase: "queued", attempt: 0, spentUsd: 0, elapsedMs: 0 });
  }

  const runScenario = async (scenario: string): Promise<Settled> => {
    const h = history.get(scenario) ?? { rows: 0, retries: 0, tries: [] };
    let row = h.rows;
    let retries = h.retries;
    const tries = [...h.tries];
    const t0 = performance.now();
    while (true) {
      signal.throwIfAborted();
      row++;
      const attempt = retries + 1;
      const episodeId = `${evaluationId}.${scenario}.${row}`;
      o.repo.startEpisode({ id: episodeId, evaluationId, scenario, attempt: row });
      let spent = 0;
      emit({ scenario, phase: "starting", attempt, spentUsd: 0, elapsedMs: performance.now() - t0 });
      const elog = log.child({ scenario, episode: episodeId, attempt });
      elog.info("episode.started");
      let outcome: EpisodeOutcome;
      try {
        outcome = await o.runner({
          evaluationId,
          episodeId,
          scenario,
          attempt,
          signal,
          onProgress: (p) => {
            if (p.spentUsd !== undefined) spent = p.spentUsd;
            if (p.phase)
              emit({ scenario, phase: p.phase, attempt, spentUsd: spent, elapsedMs: performance.now() - t0 });
          },
        });
      } catch (err) {
        if (signal.aborted) throw err;
        elog.error({ err: toValidatorError(err).toJSON() }, "episode.crashed");
        outcome = failedOutcome(scenario, err);
      }
      if (signal.aborted) {
        o.repo.finishEpisode(episodeId, signal.reason === SHUTDOWN ? "interrupted" : "aborted", null);
        signal.throwIfAborted();
      }
      let disposition = dispose(outcome, attempt, maxAttempts);
      tries.push(outcome);
      if (disposition === "unresolved") {
        const packs = followsThePack(tries, maxAttempts);
        if (packs) {
          outcome = chargedToPack(outcome, packs);
          disposition = "final";
          elog.warn({ code: packs.code, attempts: tries.length }, "episode.charged_to_pack");
        }
      }
      o.repo.finishEpisode(episodeId, disposition, outcome);
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
        const wait = backoffMs(retries, o.backoffScale ?? 1, retryReason(outcome));
        emit({
          scenario,
          phase: "retrying",
          attempt,
          spentUsd: spent,
          elapsedMs: performance.now() - t0,
          failure: outcome.failure,
        });
        await sleep(wait, undefined, { signal });
        continue;
      }
      emit({
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
      return { scenario, outcome, disposition, attempts: attempt, episodeId };
    }
  };

  const limit = pLimit(o.concurrency);
  const remaining = o.scenarios.filter((s) => !done.has(s));
  const ordered = o.dispatchOrder?.(remaining) ?? remaining;
  // Whatever the hook returns, each pending scenario runs exactly once.
  const pending =
    ordered.length === remaining.length &&
    new Set(ordered).size === remaining.length &&
    ordered.every((s) => remaining.includes(s))
      ? ordered
      : remaining;
  const settled = await Promise.allSettled(pending.map((s) => limit(() => runScenario(s))));

  if (signal.aborted) {
    limit.clearQueue();
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

  settled.forEach((r, k) => {
    const scenario = pending[k]!;
    if (r.status === "fulfilled") done.set(scenario, r.value);
    else {
      // Our own bug escaped the episode loop: it is infra, and it must not score.
      const err = r.reason;
      log.error(
        { err: isAbortError(err) ? "aborted" : toValidatorError(err).toJSON(), scenario },
        "evaluation.scenario_crashed",
      );
      done.set(scenario, {
        scenario,
        outcome: failedOutcome(scenario, err),
        disposition: "unresolved",
        attempts: maxAttempts,
        episodeId: "",
      });
    }
  });

  const finals = o.scenarios.map((s) => done.get(s)!);
  const discard = discardReason(finals, maxAttempts);
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
