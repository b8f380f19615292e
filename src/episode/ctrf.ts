/**
 * What a verifier leaves behind, parsed once at the boundary: /logs/verifier/ctrf.json (CTRF) and
 * /logs/verifier/reward.txt. Score of an episode = passed/tests when tests > 0, else the reward.
 */
import { z } from "zod";

const ctrfTest = z.object({
  name: z.string(),
  status: z.string(),
  duration: z.number().optional(),
  message: z.string().optional(),
});

const ctrfSchema = z.object({
  results: z.object({
    tool: z.object({ name: z.string() }).partial().optional(),
    summary: z
      .object({
        tests: z.number().int().nonnegative(),
        passed: z.number().int().nonnegative(),
        failed: z.number().int().nonnegative().optional(),
      })
      .optional(),
    tests: z.array(ctrfTest).default([]),
  }),
});

export type CtrfTest = z.infer<typeof ctrfTest>;

export interface CtrfReport {
  tests: number;
  passed: number;
  failed: number;
  entries: CtrfTest[];
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; error: string };

/**
 * Counts come from the per-test entries when present (they are what was run), else from the
 * summary; a summary claiming more passes than tests is rejected rather than trusted.
 */
export function parseCtrf(text: string): Parsed<CtrfReport> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    return { ok: false, error: `ctrf.json is not JSON: ${(err as Error).message}` };
  }
  const r = ctrfSchema.safeParse(raw);
  if (!r.success) return { ok: false, error: `ctrf.json does not match CTRF: ${r.error.issues[0]?.message}` };
  const { summary, tests: entries } = r.data.results;
  let tests: number;
  let passed: number;
  if (entries.length > 0) {
    tests = entries.length;
    passed = entries.filter((t) => t.status === "passed").length;
  } else if (summary) {
    tests = summary.tests;
    passed = summary.passed;
  } else return { ok: false, error: "ctrf.json has neither tests nor a summary" };
  if (passed > tests) return { ok: false, error: `ctrf.json claims ${passed} passed of ${tests}` };
  return { ok: true, value: { tests, passed, failed: tests - passed, entries } };
}

/** reward.txt: one number in [0, 1] ("1", "0", "0.5"). */
export function parseReward(text: string): Parsed<number> {
  const s = text.trim();
  if (!/^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(s))
    return { ok: false, error: `reward.txt is not a number: ${JSON.stringify(s.slice(0, 40))}` };
  const v = Number(s);
  if (!Number.isFinite(v) || v < 0 || v > 1) return { ok: false, error: `reward.txt out of [0, 1]: ${s}` };
  return { ok: true, value: v };
}

export interface Score {
  quality: number;
  tests: number;
  passed: number;
  source: "ctrf" | "reward";
}

/** passed/tests when the report has tests; else the reward; undefined when neither is usable. */
export function scoreOf(ctrf: CtrfReport | undefined, reward: number | undefined): Score | undefined {
  if (ctrf && ctrf.tests > 0)
    return { quality: ctrf.passed / ctrf.tests, tests: ctrf.tests, passed: ctrf.passed, source: "ctrf" };
  if (reward !== undefined)
    return { quality: reward, tests: ctrf?.tests ?? 0, passed: ctrf?.passed ?? 0, source: "reward" };
  return undefined;
}
