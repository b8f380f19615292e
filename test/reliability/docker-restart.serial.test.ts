/**
 * The Docker daemon restarted in the middle of an evaluation (as `systemctl restart docker` or a
 * package upgrade does): dockerd gets SIGTERM while episodes run, then comes back through the
 * project's own scripts/docker-up.sh. The episodes it killed are infra failures, re-run after the
 * evaluation's back-off; the evaluation ends with the uninterrupted run's verdict, stored once;
 * after one reaper sweep nothing of ours is left. Serial: it takes the engine away from every
 * other test, so it runs alone after the main suite (vitest.config.ts, group "serial").
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { type Environment, openEnvironment } from "../../src/environment/index.js";
import type { Verdict } from "../../src/evaluation/index.js";
import { evaluatePack } from "../../src/evaluation/index.js";
import { silentLogger } from "../../src/log.js";
import { loadPack } from "../../src/pack/index.js";
import { LABEL } from "../../src/sandbox/labels.js";
import { requireDocker } from "../helpers/docker.js";
import { REPO_ROOT } from "../helpers/episode.js";

const SCENARIOS = ["access-log-regex", "binary-flag-hunt"];
const PACK = readFileSync(join(REPO_ROOT, "examples/packs/escalate.json"));

let env: Environment;
let dataDir: string;

function dockerUp(): void {
  execFileSync("bash", [join(REPO_ROOT, "scripts/docker-up.sh")], { stdio: "inherit" });
}

function dockerdPid(): number {
  return Number(execFileSync("pgrep", ["-xo", "dockerd"]).toString().trim());
}

beforeAll(async () => {
  await requireDocker();
  dataDir = mkdtempSync(join(tmpdir(), "docker-restart-"));
  env = await openEnvironment(
    loadConfig({
      DATA_DIR: dataDir,
      LLM_API_KEY: "",
      ENGY_SIM_LATENCY_SCALE: "0",
      EVAL_CONCURRENCY: "2",
      EPISODE_RUNTIME: process.env.EPISODE_RUNTIME,
    }),
    { log: silentLogger },
  );
}, 600_000);

afterAll(async () => {
  // Whatever happened, leave the machine with a running engine.
  if (!existsSync("/var/run/docker.sock")) dockerUp();
  await env?.close();
});

const run = (label: string, onEvent?: Parameters<typeof evaluatePack>[1]["onEvent"]) =>
  evaluatePack(env, {
    pack: loadPack(PACK),
    label,
    scenarios: SCENARIOS,
    source: "local",
    concurrency: 2,
    ...(onEvent ? { onEvent } : {}),
  });

const essence = (v: Verdict) => v.scenarios.map((s) => [s.scenario, s.quality, s.passed, s.tests]);

describe("Docker restarted mid-evaluation", () => {
  it("the episodes it killed are re-run; the same verdict, once; nothing left after a sweep", async () => {
    const base = await run("baseline");
    expect(base.kind).toBe("verdict");

    let restarted: Promise<void> | undefined;
    const r = await run("restart", (e) => {
      if (restarted || e.phase !== "running") return;
      restarted = (async () => {
        const pid = dockerdPid();
        process.kill(pid, "SIGTERM");
        for (let i = 0; i < 600; i++) {
          try {
            process.kill(pid, 0);
          } catch {
            break;
          }
          await new Promise((res) => setTimeout(res, 100));
        }
        dockerUp();
      })();
    });
    await restarted;
    expect(restarted, "the restart happened while an episode ran").toBeDefined();

    const docker = await requireDocker();
    expect(r.kind, JSON.stringify(r)).toBe("verdict");
    const v = (r as { verdict: Verdict }).verdict;
    expect(essence(v)).toEqual(essence((base as { verdict: Verdict }).verdict));

    const db = new Database(join(dataDir, "validator.sqlite"), { readonly: true });
    const episodes = db
      .prepare("SELECT scenario, attempt, status, failure_class FROM episodes WHERE evaluation_id = ?")
      .all(r.evaluationId) as Array<{
      scenario: string;
      attempt: number;
      status: string;
      failure_class: string | null;
    }>;
    const evaluations = db.prepare("SELECT status FROM evaluations WHERE id = ?").all(r.evaluationId);
    db.close();
    expect(evaluations).toEqual([{ status: "scored" }]);
    // Some episode was hit and re-run; each scenario ends with exactly one final attempt.
    expect(episodes.some((e) => e.attempt > 1)).toBe(true);
    for (const s of SCENARIOS)
      expect(episodes.filter((e) => e.scenario === s && e.status === "final")).toHaveLength(1);

    await env.sandbox.reaper.sweep();
    const filters = { label: [`${LABEL.session}=${env.sandbox.session.id}`] };
    expect((await docker.listContainers({ all: true, filters })).length).toBe(0);
    expect((await docker.listNetworks({ filters })).length).toBe(0);
    console.log(
      `docker restart: ${episodes.length} episode attempts for ${SCENARIOS.length} scenarios (${episodes
        .filter((e) => e.status !== "final")
        .map((e) => `${e.scenario}#${e.attempt} ${e.status}/${e.failure_class}`)
        .join(", ")}), same verdict, 0 left`,
    );
  }, 600_000);
});
