/**
 * Which OCI runtime runs a container. Everything an episode runs that a miner or a model wrote —
 * the sidecar's policy, the agent's commands, the deliverable in the verifier — runs under the
 * engine's *episode runtime*: gVisor (`runsc`) where the engine has it, so that an escape meets a
 * user-space kernel rather than the host's. The validator's own helpers (the meter relay, the
 * firewall helper, the bench's probes) run under runc. The episode never chooses: the runtime is
 * resolved once per engine (`Sandbox.start`, from the engine's `/info`), carried as a value by the
 * sandbox, its episode engine and each episode's scope, and given to `createContainer` in every
 * call, which applies it from the container's role (a helper's call passes `RUNC_RUNTIME`).
 */
import { z } from "zod";
import type { EpisodeRuntimeSetting } from "../config.js";
import { InfraError } from "../errors.js";
import type { Limits } from "./container-spec.js";
import type { Docker } from "./docker.js";
import { LABEL, type Role } from "./labels.js";

export type { EpisodeRuntimeSetting };

/** The name gVisor is registered under in the engine's daemon.json (`runtimes`). */
export const GVISOR_RUNTIME = "runsc";
/** Docker's own runtime; every engine has it. */
export const RUNC = "runc";

/**
 * Which roles run code no one on the validator's side wrote. A Record, so a new role must be
 * classified before the code compiles. `check` is `scenarios check`'s reference run: it proves the
 * scenario under the runtime episodes use.
 */
export const RUNS_EPISODE_CODE: Readonly<Record<Role, boolean>> = {
  sidecar: true,
  agent: true,
  verifier: true,
  check: true,
  "net-agent": false,
  "net-meter": false,
  probe: false,
  relay: false,
  "engine-firewall": false,
  "net-grader": false,
  "layer-count": false,
};

/** One container's runtime: the engine's name for it, and whether it is gVisor. */
export interface ContainerRuntime {
  /** Put in HostConfig.Runtime. */
  name: string;
  gvisor: boolean;
}

export const RUNC_RUNTIME: ContainerRuntime = { name: RUNC, gvisor: false };

/** The runtime an engine's episodes use, and why it is not gVisor when `auto` found none. */
export interface ResolvedRuntime extends ContainerRuntime {
  setting: EpisodeRuntimeSetting;
  /** `auto` on an engine without gVisor: what the operator should know. */
  fallback?: string;
}

/** Pure: the episode runtime for `setting` on an engine that has `available` runtimes. */
export function chooseEpisodeRuntime(
  setting: EpisodeRuntimeSetting,
  available: readonly string[],
): ResolvedRuntime {
  if (setting === "runc") return { setting, ...RUNC_RUNTIME };
  if (available.includes(GVISOR_RUNTIME)) return { setting, name: GVISOR_RUNTIME, gvisor: true };
  const have = available.length ? available.join(", ") : "none listed";
  if (setting === "runsc")
    throw new InfraError(
      "engine_runtime_missing",
      `EPISODE_RUNTIME=runsc but the engine has no runtime named ${GVISOR_RUNTIME} (its runtimes: ${have}); register gVisor in its daemon.json (README, Several hosts) or set EPISODE_RUNTIME=auto`,
      { retryable: false },
    );
  return {
    setting,
    ...RUNC_RUNTIME,
    fallback: `the engine has no runtime named ${GVISOR_RUNTIME} (its runtimes: ${have}): episodes run under runc, sharing the host's kernel with miners' code (README, Several hosts: register gVisor)`,
  };
}

const InfoRuntimes = z.object({ Runtimes: z.record(z.string(), z.unknown()).default({}) });

/** The runtimes the engine knows (`GET /info`, `Runtimes`). */
export async function engineRuntimes(docker: Docker): Promise<string[]> {
  let info: unknown;
  try {
    info = await docker.info();
  } catch (err) {
    throw new InfraError("engine_unreachable", `GET /info failed: ${(err as Error).message}`, { cause: err });
  }
  const parsed = InfoRuntimes.safeParse(info);
  if (!parsed.success)
    throw new InfraError(
      "engine_info_invalid",
      `GET /info: ${parsed.error.issues[0]?.message ?? "unreadable"}`,
    );
  return Object.keys(parsed.data.Runtimes).sort();
}

/**
 * Pure: the runtime of one container. Episode code (by its role label) gets the episode runtime;
 * the validator's own helpers get runc. A container without a known role is treated as episode
 * code. Always explicit, so an engine whose *default* runtime is something else changes nothing.
 */
export function containerRuntime(
  labels: Readonly<Record<string, string>>,
  episodeRuntime: ContainerRuntime,
): ContainerRuntime {
  const role = labels[LABEL.role] as Role | undefined;
  const helper = role !== undefined && RUNS_EPISODE_CODE[role] === false;
  const pinned = labels[LABEL.runtime] === RUNC;
  return helper || pinned ? RUNC_RUNTIME : episodeRuntime;
}

/**
 * Pure: the runtime pinned on an episode whose scenario declared it cannot run under gVisor
 * (task.toml `[metadata] not_under_gvisor = "why"`), or undefined when the episode runtime stands.
 * `auto` runs such a scenario under runc; `runsc` refuses it (infra: the run is discarded, never a
 * silent 0 for every pack).
 */
export function pinnedRuntime(
  episode: ResolvedRuntime | undefined,
  scenario: string,
  notUnderGvisor: string | undefined,
): string | undefined {
  if (!notUnderGvisor || !episode?.gvisor) return undefined;
  if (episode.setting === "runsc")
    throw new InfraError(
      "scenario_not_for_gvisor",
      `scenario ${scenario} cannot run under gVisor (${notUnderGvisor}) and EPISODE_RUNTIME=runsc allows nothing else; EPISODE_RUNTIME=auto runs it under runc`,
      { retryable: false },
    );
  return RUNC;
}

/**
 * Measured host tasks per guest task under gVisor's ptrace platform (Debian's runsc 20221219): an
 * idle sandbox holds ~40 host tasks, and each process or thread inside adds 4–8 more (its stub and
 * the sentry's threads serving it). The engine's pids limit counts those host tasks: a runc-sized
 * limit (256) let ~30 processes live, and the next fork crashed the whole sandbox (the sentry could
 * not start a thread: exit 2), where runc returns EAGAIN to that fork alone.
 */
const GVISOR_HOST_TASKS_PER_TASK = 12;
const GVISOR_HOST_TASKS_BASE = 256;

/**
 * Pure: the process bounds of a container under gVisor. The guest's own bound is the container's
 * pids limit as RLIMIT_NPROC, which the sentry enforces per user inside the sandbox (fork fails with
 * EAGAIN, as the pids limit makes it under runc); the engine's pids limit becomes a backstop on the
 * sandbox's host tasks, far enough above what that many guest tasks need.
 */
export function gvisorProcessBounds(limits: Pick<Limits, "pidsLimit">): { nproc: number; hostTasks: number } {
  return {
    nproc: limits.pidsLimit,
    hostTasks: limits.pidsLimit * GVISOR_HOST_TASKS_PER_TASK + GVISOR_HOST_TASKS_BASE,
  };
}
