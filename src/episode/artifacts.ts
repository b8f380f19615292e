/**
 * The files an episode leaves in the run's output folder (outDir/<scenario>/): what an operator
 * or a miner reads to understand a score. Written best-effort: a full disk must not turn a
 * scored episode into a crash, so failures are logged and listed, never thrown.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../log.js";

export const ARTIFACT_FILES = {
  policyLog: "policy.log",
  meter: "meter.json",
  transcript: "transcript.txt",
  agentLog: "agent.log",
  turns: "turns.jsonl",
  evaluation: "evaluation.json",
  ctrf: "ctrf.json",
  verifierLog: "verifier.log",
  error: "error.txt",
  /** The deliverable's bytes exactly as the verifier got them (grading-record.ts). */
  deliverable: "deliverable",
  /** What graded the episode (grading-record.ts): what a verdict's evidence is built from. */
  grading: "grading.json",
} as const;

export class ArtifactWriter {
  readonly written: Record<string, string> = {};
  readonly failed: string[] = [];

  constructor(
    readonly dir: string,
    private readonly log: Logger,
  ) {}

  async init(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
  }

  async write(name: string, content: string | Buffer | undefined): Promise<void> {
    if (content === undefined) return;
    const path = join(this.dir, name);
    try {
      await writeFile(path, content);
      this.written[name] = path;
    } catch (err) {
      this.failed.push(name);
      this.log.warn({ file: path, err: (err as Error).message }, "artifact.write.failed");
    }
  }

  json(name: string, value: unknown): Promise<void> {
    return this.write(name, `${JSON.stringify(value, null, 2)}\n`);
  }
}
