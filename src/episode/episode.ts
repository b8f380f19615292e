/**
 * One episode: one scenario run for one pack. Mint a meter token → images → two internal
 * networks → the policy sidecar (healthy within 60 s) → the scenario container running the agent
 * (deadline and watchdog) → the one deliverable graded in a fresh verifier → artifacts. Every
 * container and network is removed on every exit path, and every outcome is an EpisodeResult
 * (this function does not throw for failures of the episode itself). What differs between the
 * built-in suite and the registry bench is the episode's kind (episode-kind.ts), chosen once.
 */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { isAbortError, toValidatorError } from "../errors.js";
import { type Logger, silentLogger } from "../log.js";
import type { Listener } from "../meter/index.js";
import { type BuiltImage, type EpisodeTopology, safeName, uniqueName } from "../sandbox/index.js";
import { runAgent } from "./agent.js";
import { ArtifactWriter } from "./artifacts.js";
import type { Collected } from "./collect.js";
import { type EpisodeAgent, type EpisodeKind, episodeKindOf } from "./episode-kind.js";
import { writeGradingRecord } from "./grading-record.js";
import { finishEpisode } from "./outcome.js";
import { EpisodeRun } from "./run-context.js";
import { awaitHealthy, createSidecar, type Sidecar } from "./sidecar.js";
import type { EpisodeResult, EpisodeTimeouts, RunEpisodeOptions } from "./types.js";
import type { GradeResult } from "./verifier.js";

export { POLICY_PORT } from "./sidecar.js";

/** What one episode holds while it runs: its settings, resolved once, and what it produced so far. */
interface Episode {
  opts: RunEpisodeOptions;
  run: EpisodeRun;
  kind: EpisodeKind;
  log: Logger;
  startedAt: number;
  /** Container and network names of this episode start with it. */
  base: string;
  /** The engine's restart counter when the episode began. */
  engineEpoch: number;
  timeouts: EpisodeTimeouts;
  agentMs: number;
  verifierMs: number;
  healthMs: number;
  listener: Listener | undefined;
  policyLog: string;
  collected: Collected | undefined;
  grade: GradeResult | undefined;
}

export async function runEpisode(opts: RunEpisodeOptions): Promise<EpisodeResult> {
  const ep = openEpisode(opts);
  try {
    await runSteps(ep);
  } catch (err) {
    recordThrow(ep, err);
  } finally {
    await closeEpisode(ep);
  }
  noteEngineRestart(ep);
  return await finish(ep);
}

/** Ids, logger, deadlines, artifacts and the kind of episode, all settled before anything runs. */
function openEpisode(opts: RunEpisodeOptions): Episode {
  const startedAt = performance.now();
  const { sandbox, meter, pack, scenario } = opts;
  const episodeId = opts.episodeId ?? `ep-${randomBytes(6).toString("hex")}`;
  const log = (opts.log ?? silentLogger).child({
    episode: episodeId,
    scenario: scenario.name,
    pack: pack.hash.slice(0, 12),
  });
  const to = opts.timeouts ?? {};
  const artifacts = new ArtifactWriter(join(opts.outDir, safeName(scenario.name, 80)), log);
  const run = new EpisodeRun(episodeId, sandbox, meter, pack, scenario, artifacts, log, opts.onProgress);
  const ep: Episode = {
    opts,
    run,
    kind: episodeKindOf(opts.runtime ?? { kind: "builtin" as const }, opts),
    log,
    startedAt,
    base: `trajrl-${uniqueName(episodeId, 60)}`,
    // An engine restart kills our containers from outside: whatever they did then says nothing of the policy.
    engineEpoch: sandbox.engineWatch.epoch,
    timeouts: to,
    agentMs: to.agentMs ?? scenario.task.agent.timeout_sec * 1000,
    verifierMs: to.verifierMs ?? scenario.task.verifier.timeout_sec * 1000,
    healthMs: to.healthMs ?? 60_000,
    listener: undefined,
    policyLog: "",
    collected: undefined,
    grade: undefined,
  };
  return ep;
}

/** The episode's steps in order; a policy that never gets healthy ends it after the sidecar. */
async function runSteps(ep: Episode): Promise<void> {
  const { opts, run } = ep;
  opts.signal?.throwIfAborted();
  await run.artifacts.init();
  run.token = opts.meter.mint(run.id, opts.capUsd);
  const images = await buildImages(ep);
  const ts = performance.now();
  const lap = (phase: string) =>
    ep.log.debug({ phase, ms: Math.round(performance.now() - ts) }, "episode.phase");
  const topo = await openTopology(ep);
  lap("topology");
  const tSidecar = performance.now();
  const { sidecar, agent } = await startSidecarAndAgent(ep, images, topo, lap);
  const health = await awaitHealthy(run, sidecar, ep.healthMs, opts.signal);
  ep.policyLog = health.policyLog;
  if (!health.healthy) return;
  run.result.timings.policy_setup_ms = performance.now() - tSidecar;
  run.result.timings.setup_ms = performance.now() - ts;
  ep.log.info({ setup_ms: Math.round(run.result.timings.setup_ms) }, "episode.agent.started");
  const collected = await agentStep(ep, agent, sidecar);
  const freeing = freeAgentSide(ep, sidecar, agent);
  // The verifier: only a regular file crosses; anything else scores 0 without grading.
  const tv = performance.now();
  run.progress({ phase: "verifying", spentUsd: run.result.usage?.cost_usd ?? 0 });
  ep.grade = await gradeStep(ep, collected, images.scenario);
  run.result.timings.verify_ms = performance.now() - tv;
  await freeing;
}

/** Images first (normally cached by content hash; the first episode of a run may build). */
async function buildImages(ep: Episode): Promise<{ sidecar: BuiltImage; scenario: BuiltImage }> {
  const { opts, run } = ep;
  const ti = performance.now();
  const [sidecar, scenario] = await Promise.all([
    opts.images.sidecar(opts.signal),
    opts.images.scenario(opts.scenario, opts.signal),
  ]);
  run.result.images = {
    sidecar: { ref: sidecar.ref, id: sidecar.id },
    scenario: { ref: scenario.ref, id: scenario.id },
  };
  run.result.timings.images_ms = performance.now() - ti;
  return { sidecar, scenario };
}

/**
 * Topology and the meter's listener for this episode (opened once the images exist: the scope's
 * expiry label must not count a long first build).
 */
async function openTopology(ep: Episode): Promise<EpisodeTopology> {
  const { opts, run } = ep;
  run.scope = opts.sandbox.openScope(
    run.id,
    ep.healthMs + ep.agentMs + ep.verifierMs + 15 * 60_000,
    opts.scenario,
  );
  const topo = await opts.sandbox.createTopology(run.scope);
  ep.listener = await opts.meter.listen(topo.meterBindHost, topo.meterPort, run.token!);
  return topo;
}

/** The sidecar, and the scenario container created while the policy boots (held at its gate). */
async function startSidecarAndAgent(
  ep: Episode,
  images: { sidecar: BuiltImage; scenario: BuiltImage },
  topo: EpisodeTopology,
  lap: (phase: string) => void,
): Promise<{ sidecar: Sidecar; agent: EpisodeAgent }> {
  const { run, kind, base } = ep;
  const sidecar = await createSidecar(run, {
    image: images.sidecar,
    topo,
    base,
    defaultModel: ep.opts.defaultModel,
    launch: () => kind.sidecarLaunch(run, images.sidecar),
  });
  lap("sidecar.created");
  const [, agent] = await Promise.all([
    sidecar.start().then(() => lap("sidecar.started")),
    kind.createAgent(run, { image: images.scenario, topo, base }).then((a) => {
      lap("agent.waiting");
      return a;
    }),
  ]);
  return { sidecar, agent };
}

/** Release the agent, wait for its end, and collect what it left. */
async function agentStep(ep: Episode, agent: EpisodeAgent, sidecar: Sidecar): Promise<Collected> {
  const { opts, run } = ep;
  const ended = await runAgent(run, agent.process, sidecar, {
    agentMs: ep.agentMs,
    timeouts: ep.timeouts,
    disk: ep.kind.disk,
    signal: opts.signal,
  });
  opts.signal?.throwIfAborted();
  run.result.timings.agent_ms = ended.agentMs;
  const collected = await agent.collect(run, sidecar, ended);
  ep.collected = collected;
  ep.policyLog = collected.policyLog;
  return collected;
}

/**
 * The meter's listener and the two networks are not needed by the verifier: their teardown
 * overlaps the grading.
 */
function freeAgentSide(ep: Episode, sidecar: Sidecar, agent: EpisodeAgent): Promise<void> {
  const { run } = ep;
  return Promise.all([run.engine.remove(sidecar.name), run.engine.remove(agent.process.name)])
    .then(async () => {
      await ep.listener?.close().catch(() => undefined);
      await run.scope?.releaseNetworks();
    })
    .catch((err) => ep.log.warn({ err: (err as Error).message }, "episode.remove.failed"));
}

/** A throw out of the steps is a failure of the episode: aborted, or classed by its error. */
function recordThrow(ep: Episode, err: unknown): void {
  const { opts, run } = ep;
  const aborted = isAbortError(err) || (opts.signal?.aborted ?? false);
  const e = toValidatorError(err);
  run.fail(
    aborted
      ? {
          class: "infra",
          code: "aborted",
          message: "the episode was aborted (shutdown or evaluation cancelled)",
        }
      : { class: e.failureClass === "input" ? "infra" : e.failureClass, code: e.code, message: e.message },
  );
  if (!aborted) run.errors.push(e.stack ?? e.message);
}

/** The token closed, the listener, every container and network of the episode gone. */
async function closeEpisode(ep: Episode): Promise<void> {
  const { run } = ep;
  await run.closeToken();
  await ep.listener?.close().catch(() => undefined);
  await run.scope?.dispose();
  ep.opts.sandbox.engineWatch.forgetPrefix(ep.base);
}

function noteEngineRestart(ep: Episode): void {
  const { opts, run } = ep;
  if (opts.sandbox.engineWatch.changedSince(ep.engineEpoch) && !opts.signal?.aborted)
    run.fail({
      class: "infra",
      code: "engine_restarted",
      message:
        "the Docker engine restarted or went away during the episode; its containers were killed from outside",
    });
}

/** The result from what the episode produced; never a throw. */
async function finish(ep: Episode): Promise<EpisodeResult> {
  const { run } = ep;
  try {
    return await finishEpisode(run, {
      collected: ep.collected,
      strictProvenance: ep.opts.strictProvenance ?? false,
      grade: ep.grade,
      policyLog: ep.policyLog,
      startedAt: ep.startedAt,
    });
  } catch (err) {
    // Our bug, never the miner's: still a result (infra, re-run), never a throw.
    const e = toValidatorError(err);
    ep.log.error({ err: e.stack ?? e.message }, "episode.finish.failed");
    const { result } = run;
    result.failure = { class: "infra", code: "episode_internal", message: e.message };
    result.notes = [...result.notes, "episode_internal"];
    result.status = "failed";
    result.quality = 0;
    return result;
  }
}

/** Grade the deliverable in a fresh verifier; a missing or non-regular deliverable scores 0 ungraded. */
async function gradeStep(
  ep: Episode,
  collected: Collected,
  image: BuiltImage,
): Promise<GradeResult | undefined> {
  const { run, kind, verifierMs } = ep;
  const { deliverable } = collected;
  const path = run.scenario.task.verifier.agent_output_path;
  const data = deliverable.kind === "file" ? deliverable.data : undefined;
  const record = { image, grader: kind.grader.describe(run.scenario), timeoutMs: verifierMs, deliverable };
  if (data === undefined) {
    const what = `${path} is ${deliverable.kind === "missing" ? "missing" : `not a regular file (${deliverable.kind})`}`;
    if (!kind.gradesMissing(run, what)) {
      await writeGradingRecord(run, { ...record, grade: undefined });
      return undefined;
    }
  }
  const site = {
    engine: run.engine,
    networks: run.sandbox.networks,
    scope: run.scope!,
    log: run.log,
    signal: ep.opts.signal,
  };
  const grade = await kind.grader.grade(site, run.scenario, {
    image: image.ref,
    agentOutputPath: path,
    deliverable: data,
    timeoutMs: verifierMs,
  });
  recordGrade(run, grade);
  await Promise.all([
    run.artifacts.write("ctrf.json", grade.ctrfText),
    run.artifacts.write("verifier.log", grade.log),
    writeGradingRecord(run, { ...record, grade }),
  ]);
  return grade;
}

function recordGrade(run: EpisodeRun, grade: GradeResult): void {
  const { result } = run;
  result.quality = grade.quality;
  result.tests = grade.tests;
  result.passed = grade.passed;
  result.reward = grade.reward ?? null;
  result.verifier = {
    exit_code: grade.exitCode ?? null,
    timed_out: grade.timedOut,
    duration_ms: grade.durationMs,
  };
  if (grade.failure) run.fail(grade.failure);
}
