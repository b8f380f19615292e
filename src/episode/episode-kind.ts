/**
 * What differs between the two kinds of episode, chosen once per episode: the built-in suite (our
 * sidecar image, the built-in agent, the scenario's harness or files grader) and the registry
 * bench (the bench image as sidecar, Hermes as the agent, upstream's verifier: grader.ts). The
 * episode's steps call these and never ask which kind they run.
 */
import type { BuiltImage, EpisodeTopology } from "../sandbox/index.js";
import { type AgentProcess, type AgentRun, agentDiskOf, createAgent } from "./agent.js";
import { type Collected, collectAgent, collectHermes } from "./collect.js";
import { benchGrader, builtinGrader, type Grader } from "./grader.js";
import { createHermesAgent } from "./hermes-agent.js";
import type { EpisodeRun } from "./run-context.js";
import { benchLaunch, builtinLaunch, type Sidecar, type SidecarLaunch } from "./sidecar.js";
import type { AgentDiskLimit, EpisodeRuntime, RunEpisodeOptions } from "./types.js";

/** The agent once created, with the way what it left is collected. */
export interface EpisodeAgent {
  process: AgentProcess;
  collect(run: EpisodeRun, sidecar: Sidecar, ended: AgentRun): Promise<Collected>;
}

export interface EpisodeKind {
  /** The agent's disk bounds (the kind's defaults, each overridable). */
  readonly disk: Required<AgentDiskLimit>;
  /** The sidecar's command, user, files and health probe. */
  sidecarLaunch(run: EpisodeRun, image: BuiltImage): Promise<SidecarLaunch>;
  /** Create the scenario container with its agent held back (not yet working). */
  createAgent(
    run: EpisodeRun,
    at: { image: BuiltImage; topo: EpisodeTopology; base: string },
  ): Promise<EpisodeAgent>;
  /**
   * The agent left no regular file at the deliverable's path: whether it is graded anyway.
   * Upstream grades what the agent left even when it wrote nothing (the tests run without the
   * deliverable and score the empty workspace); the built-in suite scores it 0 ungraded.
   */
  gradesMissing(run: EpisodeRun, what: string): boolean;
  /** What grades the deliverable, in a fresh verifier. */
  readonly grader: Grader;
}

/** The kind of episode the runtime asks for. */
export function episodeKindOf(
  runtime: EpisodeRuntime,
  opts: Pick<RunEpisodeOptions, "agentDisk" | "agentCommand" | "agentEnv">,
): EpisodeKind {
  return runtime.kind === "bench"
    ? benchKind(runtime, agentDiskOf("bench", opts.agentDisk))
    : builtinKind(agentDiskOf("builtin", opts.agentDisk), opts);
}

function builtinKind(
  disk: Required<AgentDiskLimit>,
  opts: Pick<RunEpisodeOptions, "agentCommand" | "agentEnv">,
): EpisodeKind {
  return {
    disk,
    sidecarLaunch: (run, image) => builtinLaunch(run, image),
    createAgent: async (run, at) => {
      const process = await createAgent(run, {
        ...at,
        agentCommand: opts.agentCommand,
        agentEnv: opts.agentEnv,
        disk,
      });
      return { process, collect: (r, sidecar, ended) => collectAgent(r, process, sidecar, ended) };
    },
    gradesMissing: (run, what) => {
      run.fail({ class: "policy", code: "agent_output_missing", message: what });
      return false;
    },
    grader: builtinGrader,
  };
}

function benchKind(
  runtime: Extract<EpisodeRuntime, { kind: "bench" }>,
  disk: Required<AgentDiskLimit>,
): EpisodeKind {
  return {
    disk,
    sidecarLaunch: async (run) => benchLaunch(run, runtime.sdk),
    createAgent: async (run, at) => {
      const process = await createHermesAgent(run, { ...at, disk });
      return { process, collect: (r, sidecar, ended) => collectHermes(r, process, sidecar, ended) };
    },
    gradesMissing: (run) => {
      run.result.notes.push("agent_output_missing");
      return true;
    },
    grader: benchGrader(runtime.verifierNetwork),
  };
}
