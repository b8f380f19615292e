/**
 * Crash safety: the `eval` process is killed with SIGKILL at seeded random moments of an
 * evaluation, then the same command runs again on the same DATA_DIR. Every time: the verdict equals
 * the uninterrupted run's, exactly one evaluation is scored, each scenario has exactly one final
 * episode, the final episodes' receipts are all there (none duplicated, summing to their cost), and
 * no container or network of either process is left.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { beforeAll, describe, expect, it } from "vitest";
import { leftoversOf } from "../helpers/cli.js";
import { requireDocker } from "../helpers/docker.js";
import { type EvalRun, runEvalCli } from "../helpers/eval-cli.js";

const SEED = Number(process.env.CRASH_SEED ?? 20261203);
const POINTS = Number(process.env.CRASH_POINTS ?? 20);
const ARGS = [
  "examples/packs/escalate.json",
  "--scenarios",
  "access-log-regex,binary-flag-hunt",
  "--concurrency",
  "2",
  "--json",
];

function evalCli(dataDir: string, killAfterMs?: number): Promise<EvalRun> {
  return runEvalCli(dataDir, ARGS, killAfterMs === undefined ? {} : { killAfterMs });
}

type Verdict = {
  score: number;
  qualified: boolean;
  scenarios: Array<{ scenario: string; quality: number; passed: number; tests: number }>;
};

function essence(v: Verdict): Verdict {
  return {
    score: v.score,
    qualified: v.qualified,
    scenarios: v.scenarios.map(({ scenario, quality, passed, tests }) => ({
      scenario,
      quality,
      passed,
      tests,
    })),
  };
}

/** The verdict printed by `eval --json`. */
const verdictOf = (stdout: string): Verdict =>
  essence((JSON.parse(stdout.slice(stdout.indexOf("[\n"))) as Array<{ verdict: Verdict }>)[0]!.verdict);

/** What a run's scenarios failed with, for the message of a verdict that differs. */
const failuresOf = (stdout: string): string =>
  JSON.stringify(
    (
      JSON.parse(stdout.slice(stdout.indexOf("[\n"))) as Array<{
        verdict: { scenarios: Array<{ scenario: string; failure?: unknown; attempts?: number }> };
      }>
    )[0]!.verdict.scenarios.map((x) => ({ scenario: x.scenario, attempts: x.attempts, failure: x.failure })),
  );

/** The verdict stored in SQLite. */
const essenceOf = (json: string | null): Verdict => essence(JSON.parse(json ?? "null") as Verdict);

/** A small seeded generator (mulberry32): the kill points replay from the printed seed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface DbFacts {
  evaluations: Array<{ id: string; status: string; verdict: string | null }>;
  finals: Array<{ id: string; evaluation_id: string; scenario: string; cost_usd: number; outcome: string }>;
  receipts: Array<{ episode_id: string; seq: number; usd_pico: string }>;
  statuses: string[];
}

function facts(dataDir: string): DbFacts {
  const db = new Database(join(dataDir, "validator.sqlite"), { readonly: true });
  try {
    return {
      evaluations: db
        .prepare("SELECT id, status, verdict FROM evaluations ORDER BY created_at")
        .all() as DbFacts["evaluations"],
      finals: db
        .prepare("SELECT id, evaluation_id, scenario, cost_usd, outcome FROM episodes WHERE status = 'final'")
        .all() as DbFacts["finals"],
      receipts: db
        .prepare("SELECT episode_id, seq, CAST(usd_pico AS TEXT) AS usd_pico FROM receipts")
        .all() as DbFacts["receipts"],
      statuses: (db.prepare("SELECT status FROM episodes").all() as Array<{ status: string }>).map(
        (r) => r.status,
      ),
    };
  } finally {
    db.close();
  }
}

describe("kill -9 at random points of an evaluation", () => {
  let baseline: Verdict;
  let baselineMs = 0;

  beforeAll(async () => {
    await requireDocker();
    const run = await evalCli(mkdtempSync(join(tmpdir(), "crash-base-")));
    expect(run.code, run.stderr).toBe(0);
    baseline = verdictOf(run.stdout);
    baselineMs = run.ms;
  }, 600_000);

  it(`${POINTS} seeded kill points: the same verdict once, receipts complete, nothing left`, async () => {
    const next = rng(SEED);
    const summary: string[] = [];
    let killedMidway = 0;
    const need = Math.ceil(POINTS * 0.7);
    // From process start to just past an uninterrupted run's end (some land after the verdict).
    // The horizon follows the machine: a run that finished before its kill point says how long a
    // whole run takes now (the baseline may have run on a busier machine), and when too few points
    // landed mid-run, more are drawn (at most POINTS more) so the test always proves as much.
    let horizonMs = baselineMs * 1.05;
    for (let k = 0; k < POINTS || (killedMidway < need && k < 2 * POINTS); k++) {
      const dataDir = mkdtempSync(join(tmpdir(), `crash-${k}-`));
      const at = Math.round(next() * horizonMs);
      const killed = await evalCli(dataDir, at);
      const wasKilled = killed.code === null;
      if (wasKilled) killedMidway++;
      else horizonMs = Math.min(horizonMs, killed.ms * 1.05);
      // Had the killed run already stored its verdict? Then re-running is a new evaluation (a local
      // `eval` of a finished command measures again); otherwise it must resume the same one.
      let finishedBefore = false;
      try {
        finishedBefore = facts(dataDir).evaluations.some((e) => e.status === "scored");
      } catch {
        // killed before the database existed
      }
      const resumed = await evalCli(dataDir);
      expect(resumed.code, `point ${k} (${at} ms): ${resumed.stderr}`).toBe(0);
      expect(verdictOf(resumed.stdout), `point ${k} (${at} ms): ${failuresOf(resumed.stdout)}`).toEqual(
        baseline,
      );

      const f = facts(dataDir);
      // The verdict is produced once per evaluation: the interrupted one is resumed, never doubled.
      expect(f.evaluations.map((e) => e.status)).toEqual(finishedBefore ? ["scored", "scored"] : ["scored"]);
      for (const e of f.evaluations) {
        expect(essenceOf(e.verdict)).toEqual(baseline);
        // One final episode per scenario; whatever the kill interrupted was re-run, not kept.
        const mine = f.finals.filter((x) => x.evaluation_id === e.id).map((x) => x.scenario);
        expect(mine.sort()).toEqual(baseline.scenarios.map((x) => x.scenario).sort());
      }
      // Receipts: no duplicate (episode, seq); each final episode's receipts sum to its cost.
      const keys = new Set(f.receipts.map((r) => `${r.episode_id}/${r.seq}`));
      expect(keys.size).toBe(f.receipts.length);
      for (const e of f.finals) {
        const mine = f.receipts.filter((r) => r.episode_id === e.id);
        const outcome = JSON.parse(e.outcome) as { billedCalls: number; costUsd: number };
        expect(mine.length, `episode ${e.id}`).toBeGreaterThanOrEqual(outcome.billedCalls);
        const pico = mine.reduce((a, r) => a + BigInt(r.usd_pico), 0n);
        expect(Number(pico) / 1e12).toBeCloseTo(outcome.costUsd, 12);
      }
      expect(await leftoversOf([killed.pid, resumed.pid])).toBe(0);
      summary.push(
        `${at}ms:${wasKilled ? "killed" : "finished"}(${f.statuses.filter((s) => s === "interrupted").length} interrupted)`,
      );
    }
    console.log(
      `crash: seed ${SEED}, baseline ${Math.round(baselineMs)} ms, ${summary.length} points, ${killedMidway} killed mid-run: ${summary.join(" ")}`,
    );
    console.log(`crash: ${summary.length}/${summary.length} same verdict, 0 duplicate receipts, 0 orphans`);
    // Most points must land inside the run, or the test proves little.
    expect(killedMidway).toBeGreaterThanOrEqual(need);
  }, 3_600_000);
});
