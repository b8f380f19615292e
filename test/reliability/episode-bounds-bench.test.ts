/**
 * The bounds of episode-bounds.test.ts on the `bench` runtime (trajrl-bench as upstream runs it:
 * Hermes exec'd in the scenario image, the sidecar from the bench image with the SDK file,
 * upstream's verifier), through real episodes on the offline bench (this project's scenarios in
 * upstream's image contract, `hermes` our agent behind Hermes' command line), the Engy simulator
 * as the provider:
 *
 *  - an honest pack: the reference deliverable reaches upstream's grading byte for byte (the
 *    verdict is that of grading it directly), its session read whole;
 *  - a sparse deliverable is refused at its stat (upstream grades the empty workspace then, as here);
 *  - a background job that makes the session export sparse once Hermes wrote it: refused unread;
 *  - an agent that writes without end: killed by the disk watchdog (every process of the agent
 *    user), the session still exported post mortem.
 */
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BenchBuildResult, OfflineBench } from "../../src/bench/index.js";
import { probeScenarioInfo } from "../../src/bench/probes.js";
import { gradeBenchDeliverable } from "../../src/episode/bench-verifier.js";
import type {
  EpisodeImages,
  EpisodeResult,
  EpisodeRuntime,
  EpisodeScenario,
  RunEpisodeOptions,
} from "../../src/episode/types.js";
import { sdkSingleFile } from "../../src/policy/index.js";
import type { BuiltImage } from "../../src/sandbox/index.js";
import {
  type EpisodeRig,
  packOf,
  REPO_ROOT,
  runTestEpisode,
  SCENARIOS_DIR,
  startEpisodeRig,
} from "../helpers/episode.js";
import { scriptSkill } from "../helpers/skills.js";

const MODEL = "glm-5.3-flash";
const NAME = "reproducible-tarball";
const GiB = 1024 ** 3;
const TiB = 1024 * GiB;
const TARGET = "localhost/trajrl-epsec-bench";
const TAG = `t${process.pid}`;

const ATTACKS: Record<string, string> = {
  "bench-sparse-deliverable": "truncate -s 15T /app/mktar.py",
  // Waits for Hermes' own export of the session, then makes it (and the export's log) sparse.
  "bench-sparse-export":
    "nohup sh -c 'while [ ! -s /workspace/turns.jsonl ]; do sleep 0.02; done; " +
    "truncate -s 15T /workspace/turns.jsonl /workspace/turns_export.err' >/dev/null 2>&1 &\n" +
    "printf 'print(1)\\n' > /app/mktar.py",
  "bench-write-forever": "dd if=/dev/zero of=/app/fill bs=1M count=3072 status=none; echo wrote",
};

let rig: EpisodeRig;
let tmp: string;
let built: BenchBuildResult;
let scenario: EpisodeScenario;
let images: EpisodeImages;
let runtime: EpisodeRuntime;

const asBuilt = (ref: string, id: string): BuiltImage => ({ ref, id, hash: id, built: false, buildMs: 0 });

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "trajrl-bounds-bench-"));
  const sim = join(tmp, "sim");
  for (const [name, script] of Object.entries(ATTACKS)) {
    await mkdir(join(sim, name, "solution"), { recursive: true });
    await writeFile(join(sim, name, "instruction.md"), scriptSkill(name, script));
    await writeFile(join(sim, name, "solution", "solve.sh"), `#!/bin/bash\n${script}\n`);
  }
  // The honest route: the simulated model knows the real scenario too.
  await cp(join(SCENARIOS_DIR, NAME, "instruction.md"), join(sim, NAME, "instruction.md"));
  await cp(join(SCENARIOS_DIR, NAME, "solution"), join(sim, NAME, "solution"), { recursive: true });
  rig = await startEpisodeRig({
    seed: 11,
    simScenariosDir: sim,
    simProfile: { models: { [MODEL]: { skill: 1, malformed_tool_json_rate: 0 } } },
  });
  const docker = rig.sandbox.docker;
  built = await new OfflineBench(docker, { repoRoot: REPO_ROOT }).build({
    target: TARGET,
    tag: TAG,
    scenarios: [NAME],
    push: false,
  });
  const info = await probeScenarioInfo(docker, rig.sandbox.session, built.base.cacheRef, NAME);
  scenario = {
    name: NAME,
    dir: "",
    instruction: info.instruction_md,
    task: {
      agent: { timeout_sec: info.agent_timeout_s ?? 600 },
      verifier: { timeout_sec: info.verifier_timeout_s, agent_output_path: info.agent_output_path },
    },
    testFiles: Object.fromEntries(
      Object.entries(info.tests_files_b64).map(([f, b64]) => [f, Buffer.from(b64, "base64")]),
    ),
  };
  const scen = built.scenarios[0]!;
  images = {
    sidecar: async () => asBuilt(built.base.cacheRef, built.base.id),
    scenario: async () => asBuilt(scen.cacheRef, scen.id),
  };
  const sdk = sdkSingleFile();
  runtime = {
    kind: "bench",
    sdk: { entry: sdk.name, files: [{ path: sdk.name, data: sdk.content }] },
    verifierNetwork: "none",
  };
}, 1_200_000);

afterAll(async () => {
  if (built) {
    for (const ref of [built.base.ref, ...built.scenarios.map((s) => s.ref)])
      await rig.sandbox.docker
        .getImage(ref)
        .remove({ noprune: true })
        .catch(() => undefined);
  }
  await rig?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

async function episode(name: string, over: Partial<RunEpisodeOptions> = {}): Promise<EpisodeResult> {
  const { r } = await runTestEpisode(rig, {
    runtime,
    images,
    pack: packOf(
      { "policy.json": JSON.stringify({ kind: "pin", model: MODEL }) },
      ATTACKS[name] ? scriptSkill(name, ATTACKS[name]) : "# Notes\n\nRead the instruction; do the task.\n",
    ),
    scenario,
    runsDir: join(tmp, "runs"),
    label: name,
    defaultModel: MODEL,
    timeouts: { agentMs: 180_000, stopGraceMs: 2_000 },
    report: (r, ms) =>
      `${name}: ${r.status} ${r.failure ? `${r.failure.class}/${r.failure.code}` : "clean"} quality ${r.quality} (${r.passed}/${r.tests}) notes ${r.notes.join(",")} ` +
      `agent ${Math.round(r.timings.agent_ms)} ms, collect ${Math.round(r.timings.collect_ms)} ms, total ${Math.round(ms)} ms; ` +
      `files ${JSON.stringify(r.agent.files)}; disk ${r.agent.disk_bytes}; provenance ${JSON.stringify(r.provenance)}`,
    ...over,
  });
  return r;
}

describe("bench runtime", () => {
  it("an honest pack: the reference deliverable reaches upstream's grading byte for byte, the session read whole", async () => {
    const r = await episode(NAME);
    expect(r.status).toBe("scored");
    expect(r.failure).toBeNull();
    // What the reference route writes (solve.sh's heredoc), graded directly by upstream's rules:
    // the episode's verdict must be that one.
    const solve = await readFile(join(SCENARIOS_DIR, NAME, "solution", "solve.sh"), "utf8");
    const reference = Buffer.from(`${/<<'EOF'\n([\s\S]*?\n)EOF\n/.exec(solve)![1]}`);
    expect(r.agent.files["/app/mktar.py"]).toEqual({ kind: "file", bytes: reference.length });
    const scope = rig.sandbox.openScope(`bench-direct-${Date.now().toString(36)}`, 20 * 60_000);
    try {
      const direct = await gradeBenchDeliverable({
        engine: rig.sandbox.episodeEngine,
        networks: rig.sandbox.networks,
        scope,
        image: (await images.scenario(scenario)).ref,
        testFiles: scenario.testFiles ?? {},
        agentOutputPath: scenario.task.verifier.agent_output_path,
        deliverable: reference,
        timeoutMs: scenario.task.verifier.timeout_sec * 1000,
        network: "none",
      });
      console.log(`direct grading of the reference: ${direct.passed}/${direct.tests}`);
      expect({ tests: r.tests, passed: r.passed, quality: r.quality }).toEqual({
        tests: direct.tests,
        passed: direct.passed,
        quality: direct.quality,
      });
    } finally {
      await scope.dispose();
    }
    expect(r.agent.files["/workspace/turns.jsonl"]?.kind).toBe("file");
    expect(r.provenance?.total).toBeGreaterThan(0);
    expect(r.provenance?.coverage).toBe(1);
  }, 600_000);

  it("a 15 TiB sparse deliverable is refused at its stat; the tests run without it, as upstream's", async () => {
    const r = await episode("bench-sparse-deliverable", {
      agentDisk: { limitBytes: Number.MAX_SAFE_INTEGER },
    });
    expect(r.agent.files["/app/mktar.py"]).toEqual({ kind: "too_large", bytes: 15 * TiB });
    expect(r.notes).toContain("agent_output_missing");
    expect(r.tests).toBe(6);
    expect(r.quality).toBe(0);
    expect(r.timings.collect_ms).toBeLessThan(15_000);
  }, 600_000);

  it("a session export made sparse after Hermes wrote it is refused unread; the deliverable is graded", async () => {
    const r = await episode("bench-sparse-export", { agentDisk: { limitBytes: Number.MAX_SAFE_INTEGER } });
    expect(r.agent.files["/workspace/turns.jsonl"]).toEqual({ kind: "too_large", bytes: 15 * TiB });
    expect(r.notes).toContain("turns_too_large");
    expect(r.provenance).toMatchObject({ total: 0 });
    expect(r.agent.files["/app/mktar.py"]?.kind).toBe("file");
    expect(r.tests).toBe(6);
    expect(r.failure?.class ?? "none").not.toBe("infra");
    expect(r.timings.collect_ms).toBeLessThan(15_000);
  }, 600_000);

  it("an agent that writes without end is killed at the disk limit, its session exported post mortem", async () => {
    const limitBytes = 1 * GiB;
    const r = await episode("bench-write-forever", { agentDisk: { limitBytes, pollMs: 1_000 } });
    expect(r.failure).toMatchObject({ class: "policy", code: "agent_disk_limit" });
    expect(r.agent.killed_by).toBe("disk_limit");
    expect(r.agent.disk_bytes).toBeGreaterThan(limitBytes);
    expect(r.agent.disk_bytes).toBeLessThan(3 * GiB);
    // Every process of the agent user was killed; the session was still exported.
    expect(r.agent.files["/workspace/turns.jsonl"]?.kind).toBe("file");
    expect(r.agent.turns).toBeGreaterThan(0);
    console.log(
      `bench-write-forever: killed at ${((r.agent.disk_bytes ?? 0) / GiB).toFixed(2)} GiB (limit 1 GiB)`,
    );
  }, 600_000);
});
