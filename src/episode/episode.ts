/**
 * One episode: one scenario run for one pack. Mint a meter token → images → two internal
 * networks → the policy sidecar (healthy within 60 s) → the scenario container running the agent
 * (deadline and watchdog) → the one deliverable graded in a fresh verifier → artifacts. Every
 * container and network is removed on every exit path, and every outcome is an EpisodeResult
 * (this function does not throw for failures of the episode itself).
 */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { isAbortError, toValidatorError } from "../errors.js";
import { silentLogger } from "../log.js";
import type { Listener } from "../meter/index.js";
import {
  type BuiltImage,
  boundEngineCalls,
  removeContainer,
  safeName,
  uniqueName,
} from "../sandbox/index.js";
import { agentDiskOf, createAgent, runAgent } from "./agent.js";
import { ArtifactWriter } from "./artifacts.js";
import { gradeBenchDeliverable } from "./bench-verifier.js";
import { type Collected, collectAgent, collectHermes } from "./collect.js";
import { writeGradingRecord } from "./grading-record.js";
import { createHermesAgent, type HermesAgent } from "./hermes-agent.js";
import { finishEpisode } from "./outcome.js";
import { EpisodeRun } from "./run-context.js";
import { awaitHealthy, createSidecar } from "./sidecar.js";
import type { EpisodeResult, EpisodeRuntime, RunEpisodeOptions } from "./types.js";
import { type GradeResult, gradeDeliverable, reportContractOf } from "./verifier.js";

export { POLICY_PORT } from "./sidecar.js";

export async function runEpisode(opts: RunEpisodeOptions): Promise<EpisodeResult> {
  const t0 = performance.now();
  const { sandbox, meter, pack, scenario } = opts;
  const episodeId = opts.episodeId ?? `ep-${randomBytes(6).toString("hex")}`;
  const log = (opts.log ?? silentLogger).child({
    episode: episodeId,
    scenario: scenario.name,
    pack: pack.hash.slice(0, 12),
  });
  const to = opts.timeouts ?? {};
  const agentMs = to.agentMs ?? scenario.task.agent.timeout_sec * 1000;
  const verifierMs = to.verifierMs ?? scenario.task.verifier.timeout_sec * 1000;
  const healthMs = to.healthMs ?? 60_000;
  const artifacts = new ArtifactWriter(join(opts.outDir, safeName(scenario.name, 80)), log);
  const run = new EpisodeRun(episodeId, sandbox, meter, pack, scenario, artifacts, log, opts.onProgress);
  const { result } = run;
  // An engine restart kills our containers from outside: whatever they did then says nothing of the policy.
  const engineEpoch = sandbox.engineWatch.epoch;
  const base = `trajrl-${uniqueName(episodeId, 60)}`;
  const runtime = opts.runtime ?? { kind: "builtin" as const };
  const disk = agentDiskOf(runtime.kind, opts.agentDisk);
  // Every plain engine call of the episode has a deadline (idempotent; a client the sandbox
  // opened itself already has one).
  boundEngineCalls(sandbox.docker);

  let listener: Listener | undefined;
  let policyLog = "";
  let collected: Collected | undefined;
  let grade: GradeResult | undefined;
  try {
    opts.signal?.throwIfAborted();
    await artifacts.init();
    run.token = meter.mint(episodeId, opts.capUsd);

    // Images first (normally cached by content hash; the first episode of a run may build).
    const ti = performance.now();
    const [sidecarImage, scenarioImage] = await Promise.all([
      opts.images.sidecar(opts.signal),
      opts.images.scenario(scenario, opts.signal),
    ]);
    result.images = {
      sidecar: { ref: sidecarImage.ref, id: sidecarImage.id },
      scenario: { ref: scenarioImage.ref, id: scenarioImage.id },
    };
    result.timings.images_ms = performance.now() - ti;
    const ts = performance.now();
    const lap = (phase: string) =>
      log.debug({ phase, ms: Math.round(performance.now() - ts) }, "episode.phase");

    // Topology and the meter's listener for this episode (opened once the images exist: the
    // scope's expiry label must not count a long first build).
    run.scope = sandbox.openScope(episodeId, healthMs + agentMs + verifierMs + 15 * 60_000, scenario);
    const topo = await sandbox.createTopology(run.scope);
    listener = await meter.listen(topo.meterBindHost, topo.meterPort, run.token);
    lap("topology");

    // The sidecar, and the scenario container created while the policy boots (held at its gate).
    const tSidecar = performance.now();
    const sidecar = await createSidecar(run, {
      image: sidecarImage,
      topo,
      base,
      defaultModel: opts.defaultModel,
      runtime,
    });
    lap("sidecar.created");
    const [, agent] = await Promise.all([
      sidecar.start().then(() => lap("sidecar.started")),
      (runtime.kind === "bench"
        ? createHermesAgent(run, { image: scenarioImage, topo, base, disk })
        : createAgent(run, {
            image: scenarioImage,
            topo,
            base,
            agentCommand: opts.agentCommand,
            agentEnv: opts.agentEnv,
            disk,
          })
      ).then((a) => {
        lap("agent.waiting");
        return a;
      }),
    ]);

    const health = await awaitHealthy(run, sidecar, healthMs, opts.signal);
    policyLog = health.policyLog;
    if (health.healthy) {
      result.timings.policy_setup_ms = performance.now() - tSidecar;
      result.timings.setup_ms = performance.now() - ts;
      log.info({ setup_ms: Math.round(result.timings.setup_ms) }, "episode.agent.started");
      const ended = await runAgent(run, agent, sidecar, {
        agentMs,
        timeouts: to,
        disk,
        signal: opts.signal,
      });
      opts.signal?.throwIfAborted();
      result.timings.agent_ms = ended.agentMs;

      collected =
        "transcript" in agent
          ? await collectHermes(run, agent as HermesAgent, sidecar, ended)
          : await collectAgent(run, agent, sidecar, ended);
      policyLog = collected.policyLog;
      // The meter's listener and the two networks are not needed by the verifier: their teardown
      // overlaps the grading.
      const freeing = Promise.all([
        removeContainer(sandbox.docker, sidecar.name),
        removeContainer(sandbox.docker, agent.name),
      ])
        .then(async () => {
          await listener?.close().catch(() => undefined);
          await run.scope?.releaseNetworks();
        })
        .catch((err) => log.warn({ err: (err as Error).message }, "episode.remove.failed"));

      // The verifier: only a regular file crosses; anything else scores 0 without grading.
      const tv = performance.now();
      run.progress({ phase: "verifying", spentUsd: result.usage?.cost_usd ?? 0 });
      grade = await gradeStep(run, collected, scenarioImage, verifierMs, runtime, opts.signal);
      result.timings.verify_ms = performance.now() - tv;
      await freeing;
    }
  } catch (err) {
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
  } finally {
    await run.closeToken();
    await listener?.close().catch(() => undefined);
    await run.scope?.dispose();
    sandbox.engineWatch.forgetPrefix(base);
  }

  if (sandbox.engineWatch.changedSince(engineEpoch) && !opts.signal?.aborted)
    run.fail({
      class: "infra",
      code: "engine_restarted",
      message:
        "the Docker engine restarted or went away during the episode; its containers were killed from outside",
    });

  try {
    return await finishEpisode(run, {
      collected,
      strictProvenance: opts.strictProvenance ?? false,
      grade,
      policyLog,
      startedAt: t0,
    });
  } catch (err) {
    // Our bug, never the miner's: still a result (infra, re-run), never a throw.
    const e = toValidatorError(err);
    log.error({ err: e.stack ?? e.message }, "episode.finish.failed");
    result.failure = { class: "infra", code: "episode_internal", message: e.message };
    result.notes = [...result.notes, "episode_internal"];
    result.status = "failed";
    result.quality = 0;
    return result;
  }
}

/** Grade the deliverable in a fresh verifier; a missing or non-regular deliverable scores 0 ungraded. */
async function gradeStep(
  run: EpisodeRun,
  collected: Collected,
  image: BuiltImage,
  verifierMs: number,
  runtime: EpisodeRuntime,
  signal: AbortSignal | undefined,
): Promise<GradeResult | undefined> {
  const { deliverable } = collected;
  const path = run.scenario.task.verifier.agent_output_path;
  const data = deliverable.kind === "file" ? deliverable.data : undefined;
  if (data === undefined) {
    const what = `${path} is ${deliverable.kind === "missing" ? "missing" : `not a regular file (${deliverable.kind})`}`;
    // Upstream grades what the agent left even when it wrote nothing: the tests run without the
    // deliverable and score the empty workspace. The built-in suite scores it 0 ungraded.
    if (runtime.kind === "bench") run.result.notes.push("agent_output_missing");
    else {
      run.fail({ class: "policy", code: "agent_output_missing", message: what });
      await writeGradingRecord(run, { image, runtime, timeoutMs: verifierMs, deliverable, grade: undefined });
      return undefined;
    }
  }
  const grade =
    runtime.kind === "bench"
      ? await gradeBenchDeliverable({
          sandbox: run.sandbox,
          scope: run.scope!,
          image: image.ref,
          testFiles: run.scenario.testFiles ?? {},
          agentOutputPath: path,
          deliverable: data,
          timeoutMs: verifierMs,
          network: runtime.verifierNetwork,
          ...(signal ? { signal } : {}),
        })
      : await gradeDeliverable({
          docker: run.sandbox.docker,
          scope: run.scope!,
          image: image.ref,
          testsDir: join(run.scenario.dir, "tests"),
          agentOutputPath: path,
          deliverable: data ?? Buffer.alloc(0),
          timeoutMs: verifierMs,
          report: reportContractOf(run.scenario),
          ...(signal ? { signal } : {}),
          log: run.log,
        });
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
  await Promise.all([
    run.artifacts.write("ctrf.json", grade.ctrfText),
    run.artifacts.write("verifier.log", grade.log),
    writeGradingRecord(run, { image, runtime, timeoutMs: verifierMs, deliverable, grade }),
  ]);
  return grade;
}
