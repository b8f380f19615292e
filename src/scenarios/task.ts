/**
 * task.toml: parsed with smol-toml and validated with zod, once, at the boundary. Field names
 * stay as in the file (snake_case), because episodes and `scenarios check` read them as such.
 * Pure: text in, TaskSpec out; problems become ScenarioError naming the file and the field.
 */
import { posix } from "node:path";
import { parse as parseToml } from "smol-toml";
import { z } from "zod";
import { type ErrorCode, InputError } from "../errors.js";

/** Protocol caps (DESIGN.md: 600 s per scenario for the agent; graders get at most 300 s). */
export const MAX_AGENT_TIMEOUT_SEC = 600;
export const MAX_VERIFIER_TIMEOUT_SEC = 300;
export const DEFAULT_AGENT_TIMEOUT_SEC = 600;
export const DEFAULT_VERIFIER_TIMEOUT_SEC = 300;

/** A scenario folder or file that does not meet the contract; the message names file and field. */
export class ScenarioError extends InputError {
  constructor(code: ErrorCode, message: string, detail?: Record<string, unknown>) {
    super(code, message, detail ? { detail } : {});
    this.name = "ScenarioError";
  }
}

/** Where only the verifier's own files live: a deliverable there would overwrite the grader. */
const RESERVED_ROOTS = ["/tests", "/logs"];

/** Why `p` cannot be the one deliverable file, or undefined when it can. */
export function deliverablePathProblem(p: string): string | undefined {
  if (!p.startsWith("/")) return "must be an absolute path";
  if (p.includes("\0")) return "must not contain NUL";
  if (p.endsWith("/")) return "must name a file, not a directory (trailing '/')";
  const segments = p.split("/").slice(1);
  if (segments.some((s) => s === "." || s === "..")) return "must not contain '.' or '..' segments";
  if (posix.normalize(p) !== p) return `must be normalised (${posix.normalize(p)})`;
  if (RESERVED_ROOTS.some((r) => p === r || p.startsWith(`${r}/`)))
    return `must not be under ${RESERVED_ROOTS.join(" or ")} (the verifier's own files)`;
  return undefined;
}

const timeout = (max: number, fallback: number) =>
  z
    .number()
    .int("must be an integer")
    .positive("must be positive")
    .max(max, `must be at most ${max}`)
    .default(fallback);

const fraction = z.number().min(0, "must be in [0, 1]").max(1, "must be in [0, 1]");

/** Most tests a scenario may declare (the authoring guide asks for 3–8). */
export const MAX_DECLARED_TESTS = 64;

// Unknown keys are kept (Harbor task.toml files carry more: author, tags, [environment] sizes).
const TaskSchema = z.looseObject({
  version: z.string().optional(),
  metadata: z.looseObject({
    difficulty: z.enum(["easy", "medium", "hard"]),
    category: z.string().trim().min(1, "must not be empty"),
    tags: z.array(z.string()).default([]),
    null_floor: fraction,
    cheat_floors: z.record(z.string(), fraction).default({}),
    tests: z
      .number()
      .int("must be an integer")
      .positive("must be positive")
      .max(MAX_DECLARED_TESTS, `must be at most ${MAX_DECLARED_TESTS}`)
      .optional(),
    not_under_gvisor: z.string().trim().min(1, "must say why").optional(),
  }),
  agent: z
    .looseObject({ timeout_sec: timeout(MAX_AGENT_TIMEOUT_SEC, DEFAULT_AGENT_TIMEOUT_SEC) })
    .default({ timeout_sec: DEFAULT_AGENT_TIMEOUT_SEC }),
  verifier: z.looseObject({
    timeout_sec: timeout(MAX_VERIFIER_TIMEOUT_SEC, DEFAULT_VERIFIER_TIMEOUT_SEC),
    report: z.enum(["harness", "files"]).default("harness"),
    agent_output_path: z.string().superRefine((p, ctx) => {
      const problem = deliverablePathProblem(p);
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    }),
  }),
});

export interface TaskSpec {
  version: string | undefined;
  agent: { timeout_sec: number };
  verifier: {
    timeout_sec: number;
    agent_output_path: string;
    /**
     * How the grader's report reaches the validator: "harness" (scenarios/_harness: a report signed
     * with a key given on stdin, printed on stdout) or "files" (upstream's /logs/verifier/ctrf.json
     * and reward.txt, for graders that do not use the harness). See src/episode/README.md.
     */
    report: "harness" | "files";
  };
  metadata: {
    difficulty: "easy" | "medium" | "hard";
    category: string;
    tags: string[];
    /** passed/tests of an empty deliverable (0-byte file, mode 0755): `scenarios check` proves it. */
    null_floor: number;
    /** What the cheap strategies score (documentation; not enforced). */
    cheat_floors: Record<string, number>;
    /** How many tests the grader runs: a report with another count is not a score. */
    tests: number | undefined;
    /**
     * Why the scenario cannot run under gVisor, found by `scenarios check` under runsc: its episodes
     * run under runc where EPISODE_RUNTIME=auto, and are refused under EPISODE_RUNTIME=runsc.
     */
    not_under_gvisor?: string;
  };
}

function describeIssue(issue: z.core.$ZodIssue): string {
  const field = issue.path.length ? issue.path.map(String).join(".") : "(file)";
  if (issue.code === "invalid_type" && /received undefined/.test(issue.message)) return `${field}: required`;
  return `${field}: ${issue.message}`;
}

/** Parse and validate the text of a task.toml; `file` only labels the error messages. */
export function parseTaskToml(text: string, file: string): TaskSpec {
  let raw: unknown;
  try {
    raw = parseToml(text);
  } catch (err) {
    throw new ScenarioError(
      "scenario_invalid",
      `${file}: not valid TOML: ${(err as Error).message.split("\n")[0]}`,
    );
  }
  const r = TaskSchema.safeParse(raw);
  if (!r.success) {
    const fields = r.error.issues.map(describeIssue);
    throw new ScenarioError("scenario_invalid", `${file}: ${fields.join("; ")}`, { file, fields });
  }
  const t = r.data;
  return {
    version: t.version,
    agent: { timeout_sec: t.agent.timeout_sec },
    verifier: {
      timeout_sec: t.verifier.timeout_sec,
      agent_output_path: t.verifier.agent_output_path,
      report: t.verifier.report,
    },
    metadata: {
      difficulty: t.metadata.difficulty,
      category: t.metadata.category,
      tags: t.metadata.tags,
      null_floor: t.metadata.null_floor,
      cheat_floors: t.metadata.cheat_floors,
      tests: t.metadata.tests,
      ...(t.metadata.not_under_gvisor ? { not_under_gvisor: t.metadata.not_under_gvisor } : {}),
    },
  };
}
