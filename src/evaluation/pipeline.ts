/**
 * The validator's main job, as one call: pack bytes → verified pack → scenario set → episodes in
 * sandboxes through the meter → verdict in SQLite. The same code serves `eval` (miners and
 * operators at home) and the daemon (challenge epochs).
 *
 * The EvaluationEnvironment is long-lived (one per process): the store, the meter with the
 * operator's key (or the in-process Engy simulator when no LLM_API_KEY is set), the Docker sandbox
 * and the project's images.
 */
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Config } from "../config.js";
import { type EpisodeResult, runEpisode } from "../episode/index.js";
import { isAbortError } from "../errors.js";
import type { Logger } from "../log.js";
import {
  loadAllowlist,
  loadPriceTable,
  Meter,
  type Receipt,
  type ReceiptSink,
  type UsageSummary,
} from "../meter/index.js";
import { loadPack, type Pack } from "../pack/index.js";
import type { ScoreVerdict } from "../platform/index.js";
import { ProjectImages, Sandbox } from "../sandbox/index.js";
import {
  type Catalogue,
  loadCatalogue,
  resolveSpecOrDefault,
  type Scenario,
  selectScenarios,
} from "../scenarios/index.js";
import { LiveStatus } from "../status/live.js";
import { type Db, EvaluationRepo, openDb, ReceiptRepo } from "../store/index.js";
import { HARNESS_NAME, VERSION } from "../version.js";
import { evaluate, newEvaluationId, resumeKeyOf } from "./evaluate.js";
import { longestFirst } from "./schedule.js";
import type {
  EpisodeOutcome,
  EvaluationEvent,
  EvaluationResult,
  ModelUsage,
  Provenance,
  Verdict,
} from "./types.js";
import { rejectionVerdict } from "./verdict.js";

export const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));

export interface EvaluationEnvironment {
  config: Config;
  log: Logger;
  db: Db;
  live: LiveStatus;
  priceTableHash: string;
  meter: Meter;
  sandbox: Sandbox;
  images: ProjectImages;
  catalogue: Catalogue;
  repo: EvaluationRepo;
  /** The upstream the meter forwards to (the simulator's loopback URL when simulated). */
  upstreamUrl: string;
  close(): Promise<void>;
}

export interface OpenEnvironmentOptions {
  log: Logger;
  live?: LiveStatus;
  db?: Db;
  /** Extra per-episode timeouts (tests shorten them). */
  episodeTimeouts?: Parameters<typeof runEpisode>[0]["timeouts"];
}

/** Receipts go to SQLite and, as they are flushed, to the live status (metrics, status page). */
function receiptTee(repo: ReceiptRepo, live: LiveStatus): ReceiptSink {
  return {
    insertMany(receipts: readonly Receipt[]) {
      repo.insertMany(receipts);
      for (const r of receipts) {
        live.meterCall({
          episodeId: r.episode_id,
          model: r.model,
          status: r.status,
          usd: r.usd,
          clamped: r.clamped,
          ...(r.error_code === "cap" || r.status === 402
            ? { refused: "cap" as const }
            : r.error_code === "allowlist"
              ? { refused: "allowlist" as const }
              : {}),
          promptTokens: r.prompt_tokens,
          completionTokens: r.completion_tokens,
          ...(r.ttfb_ms !== null ? { ttfbMs: r.ttfb_ms } : {}),
        });
      }
    },
    listByEpisode: (id) => repo.listByEpisode(id),
  };
}

const timeoutsByEnv = new WeakMap<EvaluationEnvironment, OpenEnvironmentOptions["episodeTimeouts"]>();

export async function openEnvironment(
  config: Config,
  opts: OpenEnvironmentOptions,
): Promise<EvaluationEnvironment> {
  const log = opts.log;
  const live = opts.live ?? new LiveStatus();
  const db = opts.db ?? openDb(config.dbPath, { log });
  const cleanups: Array<() => Promise<void> | void> = [];
  try {
    const [allowlist, prices, catalogue] = await Promise.all([
      loadAllowlist(join(REPO_ROOT, "allowlist.json")),
      loadPriceTable(join(REPO_ROOT, "price-table.json")),
      loadCatalogue(config.evaluation.scenariosDir),
    ]);

    let upstreamUrl = config.llm.baseUrl;
    let apiKey = config.llm.apiKey;
    if (config.llm.simulated) {
      const { startEngySim } = await import("../engy-sim/index.js");
      const sim = await startEngySim({
        host: "127.0.0.1",
        port: 0,
        seed: config.sim.seed,
        ...(config.sim.profilePath ? { profile: config.sim.profilePath } : {}),
        scenariosDir: config.evaluation.scenariosDir,
        latencyScale: config.sim.latencyScale,
        log: log.child({ component: "engy-sim" }),
      });
      cleanups.push(() => sim.close());
      upstreamUrl = sim.url;
      apiKey = "sim-key";
      log.info(
        { url: sim.url, seed: config.sim.seed, latencyScale: config.sim.latencyScale },
        "engy_sim.started",
      );
    }

    const meter = new Meter({
      upstreamUrl,
      ...(apiKey ? { apiKey } : {}),
      allowlist,
      prices,
      receipts: receiptTee(new ReceiptRepo(db), live),
      log: log.child({ component: "meter" }),
      upstreamTimeoutMs: config.llm.upstreamTimeoutMs,
    });
    cleanups.push(() => meter.stop());

    const sandbox = await Sandbox.open({
      socketPath: config.evaluation.dockerSocket,
      poolCidr: config.evaluation.subnetPool,
      ...(config.evaluation.daemonInContainer !== undefined
        ? { daemonInContainer: config.evaluation.daemonInContainer }
        : {}),
      log: log.child({ component: "sandbox" }),
    });
    cleanups.push(() => sandbox.close());

    const images = new ProjectImages(sandbox.docker, {
      repoRoot: REPO_ROOT,
      ...(config.evaluation.agentImage ? { agentImage: config.evaluation.agentImage } : {}),
      ...(config.evaluation.sidecarImage ? { sidecarImage: config.evaluation.sidecarImage } : {}),
      log: log.child({ component: "images" }),
    });

    let closed = false;
    const env: EvaluationEnvironment = {
      config,
      log,
      db,
      live,
      priceTableHash: meter.priceTableHash,
      meter,
      sandbox,
      images,
      catalogue,
      repo: new EvaluationRepo(db),
      upstreamUrl,
      async close() {
        if (closed) return;
        closed = true;
        for (const c of cleanups.reverse()) {
          try {
            await c();
          } catch (err) {
            log.warn({ err: (err as Error).message }, "environment.close_failed");
          }
        }
        if (!opts.db) db.close();
      },
    };
    timeoutsByEnv.set(env, opts.episodeTimeouts);
    return env;
  } catch (err) {
    for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => undefined);
    if (!opts.db) db.close();
    throw err;
  }
}

export interface PackEvaluationRequest {
  packBytes: Uint8Array;
  expectedHash?: string;
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

const usageOf = (
  u: Record<
    string,
    {
      calls: number;
      cost_usd: number;
      prompt_tokens: number;
      cached_tokens: number;
      completion_tokens: number;
    }
  >,
): Record<string, ModelUsage> =>
  Object.fromEntries(
    Object.entries(u).map(([m, x]) => [
      m,
      {
        calls: x.calls,
        costUsd: x.cost_usd,
        promptTokens: x.prompt_tokens,
        cachedTokens: x.cached_tokens,
        completionTokens: x.completion_tokens,
      },
    ]),
  );

/** Calls that reached the provider and came back with a bill. */
function billedCalls(usage: UsageSummary | null): number {
  if (!usage) return 0;
  return Math.max(0, usage.calls - usage.errors);
}

export function outcomeOf(r: EpisodeResult): EpisodeOutcome {
  const images: Record<string, string> = {};
  if (r.images.sidecar) images.sidecar = r.images.sidecar.id;
  if (r.images.scenario) images[`scenario/${r.scenario}`] = r.images.scenario.id;
  return {
    scenario: r.scenario,
    status: r.status,
    quality: r.quality,
    tests: r.tests,
    passed: r.passed,
    ...(r.failure ? { failure: r.failure } : {}),
    costUsd: r.cost_usd,
    byModel: usageOf(r.by_model),
    billedCalls: billedCalls(r.usage),
    truncatedBeforeToolCall: r.truncated_before_tool_call,
    timings: {
      setupMs: Math.round(r.timings.images_ms + r.timings.setup_ms),
      agentMs: Math.round(r.timings.agent_ms),
      verifyMs: Math.round(r.timings.verify_ms),
      totalMs: Math.round(r.timings.total_ms),
    },
    imageDigests: images,
    artifactsDir: r.artifacts.dir,
  };
}

function provenanceOf(env: EvaluationEnvironment, concurrency: number): Provenance {
  const c = env.config;
  return {
    priceTableHash: env.priceTableHash,
    imageDigests: {},
    validatorVersion: VERSION,
    harness: { name: HARNESS_NAME, version: VERSION },
    llm: {
      baseUrl: c.llm.simulated ? "engy-sim" : c.llm.baseUrl,
      simulated: c.llm.simulated,
      defaultModel: c.llm.defaultModel,
    },
    capUsd: c.llm.episodeCapUsd,
    concurrency,
  };
}

/** Which scenarios run, and under which spec number (the platform's, else the local default). */
function scenarioSet(
  env: EvaluationEnvironment,
  req: PackEvaluationRequest,
): { spec: number; scenarios: Scenario[] } {
  const resolved = resolveSpecOrDefault(env.catalogue, req.specNumber ?? env.config.evaluation.specNumber);
  if (resolved.fellBackFrom !== undefined) {
    env.log.warn({ requested: resolved.fellBackFrom, using: resolved.spec }, "evaluation.unknown_spec");
    env.live.raise(
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
  code: string,
  message: string,
  concurrency: number,
): EvaluationResult {
  const id = newEvaluationId();
  const verdict = rejectionVerdict({
    evaluationId: id,
    packHash,
    spec,
    code,
    message,
    provenance: provenanceOf(env, concurrency),
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
  env.repo.finish(id, "rejected", code, verdict);
  env.log.warn({ evaluation: id, pack: packHash.slice(0, 12), code, reason: message }, "evaluation.rejected");
  return { kind: "verdict", evaluationId: id, verdict };
}

/** Build (or find by content hash) every image an evaluation of these scenarios needs. */
export async function prepareImages(
  env: EvaluationEnvironment,
  scenarios: readonly Scenario[],
  opts: {
    signal?: AbortSignal;
    concurrency?: number;
    onImage?: (name: string, built: boolean, ms: number) => void;
  } = {},
): Promise<void> {
  const t0 = performance.now();
  const note = (name: string) => (img: { built: boolean }) =>
    opts.onImage?.(name, img.built, performance.now() - t0);
  await Promise.all([
    env.images.agentBase(opts.signal).then(note("agent-base")),
    env.images.sidecar(opts.signal).then(note("sidecar")),
  ]);
  const queue = [...scenarios];
  const workers = Array.from({ length: Math.max(1, opts.concurrency ?? 2) }, async () => {
    for (let s = queue.shift(); s; s = queue.shift()) {
      await env.images.scenario(s, opts.signal).then(note(`scenario/${s.name}`));
    }
  });
  await Promise.all(workers);
}

/** The scenarios a request would run (for image preparation and display). */
export function scenariosFor(
  env: EvaluationEnvironment,
  req: Pick<PackEvaluationRequest, "specNumber" | "scenarios">,
): {
  spec: number;
  scenarios: Scenario[];
} {
  return scenarioSet(env, req as PackEvaluationRequest);
}

export async function evaluatePack(
  env: EvaluationEnvironment,
  req: PackEvaluationRequest,
): Promise<PackEvaluation> {
  const concurrency = req.concurrency ?? env.config.evaluation.concurrency;
  const { spec, scenarios } = scenarioSet(env, req);
  const loaded = loadPack(req.packBytes, req.expectedHash);
  if (!loaded.ok) {
    const hash = req.expectedHash?.toLowerCase() ?? "0".repeat(64);
    return recordRejection(
      env,
      req,
      spec,
      hash,
      loaded.rejection.code,
      loaded.rejection.message,
      concurrency,
    );
  }
  const pack: Pack = loaded.pack;
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
  const timeouts = timeoutsByEnv.get(env);
  let started = false;
  const onEvent = (e: EvaluationEvent) => {
    if (!started) {
      started = true;
      env.live.startEvaluation({
        evaluationId: e.evaluationId,
        packHash: pack.hash,
        label: req.label,
        epochId: req.epochId ?? null,
        spec,
        capUsd: env.config.llm.episodeCapUsd,
        scenarios: names,
      });
    }
    env.live.onProgress(e);
    req.onEvent?.(e);
  };

  try {
    const result = await evaluate({
      repo: env.repo,
      packHash: pack.hash,
      spec,
      scenarios: names,
      concurrency,
      capUsd: env.config.llm.episodeCapUsd,
      log,
      provenance: () => provenanceOf(env, concurrency),
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
        const scenario = byName.get(er.scenario)!;
        const outDir = outBase ?? join(env.config.dataDir, "runs", er.evaluationId);
        const r = await runEpisode({
          sandbox: env.sandbox,
          images: env.images,
          meter: env.meter,
          pack,
          scenario,
          capUsd: env.config.llm.episodeCapUsd,
          outDir,
          defaultModel: env.config.llm.defaultModel,
          signal: er.signal,
          log,
          episodeId: er.episodeId,
          ...(env.config.evaluation.agentCommand ? { agentCommand: env.config.evaluation.agentCommand } : {}),
          ...(timeouts ? { timeouts } : {}),
          onProgress: (p) => er.onProgress(p),
        });
        const outcome = outcomeOf(r);
        env.live.episodeEnd({
          scenario: r.scenario,
          outcome: r.status === "scored" ? "scored" : "failed",
          ...(r.failure ? { failureClass: r.failure.class, failureCode: r.failure.code } : {}),
        });
        await probe();
        return outcome;
      },
    });
    return result;
  } catch (err) {
    if (isAbortError(err) && ac.signal.aborted) {
      return { kind: "aborted", evaluationId: "", reason: String(ac.signal.reason?.code ?? "aborted") };
    }
    throw err;
  } finally {
    req.signal?.removeEventListener("abort", onOuterAbort);
    env.live.endEvaluation();
  }
}

/** The verdict as the platform wants it posted: the `challenger` block plus provenance fields. */
export function toScoreVerdict(v: Verdict): ScoreVerdict {
  const scenario_results: Record<string, unknown> = {};
  for (const s of v.scenarios) {
    scenario_results[s.scenario] = {
      overall_score: s.quality,
      qualification_gate: s.quality > 0,
      tests: s.tests,
      passed: s.passed,
      cost_usd: Math.round(s.costUsd * 1e6) / 1e6,
      by_model: Object.fromEntries(
        Object.entries(s.byModel).map(([m, u]) => [m, { calls: u.calls, cost_usd: u.costUsd }]),
      ),
      attempts: s.attempts,
      ...(s.failure ? { failure: `${s.failure.class}:${s.failure.code}` } : {}),
      harness: v.provenance.harness.name,
    };
  }
  const digests = Object.entries(v.provenance.imageDigests)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, d]) => `${k}=${d}`)
    .join(",");
  return {
    spec_number: v.spec,
    challenger: {
      score: v.score,
      qualified: v.qualified,
      ...(v.rejected
        ? { rejected: true, rejection_detail: `${v.rejection?.code}: ${v.rejection?.message}` }
        : { scenario_results }),
    },
    llm_base_url: v.provenance.llm.baseUrl,
    // The agent's model name: the policy behind the sidecar decides what answers.
    llm_model: "auto",
    ...(digests ? { harness_image_hash: digests } : {}),
    harness_name: v.provenance.harness.name,
    harness_version: v.provenance.harness.version,
  };
}
