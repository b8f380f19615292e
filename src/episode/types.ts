import type { ErrorCode, FailureClass } from "../errors.js";
import type { Logger } from "../log.js";
import type { Activity, Listener, ModelUsage, Receipt, UsageSummary } from "../meter/index.js";
import type { Pack } from "../pack/index.js";
import type { BuiltImage, Sandbox } from "../sandbox/index.js";
import type { UpstreamProvenance } from "./hermes-session.js";
import type { AnswerProvenance } from "./provenance.js";

/** Why the episode ended the agent (attribution.ts turns it into a failure). */
export type KillReason = "deadline" | "watchdog_no_call" | "watchdog_idle" | "policy_exited" | "disk_limit";

/**
 * What the episode needs of a scenario (the catalogue's Scenario satisfies it): the folder
 * layout of DESIGN.md "Scenario" and the parsed task.toml.
 */
export interface EpisodeScenario {
  name: string;
  /**
   * The hidden tests as files (trajrl-bench's `tests_files_b64`: test.sh and its helpers). Absent
   * for the built-in suite, whose tests are the folder `dir/tests`.
   */
  testFiles?: Readonly<Record<string, Buffer>>;
  /** scenarios/<name>: environment/, tests/, solution/ live below it. */
  dir: string;
  /** The built-in scenario's content digest (src/scenarios digest.ts): the identity of its tests. */
  digest?: string;
  /** instruction.md's text (becomes /workspace/INSTRUCTION.md). */
  instruction: string;
  task: {
    agent: { timeout_sec: number };
    verifier: { timeout_sec: number; agent_output_path: string; report?: "harness" | "files" };
    metadata?: {
      null_floor?: number | undefined;
      tests?: number | undefined;
      /** Why this scenario cannot run under gVisor (the built-in suite's task.toml); its episodes run under runc. */
      not_under_gvisor?: string | undefined;
    };
  };
}

/** The phases the episode reports itself (the evaluation adds its own around them: src/evaluation EpisodePhase). */
export type EpisodeRunPhase = "running" | "verifying";

/** Phase changes and the spend so far; the evaluation widens `Phase` to its own phases. */
export interface EpisodePhaseUpdate<Phase extends string = EpisodeRunPhase> {
  phase?: Phase;
  spentUsd?: number;
}

export interface EpisodeFailure {
  class: Exclude<FailureClass, "input">;
  code: ErrorCode;
  message: string;
}

/** What the episode needs of the meter (src/meter's Meter). */
export interface EpisodeMeter {
  mint(episodeId: string, capUsd: number): string;
  /** Retire the token; its usage once the calls it aborted have settled. */
  close(token: string): Promise<UsageSummary>;
  summary(token: string): UsageSummary;
  lastActivity(token: string): Activity;
  receiptsFor(episodeId: string): Receipt[];
  /** A listener that answers `onlyToken` alone (the episode's own network: its own budget only). */
  listen(host: string, port: number, onlyToken: string): Promise<Listener>;
  readonly priceTableHash: string;
}

/** What an image is built from: the scenario's name and folder (environment/Dockerfile). */
export interface ScenarioImageSource {
  name: string;
  dir: string;
}

/** Where the episode's images come from (src/bench, or fixed images in tests). */
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

/** The bound on what the agent's container may write (its writable layer). */
export interface AgentDiskLimit {
  /** Default: AGENT_DISK.builtin / AGENT_DISK.bench (agent.ts). */
  limitBytes?: number;
  /** Files, directories and links the layer may hold (inodes); default as limitBytes. */
  limitInodes?: number;
  /** How often the watchdog measures the layer. */
  pollMs?: number;
}

export interface RunEpisodeOptions {
  sandbox: Sandbox;
  /** Default: the built-in suite's runtime. */
  runtime?: EpisodeRuntime;
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
  /**
   * The strict provenance rule (an answer no metered call produced fails the episode, quality 0):
   * opt-in for local evaluation. Default off, as upstream: provenance is reported, never scored.
   */
  strictProvenance?: boolean;
  /** Extra environment for the agent (e.g. AGENT_MAX_TURNS); never secrets. */
  agentEnv?: Readonly<Record<string, string>>;
  timeouts?: EpisodeTimeouts;
  agentDisk?: AgentDiskLimit;
  /** Phase changes and the spend so far (polled about once a second while the agent runs). */
  onProgress?: (p: EpisodePhaseUpdate) => void;
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
  timings: {
    images_ms: number;
    setup_ms: number;
    agent_ms: number;
    verify_ms: number;
    total_ms: number;
    /** From the sidecar's creation to its health (null when it never got healthy). */
    policy_setup_ms: number | null;
    /** From the agent's end to everything copied out of its container (the sidecar stopped first). */
    collect_ms: number;
  };
  images: { sidecar: { ref: string; id: string } | null; scenario: { ref: string; id: string } | null };
  agent: {
    exit_code: number | null;
    end_reason: string | null;
    end_code: string | null;
    turns: number;
    tool_calls: number;
    killed_by: KillReason | null;
    /** Lines of the session record that are not a valid record (counted, never trusted). */
    invalid_records: number;
    /** Bytes of the agent's writable layer at the last measurement of the disk watchdog. */
    disk_bytes: number | null;
    /** Its inodes (files, directories, links) at the last count; null where they are not counted. */
    disk_inodes: number | null;
    /**
     * What was copied out of the agent's container and what was refused unread (a path that is
     * not a regular file, or larger than its cap, is never streamed): path → kind and size.
     */
    files: Record<string, { kind: string; bytes: number | null }>;
  };
  /**
   * The provider cut a model turn off before the agent ever ran a tool (infra-incomplete): the
   * episode says nothing about the policy, and the evaluation re-runs it.
   */
  truncated_before_tool_call: boolean;
  /** The agent's answers matched one to one against the meter's receipts (built-in agent; null without turns). */
  answer_provenance: AnswerProvenance | null;
  /** Upstream's shadow provenance of the agent's answers (reported, not scored; null without a session). */
  provenance: UpstreamProvenance | null;
  verifier: { exit_code: number | null; timed_out: boolean; duration_ms: number } | null;
  artifacts: { dir: string; files: Record<string, string> };
}

/** The SDK the bench image's python runs as the sidecar: files placed under /policy/sdk/. */
export interface SidecarSdk {
  /** Path of the entry file relative to /policy/sdk (upstream: trajrl_policy.py). */
  entry: string;
  files: ReadonlyArray<{ path: string; data: string | Buffer }>;
}

/**
 * How an episode runs its containers.
 *  - builtin: the built-in suite — our agent as the scenario container's command, our sidecar
 *    image, the graders at /tests with no network.
 *  - bench: trajrl-bench as upstream runs it — Hermes exec'd in the scenario image, the sidecar
 *    from the bench image itself running our SDK file, test.sh at /test.sh.
 */
export type EpisodeRuntime =
  | { kind: "builtin" }
  | {
      kind: "bench";
      sdk: SidecarSdk;
      /** The verifier's network: upstream's `bridge` (graders may fetch tools) or `none`. */
      verifierNetwork: "none" | "bridge";
    };
