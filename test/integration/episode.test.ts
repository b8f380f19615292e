/**
 * Whole episodes on the real engine with the real sidecar, agent, meter and the Engy simulator
 * on loopback: the reference is scored tests/tests, an empty deliverable its null floor, and each
 * way an episode can go wrong ends within its deadline with the right failure class. After every
 * episode nothing it made is left (labelled containers and networks counted).
 */
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { draw } from "../../src/engy-sim/index.js";
import type { EpisodeScenario, RunEpisodeOptions } from "../../src/episode/index.js";
import { round4 } from "../../src/precision.js";
import {
  type EpisodeRig,
  packOf,
  runTestEpisode,
  shippedScenario,
  startEpisodeRig,
} from "../helpers/episode.js";

const GIT = "git-lost-commit-recovery"; // null floor 1/6: a non-trivial floor to hit exactly
const FAST = "reproducible-tarball"; // quick to build and grade: the failure paths

/** A seed on which the simulator's strongest model takes the reference route at once. */
const seed = Array.from({ length: 200 }, (_, i) => i + 1).find((s) => draw(s, GIT, 0, "solve") < 0.5)!;

let rig: EpisodeRig;
let out: string;
let git: EpisodeScenario;
let fast: EpisodeScenario;
const strong = packOf({ "policy.json": JSON.stringify({ kind: "pin", model: "kimi-k3" }) });

beforeAll(async () => {
  rig = await startEpisodeRig({ seed });
  out = await mkdtemp(join(tmpdir(), "trajrl-episode-"));
  [git, fast] = await Promise.all([shippedScenario(GIT), shippedScenario(FAST)]);
  // Build (or reuse by content hash) every image up front so the timings below are the episode's.
  await Promise.all([rig.images.sidecar(), rig.images.scenario(git), rig.images.scenario(fast)]);
}, 900_000);

afterAll(async () => {
  await rig?.close();
  if (out) await rm(out, { recursive: true, force: true });
});

const episode = (scenario: EpisodeScenario, over: Partial<RunEpisodeOptions> = {}) =>
  runTestEpisode(rig, {
    pack: strong,
    scenario,
    capUsd: 0.5,
    defaultModel: "qwen3.8-27b",
    runsDir: out,
    ...over,
  });

describe("episode", () => {
  it("scores the reference route of a strong model tests/tests, with cost, receipts and artifacts", async () => {
    const { r } = await episode(git);
    expect(r.failure).toBeNull();
    expect(r).toMatchObject({ status: "scored", tests: 6, passed: 6, quality: 1 });
    expect(r.agent).toMatchObject({ end_reason: "completed", killed_by: null, exit_code: 0 });
    expect(r.agent.tool_calls).toBeGreaterThan(0);
    expect(r.cost_usd).toBeGreaterThan(0);
    expect(Object.keys(r.by_model)).toEqual(["kimi-k3"]);
    expect(r.price_table_hash).toBe(rig.meter.priceTableHash);
    expect(r.images.scenario?.id).toMatch(/^sha256:/);
    expect(r.images.sidecar?.id).toMatch(/^sha256:/);
    const dir = r.artifacts.dir;
    for (const f of [
      "policy.log",
      "meter.json",
      "transcript.txt",
      "turns.jsonl",
      "evaluation.json",
      "ctrf.json",
    ])
      expect([f, existsSync(join(dir, f))]).toEqual([f, true]);
    expect(existsSync(join(dir, "error.txt"))).toBe(false);
    const meter = JSON.parse(await readFile(join(dir, "meter.json"), "utf8"));
    expect(meter.receipts.length).toBe(r.usage?.calls);
    expect(meter.receipts.every((x: { model: string }) => x.model === "kimi-k3")).toBe(true);
    const evaluation = JSON.parse(await readFile(join(dir, "evaluation.json"), "utf8"));
    expect(evaluation).toMatchObject({
      quality: 1,
      status: "scored",
      verifier_result: { tests: 6, passed: 6 },
    });
    // The policy logged its turns (upstream's `{"event": "turn", …}` lines).
    const events = (await readFile(join(dir, "policy.log"), "utf8")).split("\n").flatMap((l) => {
      try {
        return [(JSON.parse(l) as { event?: string }).event];
      } catch {
        return [];
      }
    });
    expect(events).toContain("turn");
    // The agent saw the pack's SKILL.md and the scenario's instruction.
    const transcript = await readFile(join(dir, "transcript.txt"), "utf8");
    expect(transcript).toContain("Read the instruction; do the task.");
    expect(transcript).toContain("Recover lost work from a damaged git repository");
  }, 300_000);

  it("grades an empty deliverable at the scenario's null floor", async () => {
    const { r } = await episode(git, { agentCommand: "/bin/sh -c ': > /app/recover.sh'" });
    expect(r.status).toBe("scored");
    expect(r.failure).toBeNull();
    expect(r.tests).toBe(6);
    expect(round4(r.quality)).toBe(git.task.metadata?.null_floor);
    expect(round4(r.quality)).toBeGreaterThan(0);
  }, 300_000);

  it("a missing or non-file deliverable is agent_output_missing with quality 0, never graded", async () => {
    for (const cmd of ["true", "mkdir -p /app/out.tar.gz"]) {
      const s = {
        ...fast,
        task: { ...fast.task, verifier: { ...fast.task.verifier, agent_output_path: "/app/out.tar.gz" } },
      };
      const { r } = await episode(s, { agentCommand: cmd });
      expect(r).toMatchObject({ status: "scored", quality: 0, tests: 0, verifier: null });
      expect(r.failure).toMatchObject({ class: "policy", code: "agent_output_missing" });
    }
  }, 300_000);

  it("a policy that crashes before health fails the episode as policy, with its traceback", async () => {
    const pack = packOf({ "policy.py": 'import sys\nraise RuntimeError("policy exploded at import")\n' });
    const { r, ms } = await episode(fast, { pack, timeouts: { healthMs: 30_000 } });
    expect(r.status).toBe("scored");
    expect(r.quality).toBe(0);
    expect(r.failure).toMatchObject({ class: "policy", code: "policy_crashed" });
    expect(ms).toBeLessThan(30_000 + 20_000);
    const error = await readFile(join(r.artifacts.dir, "error.txt"), "utf8");
    expect(error).toContain("policy_crashed");
    expect(error).toContain("RuntimeError: policy exploded at import");
    expect(r.usage?.calls).toBe(0);
  }, 120_000);

  it("a policy that hangs is stopped by the watchdog and blamed on the policy", async () => {
    const hang = [
      "import http.server, os, time",
      "class H(http.server.BaseHTTPRequestHandler):",
      "    def do_GET(self):",
      "        self.send_response(200); self.end_headers(); self.wfile.write(b'ok')",
      "    def do_POST(self):",
      "        time.sleep(3600)",
      "    def log_message(self, *a):",
      "        pass",
      'http.server.ThreadingHTTPServer(("0.0.0.0", int(os.environ["POLICY_PORT"])), H).serve_forever()',
      "",
    ].join("\n");
    const { r } = await episode(fast, {
      pack: packOf({ "policy.py": hang }),
      timeouts: { agentMs: 120_000, watchdogFirstCallMs: 3_000, watchdogPollMs: 200, stopGraceMs: 2_000 },
    });
    expect(r.status).toBe("scored");
    expect(r.failure).toMatchObject({ class: "policy", code: "policy_stalled" });
    expect(r.agent.killed_by).toBe("watchdog_no_call");
    // Killed just after the 3 s watchdog, far before the 120 s agent deadline.
    expect(r.timings.agent_ms).toBeGreaterThanOrEqual(3_000);
    expect(r.timings.agent_ms).toBeLessThan(3_000 + 2_000 + 10_000);
    expect(r.notes).toContain("agent_output_missing");
  }, 120_000);

  it("a silent agent is killed at its deadline even though it prints nothing", async () => {
    const { r } = await episode(fast, {
      agentCommand: "sleep 3600",
      timeouts: { agentMs: 4_000, watchdogFirstCallMs: 60_000, stopGraceMs: 2_000 },
    });
    expect(r.status).toBe("scored");
    expect(r.failure).toMatchObject({ class: "policy", code: "agent_timeout" });
    expect(r.agent.killed_by).toBe("deadline");
    expect(r.timings.agent_ms).toBeGreaterThanOrEqual(4_000);
    expect(r.timings.agent_ms).toBeLessThan(4_000 + 2_000 + 10_000);
  }, 120_000);

  it("a failing provider makes the episode failed (upstream), not a policy fault", async () => {
    rig.sim.setFaults({ rules: [{ fault: { kind: "503", retryAfterS: 0 }, count: 1_000_000 }] });
    try {
      const { r } = await episode(fast, { agentEnv: { AGENT_LLM_RETRIES: "0" } });
      expect(r.status).toBe("failed");
      expect(r.failure).toMatchObject({ class: "upstream", code: "upstream_errors" });
      expect(r.quality).toBe(0);
    } finally {
      rig.sim.setFaults({ rules: [] });
    }
  }, 180_000);

  it("an abort (shutdown) ends the episode as infra/aborted and removes everything", async () => {
    const ac = new AbortController();
    const p = episode(fast, { agentCommand: "sleep 3600", signal: ac.signal });
    // Abort once the agent runs (its container exists and is running).
    const t0 = performance.now();
    for (;;) {
      const running = await rig.sandbox.docker.listContainers({
        filters: { label: [`trajrl.session=${rig.sandbox.session.id}`, "trajrl.role=agent"] },
      });
      if (running.length > 0 || performance.now() - t0 > 60_000) break;
      await new Promise((res) => setTimeout(res, 100));
    }
    ac.abort(new Error("SIGTERM"));
    const { r, ms } = await p;
    expect(r.status).toBe("failed");
    expect(r.failure).toMatchObject({ class: "infra", code: "aborted" });
    expect(ms).toBeLessThan(60_000 + 15_000);
  }, 120_000);
});
