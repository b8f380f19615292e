/**
 * What graded an episode, written beside its artifacts: `grading.json` (the image, the tests'
 * identity, the contract, what the grader reported) and `deliverable` (the bytes exactly as the
 * verifier got them). A verdict's evidence (src/evidence) is built from these, and `verify`
 * re-grades from them. Best effort, as every artifact: a full disk loses the record, never the score.
 */
import { sha256Hex } from "../hash.js";
import type { FetchedPath } from "../sandbox/index.js";
import { ARTIFACT_FILES } from "./artifacts.js";
import type { GraderDescription, GraderKind } from "./grader.js";
import type { EpisodeRun } from "./run-context.js";
import type { GradeResult } from "./verifier.js";

export interface GradingRecord {
  schema: 1;
  /** False when the deliverable was not graded (the built-in suite scores a missing one 0 ungraded). */
  graded: boolean;
  grader: GraderKind;
  /** The scenario image the verifier ran (the agent's image); `repo_digest` when it came from a registry. */
  image: { ref: string; id: string; repo_digest: string | null };
  /** The built-in scenario's content digest, or the digest of the bench's `tests_files_b64`. */
  tests: { kind: "scenario" | "tests_files"; digest: string | null };
  agent_output_path: string;
  timeout_ms: number;
  declared_tests: number | null;
  network: "none" | "bridge";
  /** What was found at the deliverable path; the bytes are the `deliverable` artifact. */
  deliverable: { kind: string; bytes: number | null; sha256: string | null };
  /** reward.txt as written (files contract and bench); ctrf.json is its own artifact. */
  report: { reward_text: string | null };
  grade: {
    quality: number;
    tests: number;
    passed: number;
    reward: number | null;
    failure: string | null;
  } | null;
}

export interface GradingFacts {
  image: { ref: string; id: string; repoDigest?: string | undefined };
  /** The grader the episode's kind grades with (grader.ts). */
  grader: GraderDescription;
  timeoutMs: number;
  deliverable: FetchedPath;
  grade: GradeResult | undefined;
}

export function gradingRecord(run: EpisodeRun, f: GradingFacts): GradingRecord {
  const s = run.scenario;
  const data = f.deliverable.kind === "file" ? f.deliverable.data : undefined;
  const g = f.grade;
  return {
    schema: 1,
    graded: g !== undefined,
    grader: f.grader.grader,
    image: { ref: f.image.ref, id: f.image.id, repo_digest: f.image.repoDigest ?? null },
    tests: f.grader.tests,
    agent_output_path: s.task.verifier.agent_output_path,
    timeout_ms: f.timeoutMs,
    declared_tests: f.grader.declaredTests,
    network: f.grader.network,
    deliverable: {
      kind: f.deliverable.kind,
      bytes: data?.length ?? null,
      sha256: data === undefined ? null : sha256Hex(data),
    },
    report: { reward_text: g?.rewardText ?? null },
    grade: g
      ? {
          quality: g.quality,
          tests: g.tests,
          passed: g.passed,
          reward: g.reward ?? null,
          failure: g.failure?.code ?? null,
        }
      : null,
  };
}

/** grading.json and the deliverable's bytes into the episode's artifacts. */
export async function writeGradingRecord(run: EpisodeRun, f: GradingFacts): Promise<void> {
  const data = f.deliverable.kind === "file" ? f.deliverable.data : undefined;
  await run.artifacts.write(ARTIFACT_FILES.deliverable, data);
  await run.artifacts.json(ARTIFACT_FILES.grading, gradingRecord(run, f));
}
