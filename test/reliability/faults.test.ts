/**
 * Faults during an evaluation, through the real pipeline (meter, sandbox, episodes, SQLite) against
 * the Engy simulator served as if it were the provider (OFFLINE_LLM_BASE_URL = the simulator, so this is the
 * production path): 429/503 storms, stalls, cut streams and missing usage; SQLite held locked by
 * another connection; the artifacts folder full. For each, what the validator does is asserted, and
 * nothing is lost or counted twice: one evaluation row, one final episode per scenario, receipts
 * unique, and every request the provider saw accounted for by a receipt (1 + its retries).
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { type EngySim, type FaultPlan, startEngySim } from "../../src/engy-sim/index.js";
import { type Environment, openEnvironment } from "../../src/environment/index.js";
import type { Verdict } from "../../src/evaluation/index.js";
import { evaluatePack } from "../../src/evaluation/index.js";
import { silentLogger } from "../../src/log.js";
import { loadPack } from "../../src/pack/index.js";
import { REPO_ROOT, SCENARIOS_DIR } from "../helpers/episode.js";

const SCENARIOS = ["access-log-regex", "binary-flag-hunt"];
const PACK = readFileSync(join(REPO_ROOT, "examples/packs/escalate.json"));

let sim: EngySim;
let env: Environment;
let dataDir: string;
let baseline: Verdict;

beforeAll(async () => {
  sim = await startEngySim({
    port: 0,
    seed: 11,
    scenariosDir: SCENARIOS_DIR,
    latencyScale: 0,
    log: silentLogger,
  });
  dataDir = mkdtempSync(join(tmpdir(), "faults-"));
  const config = loadConfig({
    DATA_DIR: dataDir,
    LLM_API_KEY: "sim-key",
    // The provider's endpoint is locked on the subnet; a local network may point it elsewhere.
    NETWORK: "local",
    OFFLINE_LLM_BASE_URL: sim.url,
    EVAL_CONCURRENCY: "2",
    SCENARIOS_DIR: SCENARIOS_DIR,
    EPISODE_RUNTIME: process.env.EPISODE_RUNTIME,
  });
  env = await openEnvironment(config, { log: silentLogger });
  const r = await run("baseline");
  expect(r.kind).toBe("verdict");
  baseline = (r as { verdict: Verdict }).verdict;
}, 900_000);

afterAll(async () => {
  await env?.close();
  await sim?.close();
});

async function run(label: string, onEvent?: Parameters<typeof evaluatePack>[1]["onEvent"]) {
  return evaluatePack(env, {
    pack: loadPack(PACK),
    label,
    scenarios: SCENARIOS,
    source: "local",
    concurrency: 2,
    backoffScale: 0.01,
    ...(onEvent ? { onEvent } : {}),
  });
}

const essence = (v: Verdict) => ({
  score: v.score,
  qualified: v.qualified,
  scenarios: v.scenarios.map((s) => [s.scenario, s.quality, s.passed, s.tests]),
});

interface Accounting {
  evaluations: number;
  finals: number;
  receipts: number;
  retries: number;
  truncated: number;
  estimated: number;
  noUsage: number;
  upstreamRequests: number;
}

/** What SQLite holds about one evaluation, checked for duplicates and matched against the provider. */
function account(evaluationId: string): Accounting {
  const db = new Database(join(dataDir, "validator.sqlite"), { readonly: true });
  try {
    const evaluations = (
      db.prepare("SELECT COUNT(*) AS n FROM evaluations WHERE id = ?").get(evaluationId) as { n: number }
    ).n;
    const episodes = db
      .prepare("SELECT id, status FROM episodes WHERE evaluation_id = ?")
      .all(evaluationId) as Array<{
      id: string;
      status: string;
    }>;
    const ids = episodes.map((e) => e.id);
    const receipts = db
      .prepare(
        `SELECT episode_id, seq, upstream_status, retries, truncated, usage_estimated, error_code FROM receipts WHERE episode_id IN (${ids.map(() => "?").join(",")})`,
      )
      .all(...ids) as Array<{
      episode_id: string;
      seq: number;
      upstream_status: number | null;
      retries: number;
      truncated: number;
      usage_estimated: number;
      error_code: string | null;
    }>;
    expect(new Set(receipts.map((r) => `${r.episode_id}/${r.seq}`)).size).toBe(receipts.length);
    return {
      evaluations,
      finals: episodes.filter((e) => e.status === "final").length,
      receipts: receipts.length,
      retries: receipts.reduce((a, r) => a + r.retries, 0),
      truncated: receipts.filter((r) => r.truncated).length,
      estimated: receipts.filter((r) => r.usage_estimated).length,
      noUsage: receipts.filter((r) => r.error_code === "no-usage" || r.error_code === "no_usage").length,
      upstreamRequests: receipts
        .filter((r) => r.upstream_status !== null)
        .reduce((a, r) => a + 1 + r.retries, 0),
    };
  } finally {
    db.close();
  }
}

async function underFaults(plan: FaultPlan, label: string) {
  sim.setFaults(plan);
  const before = sim.stats().requests;
  try {
    const r = await run(label);
    const seen = sim.stats().requests - before;
    return { r, seen, acc: account(r.evaluationId) };
  } finally {
    sim.setFaults({ rules: [] });
  }
}

describe("provider faults during an evaluation", () => {
  it.each<[string, FaultPlan]>([
    [
      "429 storm (3 in every 5 requests, Retry-After 0)",
      { rules: [{ fault: { kind: "429", retryAfterS: 0 }, count: 3, every: 5 }] },
    ],
    [
      "503 storm (a seeded 40 % of requests)",
      { rules: [{ fault: { kind: "503", retryAfterS: 0 }, rate: 0.4, count: 1 }] },
    ],
    [
      "stalls (1.5 s before the first byte, every 3rd request)",
      { rules: [{ fault: { kind: "stall", ms: 1500 }, count: 1, every: 3 }] },
    ],
  ])(
    "%s: ridden out (the meter retries 429/503 with Retry-After); the same verdict; every provider request has its receipt",
    async (name, plan) => {
      const { r, seen, acc } = await underFaults(plan, name);
      expect(r.kind).toBe("verdict");
      expect(essence((r as { verdict: Verdict }).verdict)).toEqual(essence(baseline));
      expect(acc).toMatchObject({ evaluations: 1, finals: SCENARIOS.length });
      if (!name.startsWith("stalls")) expect(acc.retries).toBeGreaterThan(0);
      expect(acc.upstreamRequests).toBe(seen);
    },
    600_000,
  );

  it("cut streams: passed on as cuts and marked truncated; the agent retries; the same verdict", async () => {
    const { r, seen, acc } = await underFaults(
      { rules: [{ fault: { kind: "cut", afterChunks: 2 }, count: 1, every: 4 }] },
      "cut",
    );
    expect(r.kind).toBe("verdict");
    expect(essence((r as { verdict: Verdict }).verdict)).toEqual(essence(baseline));
    expect(acc.truncated).toBeGreaterThan(0);
    expect(acc.upstreamRequests).toBe(seen);
  }, 600_000);

  it("missing usage: billed $0 and marked no-usage, as upstream bills it; the same verdict", async () => {
    const { r, seen, acc } = await underFaults(
      { rules: [{ fault: { kind: "no_usage" }, count: 1_000_000 }] },
      "no-usage",
    );
    expect(r.kind).toBe("verdict");
    const v = (r as { verdict: Verdict }).verdict;
    expect(essence(v)).toEqual(essence(baseline));
    expect(acc.noUsage).toBe(acc.receipts);
    expect(v.costUsd).toBe(0);
    expect(acc.upstreamRequests).toBe(seen);
  }, 600_000);

  it("the provider down for good: episodes fail as upstream, the evaluation is discarded, no verdict", async () => {
    // Every call is retried by the meter (6 × 1.5 s·n), then by the policy SDK (the same schedule)
    // and by the agent, as upstream's own layers do: this environment shortens the meter's delays
    // and lets the agent give up at once, so four attempts of an outage fit the test's time.
    const outageEnv = await openEnvironment(
      loadConfig({
        DATA_DIR: dataDir,
        LLM_API_KEY: "sim-key",
        OFFLINE_LLM_BASE_URL: sim.url,
        EVAL_CONCURRENCY: "2",
        SCENARIOS_DIR: SCENARIOS_DIR,
        EPISODE_RUNTIME: process.env.EPISODE_RUNTIME,
      }),
      {
        log: silentLogger,
        agentEnv: { AGENT_LLM_RETRIES: "0" },
        meterRetry: { statusStepMs: 10, streamStepMs: 10 },
      },
    );
    sim.setFaults({ rules: [{ fault: { kind: "503", retryAfterS: 0 }, count: 1_000_000 }] });
    try {
      const r = await evaluatePack(outageEnv, {
        pack: loadPack(PACK),
        label: "outage",
        scenarios: SCENARIOS,
        source: "local",
        concurrency: 2,
        backoffScale: 0.01,
      });
      expect(r.kind).toBe("discarded");
      const acc = account(r.evaluationId);
      expect(acc.evaluations).toBe(1);
      expect(acc.finals).toBe(0);
    } finally {
      sim.setFaults({ rules: [] });
      await outageEnv.close();
    }
  }, 900_000);
});

describe("local faults during an evaluation", () => {
  it("SQLite locked by another writer for 3 s mid-evaluation: writes wait, nothing lost", async () => {
    const other = new Database(join(dataDir, "validator.sqlite"));
    let locked = false;
    const r = await run("sqlite-busy", (e) => {
      if (locked || e.phase !== "running") return;
      locked = true;
      other.exec("BEGIN IMMEDIATE");
      setTimeout(() => other.exec("COMMIT"), 3_000);
    });
    other.close();
    expect(locked).toBe(true);
    expect(r.kind).toBe("verdict");
    expect(essence((r as { verdict: Verdict }).verdict)).toEqual(essence(baseline));
    expect(account(r.evaluationId)).toMatchObject({ evaluations: 1, finals: SCENARIOS.length });
  }, 600_000);

  it("the artifacts folder full: the verdict and receipts still land in SQLite", async () => {
    const runs = join(dataDir, "runs");
    mkdirSync(runs, { recursive: true });
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", runs]);
    try {
      // Fill it to the last block.
      try {
        writeFileSync(join(runs, "filler"), Buffer.alloc(2 * 1024 * 1024));
      } catch {
        // ENOSPC: full, as intended
      }
      const r = await run("disk-full");
      expect(["verdict", "discarded"]).toContain(r.kind);
      const acc = account(r.evaluationId);
      expect(acc.evaluations).toBe(1);
      if (r.kind === "verdict") {
        expect(essence(r.verdict)).toEqual(essence(baseline));
        expect(acc.finals).toBe(SCENARIOS.length);
        expect(acc.receipts).toBeGreaterThan(0);
      }
      console.log(`disk full: ${r.kind}`);
    } finally {
      execFileSync("umount", ["-l", runs]);
    }
  }, 600_000);
});
