/**
 * The validator's main job, as one call: a verified pack → scenario set → episodes in sandboxes
 * through the meter → verdict in SQLite. The same code serves `eval` (miners and operators at
 * home) and the daemon (challenge epochs); the environment comes from src/environment.
 */
import { join, resolve } from "node:path";
import type { BenchProgress, BenchResolution, PreparedBench } from "../bench/index.js";
import { type EpisodeResult, runEpisode } from "../episode/index.js";
import { type ErrorCode, isAbortError, toValidatorError } from "../errors.js";
import type { Logger } from "../log.js";
import type { Pack, PackResult } from "../pack/index.js";
import { judgePolicyScan, PolicyScanUnencodable } from "../policy/index.js";
import { type EvaluationPlacement, type Placement, singleEngine } from "../pool/index.js";
import { HARNESS_NAME, VERSION } from "../version.js";
import { type EvaluateOptions, evaluate, newEvaluationId, resumeKeyOf } from "./evaluate.js";
import { outcomeOf } from "./outcome.js";
import { longestFirst } from "./schedule.js";
import type {
  BenchFacts,
  EpisodeOutcome,
  EpisodeRequest,
  EvaluationEnvironment,
  EvaluationEvent,
  EvaluationResult,
  Provenance,
} from "./types.js";
import { rejectionVerdict } from "./verdict.js";

export interface PackEvaluationRequest {
  /** loadPack's verdict on the bytes: a verified pack, or the rejection to record as a verdict. */
  pack: PackResult;
  /** The hash a rejection is recorded under (the epoch's expected hash; ignored for a verified pack). */
  rejectedHash?: string;
  label: string;
  /** A subnet spec (the registry bench). */
  specNumber?: number;
  /** A set of the built-in suite (scenarios/suites.json). */
  suite?: string;
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
  /** Image builds and pulls while the bench is prepared. */
  onBenchProgress?: (p: BenchProgress) => void;
  /** The bench is ready: the spec the evaluation runs, its cap and the bench's identity. */
  onPrepared?: (p: { spec: number; capUsd: number; bench: BenchFacts }) => void;
}

export type PackEvaluation = EvaluationResult;

function provenanceOf(
  env: EvaluationEnvironment,
  capUsd: number,
  concurrency: number,
  extra: { suite?: string; bench?: BenchFacts; policyScan?: Record<string, unknown> | null } = {},
): Provenance {
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
    ...(extra.suite !== undefined ? { suite: extra.suite } : {}),
    ...(extra.bench ? { bench: extra.bench } : {}),
    ...(extra.policyScan !== undefined ? { policyScan: extra.policyScan } : {}),
  };
}

/** Which scenarios a request runs, under which spec and cap (the platform's spec, else the bench's default). */
export function resolveRequest(
  env: Pick<EvaluationEnvironment, "bench" | "settings" | "log" | "observer">,
  req: Pick<PackEvaluationRequest, "specNumber" | "suite" | "scenarios">,
): BenchResolution {
  const r = env.bench.resolve({
    specNumber: req.specNumber ?? env.settings.specNumber,
    ...(req.suite !== undefined ? { suite: req.suite } : {}),
    ...(req.scenarios?.length ? { scenarios: req.scenarios } : {}),
  });
  // Upstream's fallback (resolve_eval_spec): the local spec, with a warning here and an alarm on the
  // status page until an epoch names a spec this validator knows again.
  if (r.fellBackFrom !== undefined) {
    env.log.warn({ requested: r.fellBackFrom, using: r.spec }, "evaluation.unknown_spec");
    env.observer.raise(
      "unknown_spec",
      `spec ${String(r.fellBackFrom)} is not known to this validator; evaluated spec ${r.spec} instead (upgrade?)`,
    );
  } else env.observer.clear?.("unknown_spec");
  return r;
}

/** A pack rejected before any episode: recorded like any evaluation, reported as a verdict with score 0. */
function recordRejection(
  env: EvaluationEnvironment,
  req: PackEvaluationRequest,
  spec: number,
  packHash: string,
  rejection: { code: ErrorCode; message: string },
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

/** What the steps of one pack's evaluation share, once the bench is prepared. */
interface PackRun {
  env: EvaluationEnvironment;
  req: PackEvaluationRequest;
  pack: Pack;
  spec: number;
  capUsd: number;
  suite: { suite?: string };
  names: string[];
  prepared: PreparedBench;
  byName: Map<string, PreparedBench["scenarios"][number]>;
  placement: EvaluationPlacement;
  epochId: string | undefined;
  log: Logger;
  outBase: string | undefined;
  watch: EpochWatch;
}

export async function evaluatePack(
  env: EvaluationEnvironment,
  req: PackEvaluationRequest,
): Promise<PackEvaluation> {
  // A pool of engines bounds itself by its slots; the default engine by the evaluation's concurrency.
  const concurrency = req.concurrency ?? env.pool?.capacity ?? env.settings.concurrency;
  const resolved = resolveRequest(env, req);
  // The cap is the spec's, read once: every episode, the verdict and the live view use this value.
  const capUsd = resolved.episodeCapUsd;
  const suite = resolved.suite !== undefined ? { suite: resolved.suite } : {};
  if (!req.pack.ok) {
    const hash = req.rejectedHash?.toLowerCase() ?? "0".repeat(64);
    return recordRejection(
      env,
      req,
      resolved.spec,
      hash,
      req.pack.rejection,
      provenanceOf(env, capUsd, concurrency, suite),
    );
  }
  const ready = await prepareBench(env, req, resolved);
  if ("result" in ready) return ready.result;
  const { prepared } = ready;
  const bench = benchFactsOf(env, prepared);
  notifyPrepared(env, req, { spec: resolved.spec, capUsd, bench });
  const pack = req.pack.pack;
  const names = [...resolved.names];
  const policyScan = scanOf(pack.policyFiles, names, env);
  const provenance = () => provenanceOf(env, capUsd, concurrency, { ...suite, bench, policyScan });
  const placement = env.pool?.forEvaluation() ?? singleEngine(env.sandbox);
  if (env.pool) await prefetchImages(env, prepared, req.onBenchProgress);
  const epochId = req.epochId === undefined ? undefined : String(req.epochId);
  const watch = watchEpoch(env, req);
  const run: PackRun = {
    env,
    req,
    pack,
    spec: resolved.spec,
    capUsd,
    suite,
    names,
    prepared,
    byName: new Map(prepared.scenarios.map((s) => [s.name, s])),
    placement,
    epochId,
    log: env.log.child({ pack: pack.hash.slice(0, 12), ...(epochId ? { epoch: epochId } : {}) }),
    outBase: req.outDir ? resolve(req.outDir) : undefined,
    watch,
  };
  try {
    return await evaluate(evaluateOptionsOf(run, concurrency, provenance));
  } catch (err) {
    if (isAbortError(err) && watch.signal.aborted) {
      return { kind: "aborted", evaluationId: "", reason: String(watch.signal.reason?.code ?? "aborted") };
    }
    throw err;
  } finally {
    watch.dispose();
    env.observer.endEvaluation();
  }
}

/** Images built or pulled and probes run; a failure is an abort or a discard (nothing can be said of the pack). */
async function prepareBench(
  env: EvaluationEnvironment,
  req: PackEvaluationRequest,
  resolved: BenchResolution,
): Promise<{ prepared: PreparedBench } | { result: EvaluationResult }> {
  try {
    const prepared = await env.bench.prepare(resolved, {
      ...(req.signal ? { signal: req.signal } : {}),
      onProgress: (p) => {
        env.observer.benchProgress?.(p);
        req.onBenchProgress?.(p);
      },
    });
    return { prepared };
  } catch (err) {
    if (isAbortError(err) || req.signal?.aborted)
      return {
        result: { kind: "aborted", evaluationId: "", reason: String(req.signal?.reason?.code ?? "aborted") },
      };
    const e = toValidatorError(err);
    env.log.error({ code: e.code, err: e.message }, "evaluation.bench_unavailable");
    env.observer.raise("bench_unavailable", `${env.bench.label}: ${e.message}`, "error");
    env.observer.endEvaluation();
    return { result: { kind: "discarded", evaluationId: "", code: e.code, message: e.message } };
  }
}

/** The bench's identity, as the verdict's provenance reports it. */
function benchFactsOf(env: EvaluationEnvironment, prepared: PreparedBench): BenchFacts {
  const p = prepared.provenance;
  return {
    source: env.bench.kind,
    ...(env.bench.kind === "registry" ? { ref: env.bench.label.replace(/^trajrl-bench /, "") } : {}),
    harnessImageHash: p.harnessImageHash,
    ...(p.benchImageHash ? { benchImageHash: p.benchImageHash } : {}),
    ...(p.benchVersion ? { benchVersion: p.benchVersion } : {}),
    ...(p.harnessName ? { harnessName: p.harnessName } : {}),
    ...(p.harnessVersion ? { harnessVersion: p.harnessVersion } : {}),
  };
}

/** The caller's hook; a failing one is logged, never allowed to stop the evaluation. */
function notifyPrepared(
  env: EvaluationEnvironment,
  req: PackEvaluationRequest,
  p: { spec: number; capUsd: number; bench: BenchFacts },
): void {
  try {
    req.onPrepared?.(p);
  } catch (err) {
    env.log.warn({ err: (err as Error).message }, "evaluation.on_prepared_failed");
  }
}

/** One controller for the run: the caller's signal, and our own abort when the epoch moves on. */
interface EpochWatch {
  signal: AbortSignal;
  /** Aborts the run with `epoch_changed` when the caller says its epoch is no longer current. */
  probe(): Promise<void>;
  dispose(): void;
}

function watchEpoch(env: EvaluationEnvironment, req: PackEvaluationRequest): EpochWatch {
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
  return { signal: ac.signal, probe, dispose: () => req.signal?.removeEventListener("abort", onOuterAbort) };
}

function evaluateOptionsOf(run: PackRun, concurrency: number, provenance: () => Provenance): EvaluateOptions {
  const { env, req, pack, spec, names, epochId } = run;
  return {
    repo: env.repo,
    packHash: pack.hash,
    spec,
    scenarios: names,
    concurrency,
    capUsd: run.capUsd,
    log: run.log,
    provenance,
    signal: run.watch.signal,
    onEvent: observerFeed(run),
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
    dispatchOrder: (pending) => longestFirstOf(run, pending),
    runner: (er) => runPlacedEpisode(run, er),
  };
}

/** The first event opens the evaluation on the status observer; every event goes to it and to the caller. */
function observerFeed(run: PackRun): (e: EvaluationEvent) => void {
  const { env, req } = run;
  let started = false;
  return (e) => {
    if (!started) {
      started = true;
      env.observer.startEvaluation({
        evaluationId: e.evaluationId,
        packHash: run.pack.hash,
        label: req.label,
        epochId: req.epochId ?? null,
        spec: run.spec,
        ...run.suite,
        capUsd: run.capUsd,
        scenarios: run.names,
      });
    }
    env.observer.onProgress(e);
    req.onEvent?.(e);
  };
}

/** Longest first, from what this database measured of each scenario (else its time limits). */
function longestFirstOf(run: PackRun, pending: string[]): string[] {
  return longestFirst(pending, {
    history: run.env.repo.recentDurations(pending),
    limitsMs: new Map(
      pending.map((n) => {
        const t = run.byName.get(n)!.task;
        return [n, (t.agent.timeout_sec + t.verifier.timeout_sec) * 1000];
      }),
    ),
  });
}

/** The evaluation's runner: one attempt placed on an engine, between two probes of the epoch. */
async function runPlacedEpisode(run: PackRun, er: EpisodeRequest): Promise<EpisodeOutcome> {
  await run.watch.probe();
  er.signal.throwIfAborted();
  const r = await run.placement.run(
    er.scenario,
    er.signal,
    (where) => runEpisodeOn(run, er, where),
    er.episodeId,
  );
  run.env.observer.episodeEnd({
    scenario: r.scenario,
    outcome: r.status === "scored" ? "scored" : "failed",
    ...(r.failure ? { failureClass: r.failure.class, failureCode: r.failure.code } : {}),
  });
  await run.watch.probe();
  return outcomeOf(r);
}

/** One episode on the engine the placement chose. */
function runEpisodeOn(run: PackRun, er: EpisodeRequest, where: Placement): Promise<EpisodeResult> {
  const settings = run.env.settings;
  return runEpisode({
    sandbox: where.sandbox,
    images: where.images(run.prepared.images),
    runtime: run.prepared.runtime,
    strictProvenance: settings.strictProvenance,
    meter: run.env.meter,
    pack: run.pack,
    scenario: run.byName.get(er.scenario)!,
    capUsd: run.capUsd,
    outDir: run.outBase ?? join(settings.dataDir, "runs", er.evaluationId),
    defaultModel: settings.defaultModel,
    signal: where.signal,
    log: run.log,
    episodeId: er.episodeId,
    ...(settings.agentCommand ? { agentCommand: settings.agentCommand } : {}),
    ...(settings.episodeTimeouts ? { timeouts: settings.episodeTimeouts } : {}),
    ...(settings.agentEnv ? { agentEnv: settings.agentEnv } : {}),
    onProgress: (p) => er.onProgress(p),
  });
}
/**
 * Every image the episodes will use (known at once: prepare built or pulled them), placed on the
 * pool's other engines in one copy each, in the background; their first episodes wait for it.
 */
async function prefetchImages(
  env: EvaluationEnvironment,
  prepared: PreparedBench,
  onProgress: PackEvaluationRequest["onBenchProgress"],
): Promise<void> {
  try {
    const images = await Promise.all([
      prepared.images.sidecar(),
      ...prepared.scenarios.map((s) => prepared.images.scenario(s)),
    ]);
    env.pool?.prefetch(images, onProgress);
  } catch (err) {
    env.log.warn({ err: (err as Error).message }, "evaluation.prefetch_failed");
  }
}

/** Upstream's static scan of the policy files, reported with the score (a file it cannot encode: null). */
function scanOf(
  files: Readonly<Record<string, string>>,
  names: readonly string[],
  env: Pick<EvaluationEnvironment, "log">,
): Record<string, unknown> | null {
  try {
    return judgePolicyScan(files, names) as Record<string, unknown> | null;
  } catch (err) {
    if (err instanceof PolicyScanUnencodable) {
      env.log.warn({ err: err.message }, "evaluation.policy_scan_unencodable");
      return null;
    }
    throw err;
  }
}
