/**
 * How a deliverable is graded: the built-in suite's verifier (verifier.ts: the scenario's tests/,
 * its harness or files contract) or the registry bench's (bench-verifier.ts: upstream's layout and
 * rules). One `Grader` is chosen with the episode's kind (episode-kind.ts), or by the caller of
 * `scenarios check`; what differs between the two is data (`describe`, the flags) and the grading
 * function, so the episode, the check and grading.json never ask which one they have.
 */
import { join } from "node:path";
import { InfraError } from "../errors.js";
import type { Logger } from "../log.js";
import type { EpisodeEngine, EpisodeScope } from "../sandbox/index.js";
import { testFilesDigest } from "../scenarios/index.js";
import { type GraderNetworks, gradeBenchDeliverable } from "./bench-verifier.js";
import type { EpisodeScenario } from "./types.js";
import { type GradeResult, gradeDeliverable, reportContractOf } from "./verifier.js";

/** Which grading code ran: the built-in suite's harness or files contract, or the registry bench's verifier. */
export type GraderKind = "harness" | "files" | "bench";

/** What grading.json records of the grader of a scenario. */
export interface GraderDescription {
  grader: GraderKind;
  /** The built-in scenario's content digest, or the digest of the bench's `tests_files_b64`. */
  tests: { kind: "scenario" | "tests_files"; digest: string | null };
  declaredTests: number | null;
  network: "none" | "bridge";
}

/** Where one grading runs: the engine (the episode's seam), the grader networks' pool, its scope. */
export interface GradeSite {
  engine: EpisodeEngine;
  networks: GraderNetworks;
  scope: EpisodeScope;
  log?: Logger | undefined;
  signal?: AbortSignal | undefined;
}

/** One deliverable to grade. */
export interface GradeAsk {
  /** The scenario image (the one the agent ran in). */
  image: string;
  agentOutputPath: string;
  /** Undefined when the agent left no regular file at the path. */
  deliverable: Buffer | undefined;
  timeoutMs: number;
  /** Tells several gradings of one scope apart (the built-in verifier's container name). */
  label?: string;
}

export interface Grader {
  describe(scenario: EpisodeScenario): GraderDescription;
  /** Throws when this grader cannot grade the scenario at all (the bench's needs its test files). */
  ensureTests(scenario: EpisodeScenario): void;
  /** `scenarios check` grades the hostile probe too (the harness; upstream's files report no probe can make safer). */
  readonly gradesHostileProbe: boolean;
  /** Its container is named after the scope alone: several gradings at once need a scope each. */
  readonly scopePerGrading: boolean;
  grade(site: GradeSite, scenario: EpisodeScenario, ask: GradeAsk): Promise<GradeResult>;
}

/** The built-in suite's verifier: the scenario's tests/, its report contract, no network. */
export const builtinGrader: Grader = {
  describe: (s) => ({
    grader: reportContractOf(s).channel,
    tests: { kind: "scenario", digest: s.digest ?? null },
    declaredTests: s.task.metadata?.tests ?? null,
    network: "none",
  }),
  ensureTests: () => undefined,
  gradesHostileProbe: true,
  scopePerGrading: false,
  grade: (site, scenario, ask) =>
    gradeDeliverable({
      engine: site.engine,
      scope: site.scope,
      image: ask.image,
      testsDir: join(scenario.dir, "tests"),
      agentOutputPath: ask.agentOutputPath,
      deliverable: ask.deliverable ?? Buffer.alloc(0),
      timeoutMs: ask.timeoutMs,
      report: reportContractOf(scenario),
      ...(ask.label !== undefined ? { label: ask.label } : {}),
      ...(site.signal ? { signal: site.signal } : {}),
      ...(site.log ? { log: site.log } : {}),
    }),
};

/** The registry bench's verifier (upstream's), its network `none` or a `bridge` of its own. */
export function benchGrader(network: "none" | "bridge"): Grader {
  return {
    describe: (s) => ({
      grader: "bench",
      tests: { kind: "tests_files", digest: testFilesDigest(s.testFiles ?? {}) },
      declaredTests: null,
      network,
    }),
    ensureTests: (s) => {
      if (!s.testFiles) throw new InfraError("check_no_tests", `${s.name}: the bench gave no test files`);
    },
    gradesHostileProbe: false,
    scopePerGrading: true,
    grade: (site, scenario, ask) =>
      gradeBenchDeliverable({
        engine: site.engine,
        networks: site.networks,
        scope: site.scope,
        image: ask.image,
        testFiles: scenario.testFiles ?? {},
        agentOutputPath: ask.agentOutputPath,
        deliverable: ask.deliverable,
        timeoutMs: ask.timeoutMs,
        network,
        ...(site.signal ? { signal: site.signal } : {}),
      }),
  };
}
