import type { BenchProgress, BenchSource } from "../bench/index.js";
import type {
  EpisodeFailure,
  EpisodeMeter,
  EpisodePhaseUpdate,
  EpisodeRunPhase,
  EpisodeTimeouts,
} from "../episode/index.js";
import type { ErrorCode } from "../errors.js";
import type { Logger } from "../log.js";
import type { ModelUsage as MeterModelUsage, UsageSummary } from "../meter/index.js";
import type { EnginePool } from "../pool/index.js";
import type { Sandbox } from "../sandbox/index.js";
import type { EvaluationRepo } from "../store/index.js";

/** Where one scenario of an evaluation stands, for progress views and the platform's progress events. */
export type EpisodePhase = "queued" | "starting" | EpisodeRunPhase | "done" | "failed" | "retrying";

/** `cost_usd` → `costUsd`: a snake_case key as the evaluation's camelCase records spell it. */
type CamelKey<K extends string> = K extends `${infer Head}_${infer Tail}`
  ? `${Head}${Capitalize<CamelKey<Tail>>}`
  : K;
/** The meter's snake_case record with camelCase keys: one definition, two spellings (outcome.ts converts). */
type Camel<T> = { [K in keyof T as K extends string ? CamelKey<K> : K]: T[K] };

/** The meter's per-model usage (src/meter ModelUsage), as the evaluation spells it. */
export type ModelUsage = Camel<MeterModelUsage>;

/** The episode's failure (src/episode): policy, upstream or infra, never input. */
export type { EpisodeFailure };

/** What one episode produced, as the evaluation needs it (the episode layer maps its result into this). */
export interface EpisodeOutcome {
  scenario: string;
  /** scored: the verifier ran on what the agent delivered; failed: no score could be taken. */
  status: "scored" | "failed";
  /** passed/tests when tests > 0, else the reward; 0 when failed. */
  quality: number;
  tests: number;
  passed: number;
  failure?: EpisodeFailure;
  costUsd: number;
  byModel: Record<string, ModelUsage>;
  /** Metered calls that reached the provider and were billed. */
  billedCalls: number;
  /** What the meter saw of the episode (absent on outcomes stored before it existed, or without a token). */
  meter?: MeterFacts;
  /** The model's turn was cut off by the provider before any tool call ran (infra-incomplete). */
  truncatedBeforeToolCall: boolean;
  /**
   * How the agent ended (upstream's `chat_exit` / `timed_out`): its exit status (null when it was
   * stopped, never ran, or is unknown) and what stopped it. Absent on outcomes stored before it existed.
   */
  agent?: { exitCode: number | null; killedBy: string | null };
  /** The scenario's upstream/infra failure followed the pack through every re-run (verdict.ts followsThePack). */
  chargedToPack?: boolean;
  timings: { setupMs: number; agentMs: number; verifyMs: number; totalMs: number };
  imageDigests: Record<string, string>;
  artifactsDir?: string;
  /** What the judge entry of the score carries beside the score (upstream's keys; reported, not scored). */
  judge?: JudgeFacts;
}

/**
 * An episode's meter summary, as the discard rules and their messages read it: the meter's
 * UsageSummary fields (their meaning documented there) in camelCase.
 */
export type MeterFacts = Camel<
  Pick<UsageSummary, "calls" | "errors" | "cut" | "refused" | "estimated_usd" | "longest_wait_s">
>;

/** Per-scenario facts upstream reports in `scenario_results[name].judge` (miner_eval.py). */
export interface JudgeFacts {
  meterCalls: number;
  /** Calls refused for the cap or an off-allowlist model. */
  meterRefused: number;
  /** Upstream's shadow provenance `{total, matched, unmatched, coverage}`. */
  provenance: { total: number; matched: number; unmatched: number[]; coverage: number | null } | null;
  /** Seconds from the sidecar's creation to its health (null when it never got healthy). */
  policySetupS: number | null;
  policyStalled: boolean;
}

/** The episode's phase updates, over the evaluation's phases. */
export type EpisodeProgress = EpisodePhaseUpdate<EpisodePhase>;

export interface EpisodeRequest {
  evaluationId: string;
  episodeId: string;
  scenario: string;
  attempt: number;
  signal: AbortSignal;
  onProgress: (p: EpisodeProgress) => void;
}

/** Runs one episode. Never throws for policy faults; throws or returns a failed outcome for upstream/infra. */
export type EpisodeRunner = (req: EpisodeRequest) => Promise<EpisodeOutcome>;

/** A scenario's place in the verdict: its last attempt's outcome, as scored, and how many attempts it took. */
export interface ScenarioVerdict
  extends Pick<
    EpisodeOutcome,
    | "scenario"
    | "quality"
    | "tests"
    | "passed"
    | "status"
    | "failure"
    | "costUsd"
    | "byModel"
    | "timings"
    | "judge"
    | "chargedToPack"
  > {
  attempts: number;
  episodeId: string;
}

/** Where the scenarios and their images came from (the bench source's provenance). */
export interface BenchFacts {
  source: "builtin" | "registry";
  /** The bench image reference (registry). */
  ref?: string;
  benchImageHash?: string;
  /** Scenario image digests joined with ':' (registry bench: in the local spec's order, as upstream's). */
  harnessImageHash: string;
  benchVersion?: string;
  harnessName?: string;
  harnessVersion?: string;
}

export interface Provenance {
  priceTableHash: string;
  imageDigests: Record<string, string>;
  validatorVersion: string;
  harness: { name: string; version: string };
  llm: { baseUrl: string; simulated: boolean; defaultModel: string };
  capUsd: number;
  concurrency: number;
  /**
   * The built-in suite's set that ran (`builtin`, `quick`, `custom` for an explicit list): such a
   * verdict's `spec` is 0, never a subnet spec. Absent for the subnet's benchmark.
   */
  suite?: string;
  /** Absent on verdicts stored before the bench sources existed. */
  bench?: BenchFacts;
  /** Upstream's static scan of the policy files (`policy_scan`; null for a pack without any). */
  policyScan?: Record<string, unknown> | null;
}

export interface Verdict {
  evaluationId: string;
  packHash: string;
  /** The subnet spec; 0 on the built-in suite (its set is `provenance.suite`). */
  spec: number;
  /** Σ episode quality, rounded to 4 dp. */
  score: number;
  /** Any episode scored above 0. */
  qualified: boolean;
  rejected: boolean;
  rejection?: { code: string; message: string };
  scenarios: ScenarioVerdict[];
  costUsd: number;
  byModel: Record<string, ModelUsage>;
  provenance: Provenance;
  startedAt: string;
  finishedAt: string;
}

export type EvaluationResult =
  | { kind: "verdict"; evaluationId: string; verdict: Verdict }
  | { kind: "discarded"; evaluationId: string; code: ErrorCode; message: string }
  | { kind: "aborted"; evaluationId: string; reason: string };

export interface EvaluationEvent {
  evaluationId: string;
  scenario: string;
  phase: EpisodePhase;
  attempt: number;
  spentUsd: number;
  capUsd: number;
  elapsedMs: number;
  quality?: number;
  failure?: EpisodeFailure;
  /** On done/failed: the agent was stopped by its deadline or the policy-stall watchdog (upstream's timed_out). */
  timedOut?: boolean;
}

/** One episode ended (the status page tallies them by outcome and failure class). */
export interface EpisodeEnd {
  scenario: string;
  outcome: "scored" | "failed";
  failureClass?: string;
  failureCode?: string;
}

/** Who watches an evaluation as it runs (the status page's LiveStatus satisfies it). */
export interface EvaluationObserver {
  startEvaluation(v: {
    evaluationId: string;
    packHash: string;
    label: string;
    epochId: number | null;
    spec: number;
    /** The built-in suite's set (then `spec` is 0); absent for the subnet's benchmark. */
    suite?: string;
    capUsd: number;
    scenarios: string[];
  }): void;
  onProgress(e: EvaluationEvent): void;
  episodeEnd(e: EpisodeEnd): void;
  endEvaluation(): void;
  raise(code: string, message: string, severity?: "warn" | "error"): void;
  /** Image builds and pulls while the bench is prepared (the status page shows them). */
  benchProgress?(p: BenchProgress): void;
  /** An alarm's cause is gone (the status page's LiveStatus clears it). */
  clear?(code: string): void;
}

/** The settings an evaluation reads, taken from the configuration once by the composition root. */
export interface EvaluationSettings {
  dataDir: string;
  concurrency: number;
  /** SPEC_NUMBER: the subnet spec when the caller names none (undefined → the newest); the built-in suite ignores it. */
  specNumber: number | undefined;
  defaultModel: string;
  agentCommand: string | undefined;
  /** Shorter episode timeouts (tests). */
  episodeTimeouts: EpisodeTimeouts | undefined;
  /** Extra environment for the built-in agent (tests: e.g. AGENT_LLM_RETRIES); never secrets. */
  agentEnv?: Readonly<Record<string, string>> | undefined;
  /** The strict provenance rule (opt-in for local evaluation; upstream reports, never scores). */
  strictProvenance: boolean;
  llm: { baseUrl: string; simulated: boolean };
}

/** What an evaluation needs of the long-lived environment (src/environment builds it). */
export interface EvaluationEnvironment {
  log: Logger;
  repo: EvaluationRepo;
  meter: EpisodeMeter;
  /** The first engine's sandbox (images, probes); episodes run on `pool` when there is one. */
  sandbox: Sandbox;
  /** The engines episodes are placed on (src/environment opens it; absent: every episode on `sandbox`). */
  pool?: EnginePool;
  /** Where scenarios and images come from: the built-in suite or the subnet's benchmark. */
  bench: BenchSource;
  observer: EvaluationObserver;
  settings: EvaluationSettings;
}
