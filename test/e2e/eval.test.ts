/**
 * The `eval` command as a miner or operator runs it: real Docker, the real meter, the in-process
 * Engy simulator, real scenarios. The built-in suite's `quick` set (three scenarios) keeps it to
 * minutes. With --json, stdout is the JSON alone (parsed whole here).
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { beforeAll, describe, expect, it } from "vitest";
import { leftoversOf } from "../helpers/cli.js";
import { requireDocker } from "../helpers/docker.js";
import { runEvalCli } from "../helpers/eval-cli.js";

function evalCli(dataDir: string, args: string[], onChild?: (c: ChildProcess) => void) {
  return runEvalCli(dataDir, args, onChild ? { onChild } : {});
}

type JsonResult = Array<{
  label: string;
  kind: string;
  verdict?: {
    spec: number;
    provenance: { suite?: string };
    score: number;
    qualified: boolean;
    costUsd: number;
    scenarios: Array<{ scenario: string; quality: number; passed: number; tests: number }>;
  };
}>;

/** All of stdout: with --json nothing else is printed there. */
function parseJson(stdout: string): JsonResult {
  return JSON.parse(stdout) as JsonResult;
}

const essence = (r: JsonResult) =>
  r.map((x) => ({
    label: x.label,
    kind: x.kind,
    score: x.verdict?.score,
    qualified: x.verdict?.qualified,
    scenarios: x.verdict?.scenarios.map((s) => [s.scenario, s.quality, s.passed, s.tests]),
  }));

describe("eval (e2e)", () => {
  let reference: JsonResult;

  beforeAll(async () => {
    await requireDocker();
  });

  it("ranks the example policies as their models imply and is the same at concurrency 1 and 3", async () => {
    const packs = ["examples/packs/pin.json", "examples/packs/advisers.json"];
    const c3 = await evalCli(mkdtempSync(join(tmpdir(), "eval-c3-")), [
      ...packs,
      "--suite",
      "quick",
      "--concurrency",
      "3",
      "--json",
    ]);
    expect(c3.code, c3.stderr).toBe(0);
    reference = parseJson(c3.stdout);
    const [pin, advisers] = reference;
    expect(pin!.kind).toBe("verdict");
    expect(advisers!.verdict!.score).toBeGreaterThan(pin!.verdict!.score);
    expect(pin!.verdict!.costUsd).toBeLessThan(advisers!.verdict!.costUsd);
    expect(advisers!.verdict!.scenarios.map((s) => s.scenario)).toEqual([
      "binary-flag-hunt",
      "access-log-regex",
      "git-lost-commit-recovery",
    ]);
    // The built-in suite claims no subnet spec: spec 0, the set's name in the provenance.
    expect([advisers!.verdict!.spec, advisers!.verdict!.provenance.suite]).toEqual([0, "quick"]);
    // stderr is not a terminal here: no progress lines for people.
    expect(c3.stderr).not.toMatch(/running|logs: /);

    const c1 = await evalCli(mkdtempSync(join(tmpdir(), "eval-c1-")), [
      ...packs,
      "--suite",
      "quick",
      "--concurrency",
      "1",
      "--json",
    ]);
    expect(c1.code, c1.stderr).toBe(0);
    expect(essence(parseJson(c1.stdout))).toEqual(essence(reference));
  }, 900_000);

  it("kill -9 mid-evaluation: the same command resumes, keeps finished episodes, same verdict, nothing leaked", async () => {
    expect(reference, "needs the first test's verdicts").toBeDefined();
    const dataDir = mkdtempSync(join(tmpdir(), "eval-kill-"));
    const args = ["examples/packs/advisers.json", "--suite", "quick", "--concurrency", "1", "--json"];
    // Kill once the first episode is final in SQLite, while the second one runs.
    const pids: number[] = [];
    let finalBeforeKill: string | undefined;
    const killed = await evalCli(dataDir, args, (child) => {
      pids.push(child.pid!);
      const timer = setInterval(() => {
        try {
          const db = new Database(join(dataDir, "validator.sqlite"), { readonly: true, fileMustExist: true });
          const n = (
            db.prepare("SELECT COUNT(*) AS n FROM episodes WHERE status = 'final'").get() as { n: number }
          ).n;
          const running = (
            db.prepare("SELECT COUNT(*) AS n FROM episodes WHERE status = 'running'").get() as { n: number }
          ).n;
          db.close();
          if (n >= 1 && running >= 1) {
            clearInterval(timer);
            const db2 = new Database(join(dataDir, "validator.sqlite"), {
              readonly: true,
              fileMustExist: true,
            });
            finalBeforeKill = (
              db2.prepare("SELECT scenario FROM episodes WHERE status = 'final' LIMIT 1").get() as {
                scenario: string;
              }
            ).scenario;
            db2.close();
            setTimeout(() => child.kill("SIGKILL"), 3000);
          }
        } catch {
          // not created yet
        }
      }, 250);
      child.on("close", () => clearInterval(timer));
    });
    expect(killed.code).toBeNull();

    const resumed = await evalCli(dataDir, args, (child) => pids.push(child.pid!));
    expect(resumed.code, resumed.stderr).toBe(0);
    const db = new Database(join(dataDir, "validator.sqlite"), { readonly: true });
    const evals = db.prepare("SELECT id, status, verdict FROM evaluations").all() as Array<{
      id: string;
      status: string;
      verdict: string;
    }>;
    const episodes = db
      .prepare("SELECT scenario, attempt, status FROM episodes ORDER BY started_at")
      .all() as Array<{ scenario: string; status: string }>;
    db.close();
    // One evaluation, resumed (not restarted), scored once.
    expect(evals).toHaveLength(1);
    expect(evals[0]!.status).toBe("scored");
    // The episode finished before the kill was not run again; the interrupted one was.
    expect(finalBeforeKill).toBeDefined();
    expect(episodes.filter((e) => e.scenario === finalBeforeKill)).toHaveLength(1);
    expect(episodes.some((e) => e.status === "interrupted")).toBe(true);
    const verdict = JSON.parse(evals[0]!.verdict) as { score: number; scenarios: Array<{ quality: number }> };
    expect(verdict.score).toBe(reference[1]!.verdict!.score);
    expect(await leftoversOf(pids)).toBe(0);
  }, 900_000);
});
