/**
 * One episode: one scenario run for one pack. Mint a meter token → two internal networks →
 * the policy sidecar (healthy within 60 s) → the scenario container running the agent (deadline
 * and watchdog) → the one deliverable graded in a fresh verifier → artifacts. Every container
 * and network is removed on every exit path, and every outcome is an EpisodeResult (this
 * function does not throw for failures of the episode itself).
 */
import { randomBytes } from "node:crypto";
import { request } from "node:http";
import { join } from "node:path";
import { agentCommandArgv, agentEnv, parseTurnsJsonl, type TurnRecord } from "../../agent/contract.js";
import { InfraError, isAbortError, toValidatorError } from "../errors.js";
import type { Logger } from "../log.js";
import { silentLogger } from "../log.js";
import type { Activity, Listener, ModelUsage, Receipt, UsageSummary } from "../meter/index.js";
import type { Pack } from "../pack/index.js";
import {
  attachStdin,
  connectNetwork,
  createContainer,
  type FetchedPath,
  getPath,
  inspectContainer,
  putFiles,
  readLogs,
  removeContainer,
  SCENARIO_LIMITS,
  SIDECAR_LIMITS,
  startContainer,
  stopContainer,
  waitExit,
} from "../sandbox/containers.js";
import type { BuiltImage, ScenarioImageSource } from "../sandbox/images.js";
import { safeName, uniqueName } from "../sandbox/labels.js";
import type { EpisodeScope } from "../sandbox/reaper.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import { intToIp, ipToInt } from "../sandbox/subnet.js";
import { packTar, type TarEntry } from "../sandbox/tar.js";
import { ARTIFACT_FILES, ArtifactWriter } from "./artifacts.js";
import {
  type AgentEndFacts,
  attributeAgentEnd,
  type KillReason,
  primaryFailure,
  upstreamFailing,
} from "./attribution.js";
import { type Deadline, deadline, sleep } from "./deadline.js";
import { type AnswerProvenance, checkProvenance } from "./provenance.js";
import type { EpisodeFailure, EpisodeScenario } from "./types.js";
import { type GradeResult, gradeDeliverable } from "./verifier.js";

export const POLICY_PORT = 8800;
export const AGENT_UID = 10000;
export const POLICY_UID = 10001;
const WORKSPACE = "/workspace";
const TURNS_PATH = `${WORKSPACE}/turns.jsonl`;
const TRANSCRIPT_PATH = `${WORKSPACE}/transcript.txt`;
const DELIVERABLE_CAP = 64 * 1024 * 1024;

/** What the episode needs of the meter (src/meter's Meter). */
export interface EpisodeMeter {
  mint(episodeId: string, capUsd: number): string;
  close(token: string): UsageSummary;
  summary(token: string): UsageSummary;
  lastActivity(token: string): Activity;
  receiptsFor(episodeId: string): Receipt[];
  /** A listener that answers `onlyToken` alone (the episode's own network: its own budget only). */
  listen(host: string, port: number, onlyToken: string): Promise<Listener>;
  readonly priceTableHash: string;
}

/** Where the episode's images come from (ProjectImages, or fixed images in tests). */
export interface EpisodeImages {
  sidecar(signal?: AbortSignal): Promise<BuiltImage>;
  scenario(s: ScenarioImageSource, signal?: AbortSignal): Promise<BuiltImage>;
}

export interface EpisodeTimeouts {
  /** Default: [agent].timeout_sec of task.toml. */
  agentMs?: number;
  /** Default: [verifier].timeout_sec of task.toml. */
  verifierMs?: number;
  /** Sidecar health (default 60 s). */
  healthMs?: number;
  /** Kill the agent when no metered call completed this long after it started (default 120 s). */
  watchdogFirstCallMs?: number;
  /** …or in the last this many ms (default 600 s). */
  watchdogIdleMs?: number;
  watchdogPollMs?: number;
  /** SIGTERM → SIGKILL grace when stopping the agent (default 5 s: time to write its summary). */
  stopGraceMs?: number;
}

export interface RunEpisodeOptions {
  sandbox: Sandbox;
  images: EpisodeImages;
  meter: EpisodeMeter;
  pack: Pack;
  scenario: EpisodeScenario;
  capUsd: number;
  /** Artifacts go to outDir/<scenario>/. */
  outDir: string;
  /** DEFAULT_MODEL for the sidecar (pin packs run on it). */
  defaultModel: string;
  signal?: AbortSignal;
  log?: Logger;
  episodeId?: string;
  /** AGENT_COMMAND template (default: the agent module's `node /opt/trajrl/agent.js`). */
  agentCommand?: string;
  /** Extra environment for the agent (e.g. AGENT_MAX_TURNS); never secrets. */
  agentEnv?: Readonly<Record<string, string>>;
  timeouts?: EpisodeTimeouts;
  /** Phase changes and the spend so far (polled about once a second while the agent runs). */
  onProgress?: (p: { phase?: "running" | "verifying"; spentUsd?: number }) => void;
}

export interface EpisodeResult {
  episode_id: string;
  scenario: string;
  pack_hash: string;
  /** "scored": the quality stands (policy faults included); "failed": upstream/infra, retry or discard. */
  status: "scored" | "failed";
  quality: number;
  tests: number;
  passed: number;
  reward: number | null;
  failure: EpisodeFailure | null;
  /** Every failure code seen, in order (the primary one is `failure`). */
  notes: string[];
  cost_usd: number;
  by_model: Record<string, ModelUsage>;
  usage: UsageSummary | null;
  price_table_hash: string;
  timings: { images_ms: number; setup_ms: number; agent_ms: number; verify_ms: number; total_ms: number };
  images: { sidecar: { ref: string; id: string } | null; scenario: { ref: string; id: string } | null };
  agent: {
    exit_code: number | null;
    end_reason: string | null;
    end_code: string | null;
    turns: number;
    tool_calls: number;
    killed_by: KillReason | null;
  };
  /**
   * The provider cut a model turn off before the agent ever ran a tool (infra-incomplete): the
   * episode says nothing about the policy, and the evaluation re-runs it.
   */
  truncated_before_tool_call: boolean;
  /** The agent's answers matched against the meter's receipts (null when the agent left no turns). */
  answer_provenance: AnswerProvenance | null;
  verifier: { exit_code: number | null; timed_out: boolean; duration_ms: number } | null;
  artifacts: { dir: string; files: Record<string, string> };
}

/** The n-th host address of a network's subnet (1 is the gateway): fixed addresses, no inspect round trip. */
function hostAddress(subnet: string, n: number): string {
  return intToIp(ipToInt(subnet.split("/")[0]!) + n);
}

function httpOk(url: string, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request(url, { method: "GET", signal, timeout: 1000, agent: false }, (res) => {
      res.resume();
      resolve((res.statusCode ?? 500) < 300);
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(false));
    req.end();
  });
}

type HealthOutcome = { kind: "healthy" } | { kind: "exited"; code: number } | { kind: "timeout" };

/** Poll GET /health while watching for the container's exit; whichever comes first. */
async function waitHealthy(
  url: string,
  container: Awaited<ReturnType<typeof createContainer>>,
  dl: Deadline,
): Promise<HealthOutcome> {
  const done = new AbortController();
  const signal = AbortSignal.any([dl.signal, done.signal]);
  const exited = waitExit(container, signal).then(
    (code): HealthOutcome => ({ kind: "exited", code }),
    () => undefined,
  );
  const healthy = (async (): Promise<HealthOutcome | undefined> => {
    while (!signal.aborted) {
      if (await httpOk(url, signal)) return { kind: "healthy" };
      await sleep(25, signal).catch(() => undefined);
    }
    return undefined;
  })();
  const first = await Promise.race([exited, healthy]);
  done.abort();
  if (first) return first;
  if (dl.expired) {
    // The deadline may have raced a crash: a container that is gone by now crashed.
    const info = await inspectContainer(container).catch(() => undefined);
    if (info && !info.State.Running) return { kind: "exited", code: info.State.ExitCode };
    return { kind: "timeout" };
  }
  throw dl.signal.reason ?? new DOMException("aborted", "AbortError");
}

/** Resolve with the watchdog's reason when the agent must be killed for lack of metered calls. */
async function watchdog(
  meter: EpisodeMeter,
  token: string,
  agentStart: number,
  firstCallMs: number,
  idleMs: number,
  pollMs: number,
  signal: AbortSignal,
): Promise<KillReason | undefined> {
  while (!signal.aborted) {
    const now = performance.now();
    let a: Activity;
    try {
      a = meter.lastActivity(token);
    } catch {
      return undefined;
    }
    const last =
      a.lastCompletedAt !== undefined && a.lastCompletedAt >= agentStart ? a.lastCompletedAt : undefined;
    if (last === undefined && now - agentStart > firstCallMs) return "watchdog_no_call";
    if (last !== undefined && now - last > idleMs) return "watchdog_idle";
    const nextCheck =
      last === undefined ? agentStart + firstCallMs - now : Math.min(last + idleMs - now, pollMs);
    await sleep(Math.max(10, Math.min(pollMs, nextCheck + 5)), signal).catch(() => undefined);
  }
  return undefined;
}

/** The policy files as a tar relative to /policy (directories first, then files). */
export function policyEntries(files: Readonly<Record<string, string>>): TarEntry[] {
  const dirs = new Set<string>();
  const entries: TarEntry[] = [];
  for (const [name, content] of Object.entries(files)) {
    const parts = name.split("/");
    for (let i = 1; i < parts.length; i++) dirs.add(parts.slice(0, i).join("/"));
    entries.push({ name, data: content, mode: 0o644 });
  }
  return [
    ...[...dirs].sort().map((d): TarEntry => ({ name: `${d}/`, type: "directory", mode: 0o755 })),
    ...entries,
  ];
}

const commandCache = new Map<string, string[]>();

/** The image's own entrypoint + command (what our stdin wrapper execs), inspected once per image. */
async function imageCommand(sandbox: Sandbox, image: BuiltImage): Promise<string[]> {
  const hit = commandCache.get(image.id);
  if (hit) return hit;
  const info = await sandbox.docker.getImage(image.ref).inspect();
  const cmd = [...(info.Config?.Entrypoint ?? []), ...(info.Config?.Cmd ?? [])];
  if (cmd.length === 0) throw new InfraError("sidecar_image_invalid", `${image.ref} has no command to run`);
  commandCache.set(image.id, cmd);
  return cmd;
}

function text(p: FetchedPath): string | undefined {
  return p.kind === "file" ? p.data.toString("utf8") : undefined;
}

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
  const stopGraceMs = to.stopGraceMs ?? 5_000;
  const artifacts = new ArtifactWriter(join(opts.outDir, safeName(scenario.name, 80)), log);
  // An engine restart kills our containers from outside: whatever they did then says nothing of the policy.
  const engineEpoch = sandbox.engineWatch.epoch;
  const failures: EpisodeFailure[] = [];
  const fail = (f: EpisodeFailure) => {
    failures.push(f);
    log.warn({ class: f.class, code: f.code, msg: f.message }, "episode.failure");
  };
  const errors: string[] = [];
  const progress = (p: { phase?: "running" | "verifying"; spentUsd?: number }) => {
    try {
      opts.onProgress?.(p);
    } catch (err) {
      log.warn({ err: (err as Error).message }, "episode.progress_listener_failed");
    }
  };

  const result: EpisodeResult = {
    episode_id: episodeId,
    scenario: scenario.name,
    pack_hash: pack.hash,
    status: "scored",
    quality: 0,
    tests: 0,
    passed: 0,
    reward: null,
    failure: null,
    notes: [],
    cost_usd: 0,
    by_model: {},
    usage: null,
    price_table_hash: meter.priceTableHash,
    timings: { images_ms: 0, setup_ms: 0, agent_ms: 0, verify_ms: 0, total_ms: 0 },
    images: { sidecar: null, scenario: null },
    agent: { exit_code: null, end_reason: null, end_code: null, turns: 0, tool_calls: 0, killed_by: null },
    truncated_before_tool_call: false,
    answer_provenance: null,
    verifier: null,
    artifacts: { dir: artifacts.dir, files: {} },
  };

  // Opened once the images exist: its expiry label must not count a long first build.
  let scope: EpisodeScope | undefined;
  let token: string | undefined;
  let tokenClosed = false;
  let listener: Listener | undefined;
  let policyLog = "";
  let agentTurns: TurnRecord[] | undefined;
  let grade: GradeResult | undefined;
  const closeToken = () => {
    if (token === undefined || tokenClosed) return;
    tokenClosed = true;
    try {
      result.usage = meter.close(token);
    } catch (err) {
      log.warn({ err: (err as Error).message }, "episode.meter.close.failed");
    }
  };

  try {
    opts.signal?.throwIfAborted();
    await artifacts.init();
    token = meter.mint(episodeId, opts.capUsd);

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

    // Topology and the meter's listener for this episode.
    scope = sandbox.openScope(episodeId, healthMs + agentMs + verifierMs + 15 * 60_000);
    const topo = await sandbox.createTopology(scope);
    listener = await meter.listen(topo.meterBindHost, topo.meterPort, token);
    const lap = (phase: string) =>
      log.debug({ phase, ms: Math.round(performance.now() - ts) }, "episode.phase");
    lap("topology");

    // The policy sidecar: miner files uploaded before start, never a bind mount.
    const base = `trajrl-${uniqueName(episodeId, 60)}`;
    const sidecarName = `${base}-sidecar`;
    scope.trackContainer(sidecarName);
    const sidecarAgentIp = hostAddress(topo.agentNet.subnet, 2);
    const sidecarMeterIp = hostAddress(topo.meterNet.subnet, 2);
    const sidecarCmd = await imageCommand(sandbox, sidecarImage);
    const sidecar = await createContainer(sandbox.docker, {
      name: sidecarName,
      image: sidecarImage.ref,
      // The root is read-only, so the engine accepts no archive upload: the policy files arrive
      // as a tar on stdin, unpacked into a tmpfs at /policy before the image's own command runs.
      entrypoint: ["/bin/sh", "-c", 'umask 022 && tar -x -C /policy -f - && exec "$@"', "sidecar"],
      cmd: sidecarCmd,
      stdin: true,
      env: {
        POLICY_PORT: String(POLICY_PORT),
        UPSTREAM_URL: `http://meter:${topo.meterPort}/v1`,
        EPISODE_TOKEN: token,
        POLICY_DIR: "/policy",
        DEFAULT_MODEL: opts.defaultModel,
        PYTHONDONTWRITEBYTECODE: "1",
      },
      user: `${POLICY_UID}:${POLICY_UID}`,
      labels: scope.labels("sidecar"),
      limits: SIDECAR_LIMITS,
      network: { kind: "network", name: topo.agentNet.name, aliases: ["policy"], ipv4: sidecarAgentIp },
      extraHosts: topo.sidecarExtraHosts,
      readOnlyRoot: true,
      tmpfs: {
        "/tmp": "rw,nosuid,nodev,size=64m",
        "/policy": `rw,nosuid,nodev,noexec,size=2m,uid=${POLICY_UID},gid=${POLICY_UID},mode=0755`,
      },
      dropAllCaps: true,
      init: true,
    });
    lap("sidecar.created");
    const policyTar = await packTar(policyEntries(pack.policyFiles));
    const [sidecarStdin] = await Promise.all([
      attachStdin(sidecar),
      connectNetwork(sandbox.docker, topo.meterNet.name, sidecar.id, [], sidecarMeterIp),
    ]);
    lap("sidecar.connected");

    // The scenario container, created while the sidecar starts (independent work).
    const agentName = `${base}-agent`;
    scope.trackContainer(agentName);
    const envList = agentEnv({
      llmBaseUrl: `http://policy:${POLICY_PORT}/v1`,
      llmModel: "auto",
      workspace: WORKSPACE,
      turnsFile: TURNS_PATH,
      transcriptFile: TRANSCRIPT_PATH,
    });
    const env: Record<string, string> = {};
    for (const kv of envList) {
      const i = kv.indexOf("=");
      env[kv.slice(0, i)] = kv.slice(i + 1);
    }
    Object.assign(env, opts.agentEnv ?? {});
    // The agent's container starts while the policy boots, held at a gate (a read of one byte
    // on stdin) that opens when the policy is healthy: its start-up cost overlaps the policy's.
    const [, { c: agentC, gate }] = await Promise.all([
      startContainer(sidecar)
        .then(() => sidecarStdin.send(policyTar))
        .then(() => lap("sidecar.started")),
      (async () => {
        const c = await createContainer(sandbox.docker, {
          name: agentName,
          image: scenarioImage.ref,
          entrypoint: [
            "/bin/sh",
            "-c",
            'head -c 1 >/dev/null; exec "$@"',
            "agent",
            ...agentCommandArgv(opts.agentCommand),
          ],
          cmd: [],
          stdin: true,
          env,
          user: `${AGENT_UID}:${AGENT_UID}`,
          workingDir: "/app",
          labels: scope.labels("agent"),
          limits: SCENARIO_LIMITS,
          network: { kind: "network", name: topo.agentNet.name, ipv4: hostAddress(topo.agentNet.subnet, 3) },
          dropAllCaps: true,
          init: true,
        });
        // /workspace is root's: SKILL.md and INSTRUCTION.md cannot be changed or replaced;
        // the agent writes only its session files and /workspace/learned.
        const own = { uid: AGENT_UID, gid: AGENT_UID };
        await putFiles(c, "/", [
          { name: "workspace/", type: "directory", mode: 0o755 },
          { name: "workspace/SKILL.md", data: pack.skillMd, mode: 0o444 },
          { name: "workspace/INSTRUCTION.md", data: scenario.instruction, mode: 0o444 },
          { name: "workspace/learned/", type: "directory", mode: 0o755, ...own },
          { name: "workspace/turns.jsonl", data: "", mode: 0o644, ...own },
          { name: "workspace/transcript.txt", data: "", mode: 0o644, ...own },
        ]);
        const gate = await attachStdin(c);
        await startContainer(c);
        lap("agent.waiting");
        return { c, gate };
      })(),
    ]);

    const hdl = deadline(healthMs, opts.signal);
    let health: HealthOutcome;
    try {
      health = await waitHealthy(`http://${sidecarMeterIp}:${POLICY_PORT}/health`, sidecar, hdl);
    } finally {
      hdl.clear();
    }
    lap(`sidecar.${health.kind}`);
    if (health.kind !== "healthy") {
      const logs = await readLogs(sidecar, 256 * 1024).catch(() => ({
        stdout: "",
        stderr: "",
        truncated: false,
      }));
      policyLog = `${logs.stdout}${logs.stderr ? `\n--- stderr ---\n${logs.stderr}` : ""}`;
      const crashed = health.kind === "exited";
      // We never stop the sidecar while waiting for it: a kill then came from outside (the engine
      // stopping it on shutdown, an operator), not from the policy. The kill event precedes the exit.
      if (health.kind === "exited") {
        await sleep(300);
        if (sandbox.engineWatch.killsOf(sidecarName) > 0)
          fail({
            class: "infra",
            code: "sidecar_killed",
            message: `the policy sidecar was killed from outside (exit ${health.code}) before it was healthy`,
          });
      }
      fail({
        class: "policy",
        code: crashed ? "policy_crashed" : "policy_health_timeout",
        message:
          health.kind === "exited"
            ? `the policy sidecar exited with status ${health.code} before it was healthy`
            : `the policy sidecar was not healthy within ${healthMs} ms`,
      });
      await artifacts.write(
        ARTIFACT_FILES.error,
        `${failures[0]!.code}: ${failures[0]!.message}\n\n${logs.stderr || logs.stdout || "(no output)"}\n`,
      );
    } else {
      // The agent, under its deadline and the watchdog.
      await gate.send(Buffer.from("\n"));
      const agentStart = performance.now();
      result.timings.setup_ms = agentStart - ts;
      log.info({ setup_ms: Math.round(result.timings.setup_ms) }, "episode.agent.started");
      const adl = deadline(agentMs, opts.signal);
      const wdStop = new AbortController();
      progress({ phase: "running", spentUsd: 0 });
      const spend = setInterval(() => {
        try {
          progress({ spentUsd: meter.summary(token!).cost_usd });
        } catch {
          // the token closed under us: the agent phase is ending
        }
      }, 1000);
      spend.unref();
      let killedBy: KillReason | undefined;
      let policyExit: AgentEndFacts["policyExit"];
      let inflightAtKill = false;
      let exitCode: number | undefined;
      try {
        const outcome = await Promise.race([
          waitExit(agentC, adl.signal).then(
            (code) => ({ kind: "exit" as const, code }),
            (err) => {
              if (adl.expired) return { kind: "deadline" as const };
              throw err;
            },
          ),
          watchdog(
            meter,
            token,
            agentStart,
            to.watchdogFirstCallMs ?? 120_000,
            to.watchdogIdleMs ?? 600_000,
            to.watchdogPollMs ?? 1_000,
            AbortSignal.any([adl.signal, wdStop.signal]),
          ).then((why) => (why ? { kind: "watchdog" as const, why } : new Promise<never>(() => {}))),
          // A policy that dies under the agent (a crash, its memory limit) can answer nothing more:
          // end the agent now rather than let it retry into a dead socket until the watchdog fires.
          waitExit(sidecar, AbortSignal.any([adl.signal, wdStop.signal])).then(
            (code) => ({ kind: "policy_exited" as const, code }),
            () => new Promise<never>(() => {}),
          ),
        ]);
        if (outcome.kind === "exit") exitCode = outcome.code;
        else {
          if (outcome.kind === "policy_exited") {
            // (A kill from outside shows as a kill event just before the exit: give it time to land.)
            const [s] = await Promise.all([inspectContainer(sidecar), sleep(300)]);
            policyExit = { exitCode: outcome.code, oomKilled: Boolean(s.State.OOMKilled) };
            log.warn(policyExit, "episode.policy.exited");
          }
          killedBy =
            outcome.kind === "deadline"
              ? "deadline"
              : outcome.kind === "watchdog"
                ? outcome.why
                : "policy_exited";
          inflightAtKill = killedBy !== "deadline" && meter.summary(token).reserved_usd > 0;
          log.warn({ killedBy, inflightAtKill }, "episode.agent.kill");
          await stopContainer(agentC, stopGraceMs);
        }
      } finally {
        clearInterval(spend);
        wdStop.abort();
        adl.clear();
      }
      opts.signal?.throwIfAborted();
      result.timings.agent_ms = performance.now() - agentStart;

      // Everything the agent left: session files, logs, the one deliverable.
      const [info, turns, transcript, agentLogs, deliverable, sidecarLogs] = await Promise.all([
        inspectContainer(agentC),
        getPath(agentC, TURNS_PATH, 32 * 1024 * 1024),
        getPath(agentC, TRANSCRIPT_PATH, 8 * 1024 * 1024),
        readLogs(agentC, 1024 * 1024).catch(() => ({ stdout: "", stderr: "", truncated: false })),
        getPath(agentC, scenario.task.verifier.agent_output_path, DELIVERABLE_CAP),
        readLogs(sidecar, 4 * 1024 * 1024).catch(() => ({ stdout: "", stderr: "", truncated: false })),
      ]);
      policyLog = `${sidecarLogs.stdout}${sidecarLogs.stderr ? `\n--- stderr ---\n${sidecarLogs.stderr}` : ""}`;
      // Nothing may be billed after the agent is done; stop the policy and free the CPUs for grading.
      closeToken();
      // Killed by someone else while the agent ran (before our own removal below): infra.
      const sidecarKilled = sandbox.engineWatch.killsOf(sidecarName) > 0;
      if (sidecarKilled)
        fail({
          class: "infra",
          code: "sidecar_killed",
          message: "the policy sidecar was killed from outside while the agent ran",
        });
      // Then the meter's listener and the two networks: the verifier needs none of them, so their
      // teardown overlaps the grading.
      const freeing = Promise.all([
        removeContainer(sandbox.docker, sidecarName),
        removeContainer(sandbox.docker, agentName),
      ])
        .then(async () => {
          await listener?.close().catch(() => undefined);
          await scope?.releaseNetworks();
        })
        .catch((err) => log.warn({ err: (err as Error).message }, "episode.remove.failed"));

      const turnsText = text(turns);
      const parsed = turnsText !== undefined ? parseTurnsJsonl(turnsText) : undefined;
      agentTurns = parsed?.turns;
      result.agent = {
        exit_code: killedBy ? null : (exitCode ?? info.State.ExitCode),
        end_reason: parsed?.summary?.reason ?? null,
        end_code: parsed?.summary?.code ?? null,
        turns: parsed?.summary?.turns ?? parsed?.turns.length ?? 0,
        tool_calls:
          parsed?.summary?.tool_call_count ??
          parsed?.turns.reduce((n, t) => n + (t.tool_call_count ?? 0), 0) ??
          0,
        killed_by: killedBy ?? null,
      };
      await Promise.all([
        artifacts.write(ARTIFACT_FILES.turns, turnsText),
        artifacts.write(ARTIFACT_FILES.transcript, text(transcript) || agentLogs.stdout),
        artifacts.write(
          ARTIFACT_FILES.agentLog,
          `${agentLogs.stdout}${agentLogs.stderr ? `\n--- stderr ---\n${agentLogs.stderr}` : ""}`,
        ),
      ]);
      const facts: AgentEndFacts = {
        exitCode: result.agent.exit_code ?? undefined,
        oomKilled: Boolean(info.State.OOMKilled),
        upstreamFailing: upstreamFailing(meter.receiptsFor(episodeId)),
        inflightAtKill,
      };
      if (killedBy) facts.killedBy = killedBy;
      if (policyExit) facts.policyExit = policyExit;
      if (parsed?.summary?.reason) facts.summaryReason = parsed.summary.reason;
      if (parsed?.summary?.code) facts.summaryCode = parsed.summary.code;
      // (A sidecar killed from outside ended the agent: that is the whole story, not a policy crash.)
      const agentFailure =
        killedBy === "policy_exited" && sidecarKilled ? undefined : attributeAgentEnd(facts);
      if (agentFailure) fail(agentFailure);
      if (parsed?.summary?.reason === "budget_exhausted") result.notes.push("budget_exhausted");

      // The verifier: only a regular file crosses; anything else scores 0 without grading.
      const tv = performance.now();
      progress({ phase: "verifying", spentUsd: result.usage?.cost_usd ?? 0 });
      if (deliverable.kind !== "file") {
        fail({
          class: "policy",
          code: "agent_output_missing",
          message: `${scenario.task.verifier.agent_output_path} is ${deliverable.kind === "missing" ? "missing" : `not a regular file (${deliverable.kind})`}`,
        });
      } else {
        grade = await gradeDeliverable({
          docker: sandbox.docker,
          scope,
          image: scenarioImage.ref,
          testsDir: join(scenario.dir, "tests"),
          agentOutputPath: scenario.task.verifier.agent_output_path,
          deliverable: deliverable.data,
          timeoutMs: verifierMs,
          ...(opts.signal ? { signal: opts.signal } : {}),
          log,
        });
        result.quality = grade.quality;
        result.tests = grade.tests;
        result.passed = grade.passed;
        result.reward = grade.reward ?? null;
        result.verifier = {
          exit_code: grade.exitCode ?? null,
          timed_out: grade.timedOut,
          duration_ms: grade.durationMs,
        };
        if (grade.failure) fail(grade.failure);
        await Promise.all([
          artifacts.write(ARTIFACT_FILES.ctrf, grade.ctrfText),
          artifacts.write(ARTIFACT_FILES.verifierLog, grade.log),
        ]);
      }
      result.timings.verify_ms = performance.now() - tv;
      await freeing;
    }
  } catch (err) {
    const aborted = isAbortError(err) || (opts.signal?.aborted ?? false);
    const e = toValidatorError(err);
    fail(
      aborted
        ? {
            class: "infra",
            code: "aborted",
            message: "the episode was aborted (shutdown or evaluation cancelled)",
          }
        : { class: e.failureClass === "input" ? "infra" : e.failureClass, code: e.code, message: e.message },
    );
    if (!aborted) errors.push(e.stack ?? e.message);
  } finally {
    closeToken();
    await listener?.close().catch(() => undefined);
    await scope?.dispose();
    sandbox.engineWatch.forgetPrefix(`trajrl-${uniqueName(episodeId, 60)}`);
  }

  if (sandbox.engineWatch.changedSince(engineEpoch) && !opts.signal?.aborted)
    fail({
      class: "infra",
      code: "engine_restarted",
      message:
        "the Docker engine restarted or went away during the episode; its containers were killed from outside",
    });

  // Provenance: every answer the agent acted on must match a receipt (src/episode/provenance.ts).
  let receipts: Receipt[] = [];
  try {
    receipts = meter.receiptsFor(episodeId);
  } catch (err) {
    log.warn({ err: (err as Error).message }, "episode.receipts.failed");
  }
  if (agentTurns !== undefined) {
    const prov = checkProvenance(agentTurns, receipts);
    result.answer_provenance = prov;
    if (prov.unmatched > 0) {
      // First among the policy's faults: the rest of the episode is built on answers no model gave.
      const f: EpisodeFailure = {
        class: "policy",
        code: "unmetered_answer",
        message: `${prov.unmatched} of ${prov.turns} answers the agent received match no metered model call (first: turn ${prov.first_unmatched_turn})`,
      };
      failures.unshift(f);
      log.warn({ class: f.class, code: f.code, msg: f.message }, "episode.failure");
    }
  }

  // Outcome: the primary failure decides scored vs failed; a policy fault keeps its quality.
  const primary = primaryFailure(failures);
  result.failure = primary ?? null;
  result.notes = [...failures.map((f) => f.code), ...result.notes];
  result.status = primary && primary.class !== "policy" ? "failed" : "scored";
  // An upstream/infra failure makes the quality untrustworthy: none is reported (the run is retried).
  if (result.status === "failed") result.quality = 0;
  // Work done on forged answers earns nothing.
  if ((result.answer_provenance?.unmatched ?? 0) > 0) result.quality = 0;
  const usage = result.usage;
  result.cost_usd = usage?.cost_usd ?? 0;
  result.by_model = usage?.by_model ?? {};
  result.timings.total_ms = performance.now() - t0;
  result.truncated_before_tool_call = result.agent.tool_calls === 0 && receipts.some((r) => r.truncated);
  await artifacts.write(ARTIFACT_FILES.policyLog, policyLog);
  await artifacts.json(ARTIFACT_FILES.meter, {
    episode_id: episodeId,
    price_table_hash: meter.priceTableHash,
    summary: usage,
    receipts,
  });
  if (primary && !artifacts.written[ARTIFACT_FILES.error]) {
    await artifacts.write(
      ARTIFACT_FILES.error,
      `${primary.class}/${primary.code}: ${primary.message}\n${errors.length ? `\n${errors.join("\n\n")}\n` : ""}`,
    );
  }
  result.artifacts.files = {
    ...artifacts.written,
    [ARTIFACT_FILES.evaluation]: join(artifacts.dir, ARTIFACT_FILES.evaluation),
  };
  await artifacts.json(ARTIFACT_FILES.evaluation, {
    ...result,
    verifier_result: grade
      ? { tests: grade.tests, passed: grade.passed, reward: grade.reward ?? null, ctrf: grade.ctrf ?? null }
      : null,
  });
  log.info(
    {
      status: result.status,
      quality: result.quality,
      failure: result.failure?.code,
      cost_usd: result.cost_usd,
      answers: result.answer_provenance,
      total_ms: Math.round(result.timings.total_ms),
    },
    "episode.done",
  );
  return result;
}
