/**
 * What differs between the two kinds of episode, chosen once per episode: the built-in suite (our
 * sidecar image, the built-in agent, the scenario's harness or files grader) and the registry
 * bench (the bench image as sidecar, Hermes as the agent, upstream's verifier). The episode's
 * steps call these and never ask which kind they run.
 */
import { join } from "node:path";
import type { BuiltImage, EpisodeTopology } from "../sandbox/index.js";
import { type AgentProcess, type AgentRun, agentDiskOf, createAgent } from "./agent.js";
import { gradeBenchDeliverable } from "./bench-verifier.js";
import { type Collected, collectAgent, collectHermes } from "./collect.js";
import { createHermesAgent } from "./hermes-agent.js";
import type { EpisodeRun } from "./run-context.js";
import { benchLaunch, builtinLaunch, type Sidecar, type SidecarLaunch } from "./sidecar.js";
import type { AgentDiskLimit, EpisodeRuntime, RunEpisodeOptions } from "./types.js";
import { type GradeResult, gradeDeliverable, reportContractOf } from "./verifier.js";

/** The agent once created, with the way what it left is collected. */
export interface EpisodeAgent {
  process: AgentProcess;
  collect(run: EpisodeRun, sidecar: Sidecar, ended: AgentRun): Promise<Collected>;
}

export interface GradeRequest {
  image: BuiltImage;
  agentOutputPath: string;
  /** The deliverable's bytes; undefined when the agent left no regular file at the path. */
  deliverable: Buffer | undefined;
  verifierMs: number;
  signal: AbortSignal | undefined;
}

export interface EpisodeKind {
  readonly runtime: EpisodeRuntime;
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
  /** Grade the deliverable in a fresh verifier. */
  grade(run: EpisodeRun, req: GradeRequest): Promise<GradeResult>;
}

/** The kind of episode the runtime asks for. */
export function episodeKindOf(
  runtime: EpisodeRuntime,
  opts: Pick<RunEpisodeOptions, "agentDisk" | "agentCommand" | "agentEnv">,
): EpisodeKind {
  return runtime.kind === "bench"
    ? benchKind(runtime, agentDiskOf("bench", opts.agentDisk))
    : builtinKind(runtime, agentDiskOf("builtin", opts.agentDisk), opts);
}

function builtinKind(
  runtime: EpisodeRuntime,
  disk: Required<AgentDiskLimit>,
  opts: Pick<RunEpisodeOptions, "agentCommand" | "agentEnv">,
): EpisodeKind {
  return {
    runtime,
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
    grade: (run, req) =>
      gradeDeliverable({
        docker: run.sandbox.docker,
        scope: run.scope!,
        image: req.image.ref,
        testsDir: join(run.scenario.dir, "tests"),
        agentOutputPath: req.agentOutputPath,
        deliverable: req.deliverable ?? Buffer.alloc(0),
        timeoutMs: req.verifierMs,
        report: reportContractOf(run.scenario),
        ...(req.signal ? { signal: req.signal } : {}),
        log: run.log,
      }),
  };
}

function benchKind(
  runtime: Extract<EpisodeRuntime, { kind: "bench" }>,
  disk: Required<AgentDiskLimit>,
): EpisodeKind {
  return {
    runtime,
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
    grade: (run, req) =>
      gradeBenchDeliverable({
        sandbox: run.sandbox,
        scope: run.scope!,
        image: req.image.ref,
        testFiles: run.scenario.testFiles ?? {},
        agentOutputPath: req.agentOutputPath,
        deliverable: req.deliverable,
        timeoutMs: req.verifierMs,
        network: runtime.verifierNetwork,
        ...(req.signal ? { signal: req.signal } : {}),
      }),
  };
}
