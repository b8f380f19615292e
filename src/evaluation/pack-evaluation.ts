/**
 * The validator's main job, as one call: a verified pack → scenario set → episodes in sandboxes
 * through the meter → verdict in SQLite. The same code serves `eval` (miners and operators at
 * home) and the daemon (challenge epochs); the environment comes from src/environment.
 */
import { join, resolve } from "node:path";
import { runEpisode } from "../episode/index.js";
import { isAbortError } from "../errors.js";
import type { PackResult } from "../pack/index.js";
import { resolveSpecOrDefault, type Scenario, selectScenarios } from "../scenarios/index.js";
import { HARNESS_NAME, VERSION } from "../version.js";
import { evaluate, newEvaluationId, resumeKeyOf } from "./evaluate.js";
import { outcomeOf } from "./outcome.js";
import { longestFirst } from "./schedule.js";
import type { EvaluationEnvironment, EvaluationEvent, EvaluationResult, Provenance } from "./types.js";
import { rejectionVerdict } from "./verdict.js";

export interface PackEvaluationRequest {
  /** loadPack's verdict on the bytes: a verified pack, or the rejection to record as a verdict. */
  pack: PackResult;
  /** The hash a rejection is recorded under (the epoch's expected hash; ignored for a verified pack). */
  rejectedHash?: string;
  label: string;
  specNumber?: number;
  scenarios?: string[];
  source: "local" | "epoch";
  epochId?: number;
  /** Per-episode artifacts go to outDir/<scenario>/; default DATA_DIR/runs/<evaluationId>. */
  outDir?: string;
  concurrency?: number;
  signal?: AbortSignal;
  onEvent?: (e: EvaluationEvent) => void;
  /** Probed before each episode starts and after each completes; false aborts with "epoch_changed". */
  stillCurrent?: () => Promise<boolean>;
  /** Scales the retry back-off (tests). */
  backoffScale?: number;
}

export type PackEvaluation = EvaluationResult;

function provenanceOf(env: EvaluationEnvironment, capUsd: number, concurrency: number): Provenance {
  const s = env.settings;
  return {
    priceTableHash: env.meter.priceTableHash,
    imageDigests: {},
    validatorVersion: VERSION,
    harness: { name: HARNESS_NAME, version: VERSION },
    llm: {
      baseUrl: s.llm.simulated ? "engy-sim" : s.llm.baseUrl,
      simulated: s.llm.simulated,
      defaultModel: s.defaultModel,
    },
    capUsd,
    concurrency,
  };
}

/** Which scenarios a request runs, and under which spec number (the platform's, else the local default). */
export function scenariosFor(
  env: Pick<EvaluationEnvironment, "catalogue" | "settings" | "log" | "observer">,
  req: Pick<PackEvaluationRequest, "specNumber" | "scenarios">,
): { spec: number; scenarios: Scenario[] } {
  const resolved = resolveSpecOrDefault(env.catalogue, req.specNumber ?? env.settings.specNumber);
  if (resolved.fellBackFrom !== undefined) {
    env.log.warn({ requested: resolved.fellBackFrom, using: resolved.spec }, "evaluation.unknown_spec");
    env.observer.raise(
      "unknown_spec",
      `spec ${resolved.fellBackFrom} is not in this validator's scenarios/specs.json; evaluated spec ${resolved.spec} instead (upgrade?)`,
    );
  }
  if (req.scenarios && req.scenarios.length > 0) {
    return { spec: resolved.spec, scenarios: selectScenarios(env.catalogue, req.scenarios) };
  }
  return resolved;
}

/** A pack rejected before any episode: recorded like any evaluation, reported as a verdict with score 0. */
function recordRejection(
  env: EvaluationEnvironment,
  req: PackEvaluationRequest,
  spec: number,
  packHash: string,
  rejection: { code: string; message: string },
  provenance: Provenance,
): EvaluationResult {
  const id = newEvaluationId();
  const verdict = rejectionVerdict({
    evaluationId: id,
    packHash,
    spec,
    code: rejection.code,
    message: rejection.message,
    provenance,
    at: new Date().toISOString(),
  });
  env.repo.create({
    id,
    resumeKey: `rejected:${id}`,
    packHash,
    spec,
    scenarios: [],
    source: req.source,
    epochId: req.epochId === undefined ? null : String(req.epochId),
    meta: { label: req.label },
  });
  env.repo.finish(id, "rejected", rejection.code, verdict);
  env.log.warn(
    { evaluation: id, pack: packHash.slice(0, 12), code: rejection.code, reason: rejection.message },
    "evaluation.rejected",
  );
  return { kind: "verdict", evaluationId: id, verdict };
}

export async function evaluatePack(
  env: EvaluationEnvironment,
  req: PackEvaluationRequest,
): Promise<PackEvaluation> {
  const settings = env.settings;
  const concurrency = req.concurrency ?? settings.concurrency;
  // The cap is read once: every episode, the verdict's provenance and the live view use this value.
  const capUsd = settings.episodeCapUsd;
  const { spec, scenarios } = scenariosFor(env, req);
  const provenance = () => provenanceOf(env, capUsd, concurrency);
  if (!req.pack.ok) {
    const hash = req.rejectedHash?.toLowerCase() ?? "0".repeat(64);
    return recordRejection(env, req, spec, hash, req.pack.rejection, provenance());
  }
  const pack = req.pack.pack;
  const byName = new Map(scenarios.map((s) => [s.name, s]));
  const names = scenarios.map((s) => s.name);
  const epochId = req.epochId === undefined ? undefined : String(req.epochId);

  // One controller for the run: the caller's signal, and our own epoch-moved-on abort.
  const ac = new AbortController();
  const onOuterAbort = () => ac.abort(req.signal?.reason);
  if (req.signal?.aborted) onOuterAbort();
  req.signal?.addEventListener("abort", onOuterAbort, { once: true });
  const probe = async () => {
    if (!req.stillCurrent || ac.signal.aborted) return;
    let current = true;
    try {
      current = await req.stillCurrent();
    } catch (err) {
      // A failed probe must not abort a good evaluation.
      env.log.warn({ err: (err as Error).message }, "evaluation.still_current_probe_failed");
    }
    if (!current && !ac.signal.aborted) {
      env.log.warn({ epoch: req.epochId }, "evaluation.epoch_changed");
      ac.abort({ code: "epoch_changed", message: "the challenge epoch moved on" });
    }
  };

  const log = env.log.child({ pack: pack.hash.slice(0, 12), ...(epochId ? { epoch: epochId } : {}) });
  const outBase = req.outDir ? resolve(req.outDir) : undefined;
  let started = false;
  const onEvent = (e: EvaluationEvent) => {
    if (!started) {
      started = true;
      env.observer.startEvaluation({
        evaluationId: e.evaluationId,
        packHash: pack.hash,
        label: req.label,
        epochId: req.epochId ?? null,
        spec,
        capUsd,
        scenarios: names,
      });
    }
    env.observer.onProgress(e);
    req.onEvent?.(e);
  };

  try {
    return await evaluate({
      repo: env.repo,
      packHash: pack.hash,
      spec,
      scenarios: names,
      concurrency,
      capUsd,
      log,
      provenance,
      signal: ac.signal,
      onEvent,
      source: req.source,
      label: req.label,
      ...(epochId !== undefined ? { epochId } : {}),
      resumeKey: resumeKeyOf({
        packHash: pack.hash,
        spec,
        scenarios: names,
        source: req.source,
        ...(epochId !== undefined ? { epochId } : {}),
      }),
      ...(req.backoffScale !== undefined ? { backoffScale: req.backoffScale } : {}),
      // Longest first, from what this database measured of each scenario (else its time limits).
      dispatchOrder: (pending) =>
        longestFirst(pending, {
          history: env.repo.recentDurations(pending),
          limitsMs: new Map(
            pending.map((n) => {
              const t = byName.get(n)!.task;
              return [n, (t.agent.timeout_sec + t.verifier.timeout_sec) * 1000];
            }),
          ),
        }),
      runner: async (er) => {
        await probe();
        er.signal.throwIfAborted();
        const r = await runEpisode({
          sandbox: env.sandbox,
          images: env.images,
          meter: env.meter,
          pack,
          scenario: byName.get(er.scenario)!,
          capUsd,
          outDir: outBase ?? join(settings.dataDir, "runs", er.evaluationId),
          defaultModel: settings.defaultModel,
          signal: er.signal,
          log,
          episodeId: er.episodeId,
          ...(settings.agentCommand ? { agentCommand: settings.agentCommand } : {}),
          ...(settings.episodeTimeouts ? { timeouts: settings.episodeTimeouts } : {}),
          onProgress: (p) => er.onProgress(p),
        });
        env.observer.episodeEnd({
          scenario: r.scenario,
          outcome: r.status === "scored" ? "scored" : "failed",
          ...(r.failure ? { failureClass: r.failure.class, failureCode: r.failure.code } : {}),
        });
        await probe();
        return outcomeOf(r);
      },
    });
  } catch (err) {
    if (isAbortError(err) && ac.signal.aborted) {
      return { kind: "aborted", evaluationId: "", reason: String(ac.signal.reason?.code ?? "aborted") };
    }
    throw err;
  } finally {
    req.signal?.removeEventListener("abort", onOuterAbort);
    env.observer.endEvaluation();
  }
}
