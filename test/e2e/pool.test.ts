/**
 * One validator over two Docker engines, for real on this machine: the host's engine and a second
 * one in a network namespace of its own (test/helpers/netns-engine.ts: its own data root, bridge,
 * socket, a TLS listener with certificates made here; no route out). `eval` runs a pack over both
 * (ENGINES), the second engine is killed (SIGKILL, dockerd and containerd) while episodes run on it,
 * and started again. The verdict must be the one engine's verdict, every scenario once in it (the
 * killed attempts re-run, recorded as `engine_lost`), nothing of the evaluation left on either engine,
 * and the provider key in no container of either engine (the meter, in the eval process, holds it;
 * the provider here is the Engy simulator on loopback, accepting that key alone).
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProjectImages } from "../../src/bench/index.js";
import { type EngySim, startEngySim } from "../../src/engy-sim/index.js";
import { loadCatalogue, selectScenarios } from "../../src/scenarios/index.js";
import { leftoversOf } from "../helpers/cli.js";
import { requireDocker } from "../helpers/docker.js";
import { REPO_ROOT } from "../helpers/episode.js";
import { runEvalCli } from "../helpers/eval-cli.js";
import { type NetnsEngine, startNetnsEngine } from "../helpers/netns-engine.js";

// The built-in suite's ten scenarios: enough work that the killed engine is back before the end.
const SCENARIOS = (
  JSON.parse(readFileSync(join(import.meta.dirname, "../../scenarios/suites.json"), "utf8")) as {
    suites: Record<string, string[]>;
  }
).suites.builtin!;
const KEY = `sk-trajrl-pool-${randomBytes(12).toString("hex")}`;

type JsonResult = Array<{
  kind: string;
  verdict?: {
    score: number;
    qualified: boolean;
    scenarios: Array<{ scenario: string; quality: number; passed: number; tests: number; attempts: number }>;
  };
}>;

/**
 * Each eval run ends within this (75 s alone, ~190 s under a loaded suite): a run that hangs is
 * killed, and the failure shows where its log stopped instead of the suite's bare timeout.
 */
const RUN_DEADLINE_MS = 11 * 60_000;

/** The last events of the eval log(s) in `dir`, one short line each. */
function logTail(dir: string, n = 60): string {
  let files: string[];
  try {
    files = readdirSync(dir).filter((f) => f.endsWith(".log"));
  } catch {
    return `(no log in ${dir})`;
  }
  const lines = files.flatMap((f) => readFileSync(join(dir, f), "utf8").split("\n").filter(Boolean));
  return lines
    .slice(-n)
    .map((l) => {
      try {
        const { time, level, msg, pid: _p, hostname: _h, ...rest } = JSON.parse(l) as Record<string, unknown>;
        return `${String(time).slice(11, 23)} ${level} ${msg} ${JSON.stringify(rest).slice(0, 300)}`;
      } catch {
        return l.slice(0, 300);
      }
    })
    .join("\n");
}

const parseJson = (stdout: string) => JSON.parse(stdout.slice(stdout.indexOf("[\n"))) as JsonResult;
const essence = (r: JsonResult) =>
  r.map((x) => ({
    kind: x.kind,
    score: x.verdict?.score,
    scenarios: x.verdict?.scenarios.map((s) => [s.scenario, s.quality, s.passed, s.tests]),
  }));

async function scenarioSources() {
  return selectScenarios(await loadCatalogue(join(REPO_ROOT, "scenarios")), SCENARIOS);
}

let local: Docker;
let e2: NetnsEngine;
let sim: EngySim;

beforeAll(async () => {
  local = await requireDocker();
  // Model calls take time as real ones do (scaled down): the killed engine is back well before the end.
  sim = await startEngySim({ host: "127.0.0.1", port: 0, seed: 11, apiKeys: [KEY], latencyScale: 0.3 });
  e2 = await startNetnsEngine();
}, 120_000);

afterAll(async () => {
  await e2?.stop();
  await sim?.close();
});

/** Every container of `pid`'s evaluation on an engine, inspected: does any carry `needle`? */
async function scan(
  docker: Docker,
  pid: number,
  needle: string,
): Promise<{ inspected: number; hits: string[] }> {
  const hits: string[] = [];
  let inspected = 0;
  const list = await docker
    .listContainers({ all: true, filters: { label: [`trajrl.pid=${pid}`] } })
    .catch(() => []);
  for (const c of list) {
    const info = await docker
      .getContainer(c.Id)
      .inspect()
      .catch(() => undefined);
    if (!info) continue;
    inspected++;
    if (JSON.stringify(info).includes(needle)) hits.push(info.Name);
  }
  return { inspected, hits };
}

describe("two engines (e2e)", () => {
  it("eval over two engines, the second killed mid-evaluation: the one-engine verdict, every episode once, nothing left, the key on neither", async () => {
    // The meter holds KEY and forwards to the simulator (an offline provider: eval never votes).
    const env = { LLM_API_KEY: KEY, OFFLINE_LLM_BASE_URL: sim.url, LOG_LEVEL: "debug" };
    const args = ["examples/packs/pin.json", "--suite", "builtin", "--json"];

    // The reference: this host's engine alone (ENGINES unset), three episodes at once.
    const oneDir = mkdtempSync(join(tmpdir(), "pool-one-"));
    const one = await runEvalCli(oneDir, [...args, "--concurrency", "3"], {
      env,
      killAfterMs: RUN_DEADLINE_MS,
    });
    expect(one.code, `${one.stderr}\n${logTail(join(oneDir, "logs"))}`).toBe(0);
    const reference = parseJson(one.stdout);
    expect(reference[0]!.kind).toBe("verdict");

    // The second engine starts with the evaluation's images, as a host that served an earlier one
    // would (copying them is the pool's own job, tested in test/integration/pool-engines.test.ts): its
    // episodes then start at once, and the kill lands with most of the evaluation still to run.
    const refs = [
      ...(await new ProjectImages(local, { repoRoot: REPO_ROOT }).currentRefs(await scenarioSources())),
    ];
    await e2.loadFrom(
      local,
      refs.filter((r) => !r.startsWith("trajrl/meter-relay")),
    );

    const dataDir = mkdtempSync(join(tmpdir(), "pool-two-"));
    const engines = `name=local url=local slots=2; name=e2 url=${e2.url} slots=2 tls=${e2.tlsDir}`;
    let killedAt = 0;
    let restarted = false;
    let pid = 0;
    const scans: Array<{ engine: string; inspected: number; hits: string[] }> = [];
    const two = await runEvalCli(dataDir, [...args, "--out", join(dataDir, "out")], {
      env: { ...env, ENGINES: engines },
      killAfterMs: RUN_DEADLINE_MS,
      onChild: (child) => {
        pid = child.pid!;
        let busy = false;
        const timer = setInterval(async () => {
          if (busy) return;
          busy = true;
          try {
            for (const [engine, docker] of [
              ["local", local],
              ["e2", e2.docker],
            ] as const) {
              if (engine === "e2" && killedAt && !restarted) continue;
              scans.push({ engine, ...(await scan(docker, pid, KEY)) });
            }
            if (!killedAt) {
              // Kill the second engine once an agent of this evaluation runs there.
              const agents = await e2.docker.listContainers({
                filters: { label: [`trajrl.pid=${pid}`, "trajrl.role=agent"], status: ["running"] },
              });
              if (agents.length) {
                killedAt = Date.now();
                await e2.kill();
                await e2.restart();
                restarted = true;
              }
            }
          } catch {
            // an engine between lives
          } finally {
            busy = false;
          }
        }, 300);
        child.on("close", () => clearInterval(timer));
      },
    });
    expect(
      two.code,
      `${two.stderr}\n${logTail(join(dataDir, "out"))}\nscans: ${scans.length}, killed ${killedAt ? new Date(killedAt).toISOString() : "never"}, restarted ${restarted}`,
    ).toBe(0);
    expect(killedAt, "an episode ran on the second engine and the engine was killed").toBeGreaterThan(0);

    // The same verdict as one engine, every scenario once, in the spec's order.
    const result = parseJson(two.stdout);
    expect(essence(result)).toEqual(essence(reference));
    expect(result[0]!.verdict!.scenarios.map((s) => s.scenario)).toEqual(SCENARIOS);

    // The database: one final episode per scenario; the killed attempts are infra re-runs (engine_lost).
    const db = new Database(join(dataDir, "validator.sqlite"), { readonly: true });
    const rows = db.prepare("SELECT scenario, status, failure_code FROM episodes").all() as Array<{
      scenario: string;
      status: string;
      failure_code: string | null;
    }>;
    db.close();
    for (const s of SCENARIOS)
      expect([s, rows.filter((r) => r.scenario === s && r.status === "final").length]).toEqual([s, 1]);
    const retried = rows.filter((r) => r.status === "retry").map((r) => r.failure_code);
    expect(retried).toContain("engine_lost");

    // The pool's own account: the loss, the probe back in, episodes on both engines.
    const log = readFileSync(join(dataDir, "out", "eval.log"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { msg: string; engine?: string; scenario?: string });
    const placed = log.filter((l) => l.msg === "episode.placed");
    expect(new Set(placed.map((l) => l.engine))).toEqual(new Set(["local", "e2"]));
    expect(log.some((l) => l.msg === "engine.lost" && l.engine === "e2")).toBe(true);
    expect(log.some((l) => l.msg === "engine.back" && l.engine === "e2")).toBe(true);

    // Nothing of the evaluation left on either engine.
    expect(await leftoversOf([pid], { docker: local })).toBe(0);
    expect(await leftoversOf([pid], { docker: e2.docker })).toBe(0);

    // The key: in no container of either engine, while they ran (relays included).
    const inspected = (engine: string) =>
      scans.filter((s) => s.engine === engine).reduce((n, s) => n + s.inspected, 0);
    expect(inspected("local")).toBeGreaterThan(0);
    expect(inspected("e2")).toBeGreaterThan(0);
    expect(scans.flatMap((s) => s.hits)).toEqual([]);
    // …while the provider got it with every call (it answers that key alone).
    expect(sim.stats().requests).toBeGreaterThan(0);

    const on = (engine: string) => placed.filter((l) => l.engine === engine).length;
    process.stdout.write(
      `[pool e2e] ${SCENARIOS.length} scenarios, score ${result[0]!.verdict!.score} (one engine: ${reference[0]!.verdict!.score}); ` +
        `placed ${on("local")} on local, ${on("e2")} on e2; retried ${retried.length} (${retried.join(", ")}); ` +
        `container inspections for the key: ${inspected("local")} on local, ${inspected("e2")} on e2, 0 found it; ` +
        `left: 0 and 0; provider requests ${sim.stats().requests}\n`,
    );
  }, 1_500_000);
});
