/**
 * The agent of an episode, in its scenario container: created while the policy boots and held at
 * a one-byte stdin gate, released when the policy is healthy, then run under its deadline, the
 * policy-stall watchdog, the disk watchdog and a watch on the sidecar (a policy that dies under
 * the agent ends it).
 *
 * The built-in agent keeps a record no tool command can touch: it runs as root with only the
 * capabilities it needs to act as another user (SETUID, SETGID, KILL), and runs every tool — shell
 * commands and its file tools alike — as uid 10000, which owns /app and nothing of the agent's:
 * turns.jsonl and transcript.txt are root's, in root's /workspace, and a process of another uid
 * can neither write them, nor signal, trace or read the memory of the agent.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { agentCommandArgv, agentEnv, DEFAULT_AGENT_COMMAND } from "../../agent/contract.js";
import { InfraError } from "../errors.js";
import {
  type BuiltImage,
  type EpisodeContainer,
  type EpisodeTopology,
  hostAddress,
  type LayerUse,
  SCENARIO_LIMITS,
} from "../sandbox/index.js";
import type { AgentEndFacts, DiskOver, KillReason } from "./attribution.js";
import { deadline } from "./deadline.js";
import type { EpisodeRun } from "./run-context.js";
import type { Sidecar } from "./sidecar.js";
import type { AgentDiskLimit, EpisodeTimeouts } from "./types.js";
import { watchdog } from "./watchdog.js";

export const AGENT_UID = 10000;
export const WORKSPACE = "/workspace";
export const TURNS_PATH = `${WORKSPACE}/turns.jsonl`;
export const TRANSCRIPT_PATH = `${WORKSPACE}/transcript.txt`;
/** Capabilities of the built-in agent (root): act as the tool user, signal its process groups. */
export const AGENT_CAPS = ["SETUID", "SETGID", "KILL"];

const GiB = 1024 ** 3;
/**
 * What the agent's container may add to its writable layer before the disk watchdog kills it
 * (the engine here has no per-container storage limit: overlay2 on ext4), in bytes and in inodes
 * (a million empty files are 0 bytes). The built-in suite's tasks write megabytes and a handful of
 * files; upstream's graders and agents install tools (a large pip install is tens of thousands of
 * files), so the bench runtime gets bounds no honest episode comes near. The engine counts a
 * sparse file at its apparent size.
 */
export const AGENT_DISK = {
  builtin: { limitBytes: 2 * GiB, limitInodes: 200_000, pollMs: 2_000 },
  bench: { limitBytes: 8 * GiB, limitInodes: 500_000, pollMs: 3_000 },
} as const;

/** The runtime's disk bounds, each overridable (tests run smaller ones). */
export function agentDiskOf(
  kind: keyof typeof AGENT_DISK,
  o: AgentDiskLimit | undefined,
): Required<AgentDiskLimit> {
  const d = AGENT_DISK[kind];
  return {
    limitBytes: o?.limitBytes ?? d.limitBytes,
    limitInodes: o?.limitInodes ?? d.limitInodes,
    pollMs: o?.pollMs ?? d.pollMs,
  };
}

/** The agent as the episode drives it, whichever harness runs it (built-in agent or Hermes). */
export interface AgentProcess {
  container: EpisodeContainer;
  name: string;
  /** The agent starts working (built-in: the stdin gate opens; Hermes: `hermes chat` is exec'd). */
  release(): Promise<void>;
  /** Resolves with the agent's exit status when it ends by itself; rejects when `signal` aborts. */
  exited(signal: AbortSignal): Promise<number>;
  /** Stop the agent (deadline, watchdog, a dead policy); what it wrote stays readable. */
  stop(graceMs: number): Promise<void>;
  /** Kill at once everything the agent started (the disk watchdog: no grace to write more). */
  kill(): Promise<void>;
}

/** Whether the command is the built-in agent (which separates its record from its tools). */
export function isBuiltinAgent(command: string | undefined): boolean {
  return command === undefined || command.trim().split(/\s+/).join(" ") === DEFAULT_AGENT_COMMAND;
}

/** Create and start the scenario container, the agent held at its gate. */
export async function createAgent(
  run: EpisodeRun,
  opts: {
    image: BuiltImage;
    topo: EpisodeTopology;
    base: string;
    agentCommand: string | undefined;
    agentEnv: Readonly<Record<string, string>> | undefined;
    disk: { limitBytes: number };
  },
): Promise<AgentProcess> {
  const { scope } = run;
  if (!scope) throw new InfraError("episode_state", "agent before topology");
  const name = `${opts.base}-agent`;
  scope.trackContainer(name);
  // Another agent (AGENT_COMMAND) runs as the agent user and keeps its record as it likes.
  const builtin = isBuiltinAgent(opts.agentCommand);
  const env: Record<string, string> = {};
  for (const kv of agentEnv({
    llmBaseUrl: "http://policy:8800/v1",
    llmModel: "auto",
    workspace: WORKSPACE,
    turnsFile: TURNS_PATH,
    transcriptFile: TRANSCRIPT_PATH,
    ...(builtin ? { toolUser: { uid: AGENT_UID, gid: AGENT_UID, home: "/home/agent" } } : {}),
  })) {
    const i = kv.indexOf("=");
    env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  Object.assign(env, opts.agentEnv ?? {});
  const c = await run.engine.create({
    name,
    image: opts.image.ref,
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
    user: builtin ? "0:0" : `${AGENT_UID}:${AGENT_UID}`,
    workingDir: "/app",
    labels: scope.labels("agent"),
    limits: SCENARIO_LIMITS,
    network: {
      kind: "network",
      name: opts.topo.agentNet.name,
      ipv4: hostAddress(opts.topo.agentNet.subnet, 3),
    },
    dropAllCaps: true,
    ...(builtin ? { capAdd: AGENT_CAPS } : {}),
    storageBytes: opts.disk.limitBytes,
    init: true,
  });
  // /workspace is root's: SKILL.md and INSTRUCTION.md cannot be changed or replaced; the tools
  // write only /workspace/learned. The session record is the built-in agent's (root's) alone.
  const own = { uid: AGENT_UID, gid: AGENT_UID };
  const record = builtin ? {} : own;
  await c.write("/", [
    { name: "workspace/", type: "directory", mode: 0o755 },
    { name: "workspace/SKILL.md", data: run.pack.skillMd, mode: 0o444 },
    { name: "workspace/INSTRUCTION.md", data: run.scenario.instruction, mode: 0o444 },
    { name: "workspace/learned/", type: "directory", mode: 0o755, ...own },
    { name: "workspace/turns.jsonl", data: "", mode: 0o644, ...record },
    { name: "workspace/transcript.txt", data: "", mode: 0o644, ...record },
  ]);
  const gate = await c.openStdin();
  await c.start();
  return {
    container: c,
    name,
    release: () => gate.send(Buffer.from("\n")),
    exited: (signal) => c.wait(signal),
    stop: (graceMs) => c.stop(graceMs),
    kill: () => c.stop(0),
  };
}

/** How the agent phase ended (facts for attribution). */
export interface AgentRun {
  killedBy: KillReason | undefined;
  policyExit: AgentEndFacts["policyExit"];
  inflightAtKill: boolean;
  exitCode: number | undefined;
  agentMs: number;
  /** killedBy "disk_limit": what the watchdog measured, and the limits. */
  disk: DiskOver | undefined;
  /** The writable layer at the disk watchdog's last measurement. */
  diskBytes: number | undefined;
  diskInodes: number | undefined;
}

/** Release the agent and wait for it: its own exit, the deadline, the watchdog or a dead policy. */
function emptyRun(): AgentRun {
  return {
    killedBy: undefined,
    policyExit: undefined,
    inflightAtKill: false,
    exitCode: undefined,
    agentMs: 0,
    disk: undefined,
    diskBytes: undefined,
    diskInodes: undefined,
  };
}

export async function runAgent(
  run: EpisodeRun,
  agent: AgentProcess,
  sidecar: Sidecar,
  opts: {
    agentMs: number;
    timeouts: EpisodeTimeouts;
    disk: Required<AgentDiskLimit>;
    signal: AbortSignal | undefined;
  },
): Promise<AgentRun> {
  const token = run.token!;
  const to = opts.timeouts;
  await agent.release();
  const agentStart = performance.now();
  const adl = deadline(opts.agentMs, opts.signal);
  const wdStop = new AbortController();
  run.progress({ phase: "running", spentUsd: 0 });
  const spend = setInterval(() => run.progress({ spentUsd: run.spentUsd() }), 1000);
  spend.unref();
  const out = emptyRun();
  const layer: LayerUse = {};
  const disk = agent.container.watchLayer(
    { ...opts.disk, scope: run.scope!, log: run.log },
    AbortSignal.any([adl.signal, wdStop.signal]),
    layer,
  );
  try {
    const outcome = await Promise.race([
      agent.exited(adl.signal).then(
        (code) => ({ kind: "exit" as const, code }),
        (err) => {
          if (adl.expired) return { kind: "deadline" as const };
          throw err;
        },
      ),
      watchdog(
        run.meter,
        token,
        agentStart,
        to.watchdogFirstCallMs ?? 120_000,
        to.watchdogIdleMs ?? 600_000,
        to.watchdogPollMs ?? 1_000,
        AbortSignal.any([adl.signal, wdStop.signal]),
      ).then((why) => (why ? { kind: "watchdog" as const, why } : new Promise<never>(() => {}))),
      // A policy that dies under the agent (a crash, its memory limit) can answer nothing more:
      // end the agent now rather than let it retry into a dead socket until the watchdog fires.
      sidecar.container.wait(AbortSignal.any([adl.signal, wdStop.signal])).then(
        (code) => ({ kind: "policy_exited" as const, code }),
        () => new Promise<never>(() => {}),
      ),
      // What the agent writes reaches the host's disk: past the limit it is killed at once.
      disk.then((use) => (use ? { kind: "disk" as const, use } : new Promise<never>(() => {}))),
    ]);
    if (outcome.kind === "exit") out.exitCode = outcome.code;
    else {
      if (outcome.kind === "policy_exited") {
        // (A kill from outside shows as a kill event just before the exit: give it time to land.)
        const [s] = await Promise.all([sidecar.container.state(), sleep(300)]);
        out.policyExit = { exitCode: outcome.code, oomKilled: s.oomKilled };
        run.log.warn(out.policyExit, "episode.policy.exited");
      }
      out.killedBy =
        outcome.kind === "deadline"
          ? "deadline"
          : outcome.kind === "watchdog"
            ? outcome.why
            : outcome.kind === "disk"
              ? "disk_limit"
              : "policy_exited";
      out.inflightAtKill =
        (out.killedBy === "watchdog_no_call" ||
          out.killedBy === "watchdog_idle" ||
          out.killedBy === "policy_exited") &&
        run.meter.summary(token).reserved_usd > 0;
      if (outcome.kind === "disk") out.disk = { ...outcome.use, ...opts.disk };
      run.log.warn(
        { killedBy: out.killedBy, inflightAtKill: out.inflightAtKill, disk: out.disk },
        "episode.agent.kill",
      );
      if (outcome.kind === "disk") await agent.kill();
      else await agent.stop(to.stopGraceMs ?? 5_000);
    }
  } finally {
    clearInterval(spend);
    wdStop.abort();
    adl.clear();
    out.agentMs = performance.now() - agentStart;
    // Its counter container goes with the watch: nothing of the episode outlives it.
    await disk.catch(() => undefined);
  }
  out.diskBytes = out.disk?.bytes ?? layer.bytes;
  out.diskInodes = out.disk?.inodes ?? layer.inodes;
  return out;
}
