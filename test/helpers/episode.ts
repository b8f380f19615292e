/**
 * The real parts an episode test needs, all on this machine: the Engy simulator on loopback,
 * the meter in front of it, a sandbox on the real engine, and the project's images (built by
 * content hash, reused across runs).
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { parse as parseToml } from "smol-toml";
import { ProjectImages } from "../../src/bench/index.js";
import { type EngySim, type SimProfileOverride, startEngySim } from "../../src/engy-sim/index.js";
import type { EpisodeScenario } from "../../src/episode/index.js";
import type { Logger } from "../../src/log.js";
import { silentLogger } from "../../src/log.js";
import { loadAllowlist, loadPriceTable, Meter } from "../../src/meter/index.js";
import { loadPack, type Pack } from "../../src/pack/index.js";
import { REPO_ROOT } from "../../src/repo.js";
import type { EpisodeRuntimeSetting } from "../../src/sandbox/index.js";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import { openTestSandbox } from "./sandbox.js";

export { REPO_ROOT };
export const SCENARIOS_DIR = join(REPO_ROOT, "scenarios");

export interface EpisodeRig {
  sim: EngySim;
  meter: Meter;
  sandbox: Sandbox;
  images: ProjectImages;
  close(): Promise<void>;
}

export async function startEpisodeRig(
  opts: {
    seed?: number;
    log?: Logger;
    /** What the simulated models know how to do (default: the shipped scenarios' solutions). */
    simScenariosDir?: string;
    simProfile?: SimProfileOverride;
    /** EPISODE_RUNTIME of the rig's sandbox (default: the test project's, TEST_EPISODE_RUNTIME). */
    episodeRuntime?: EpisodeRuntimeSetting;
  } = {},
): Promise<EpisodeRig> {
  const log = opts.log ?? silentLogger;
  const sim = await startEngySim({
    port: 0,
    seed: opts.seed ?? 11,
    scenariosDir: opts.simScenariosDir ?? SCENARIOS_DIR,
    latencyScale: 0,
    ...(opts.simProfile ? { profile: opts.simProfile } : {}),
    log,
  });
  const meter = new Meter({
    upstreamUrl: sim.url,
    apiKey: "sim",
    allowlist: loadAllowlist(),
    prices: loadPriceTable(),
    // Upstream's retry schedule (6 × 1.5 s·n for a 503) stacked under the policy SDK's own: the
    // rig shortens the meter's delays (the schedule itself is tested in meter.test.ts).
    retry: { statusStepMs: 20, streamStepMs: 20 },
    log,
  });
  const sandbox = await openTestSandbox({
    log,
    ...(opts.episodeRuntime ? { episodeRuntime: opts.episodeRuntime } : {}),
  });
  const images = new ProjectImages(sandbox.docker, { repoRoot: REPO_ROOT, log });
  return {
    sim,
    meter,
    sandbox,
    images,
    async close() {
      await sandbox.close();
      await meter.stop();
      await sim.close();
    },
  };
}

/** A validated pack from SKILL.md text and policy files. */
export function packOf(
  files: Record<string, string>,
  skill = "# Notes\n\nRead the instruction; do the task.\n",
): Pack {
  const r = loadPack(
    Buffer.from(JSON.stringify({ schema_version: 1, files: { "SKILL.md": skill, ...files } })),
  );
  if (!r.ok) throw new Error(`bad test pack: ${r.rejection.code}: ${r.rejection.message}`);
  return r.pack;
}

/** A shipped scenario read straight from its folder (task.toml + instruction.md). */
export async function shippedScenario(name: string): Promise<EpisodeScenario> {
  const dir = join(SCENARIOS_DIR, name);
  const task = parseToml(await readFile(join(dir, "task.toml"), "utf8")) as {
    agent?: { timeout_sec?: number };
    verifier?: { timeout_sec?: number; agent_output_path?: string; report?: "harness" | "files" };
    metadata?: { null_floor?: number; tests?: number; not_under_gvisor?: string };
  };
  return {
    name,
    dir,
    instruction: await readFile(join(dir, "instruction.md"), "utf8"),
    task: {
      agent: { timeout_sec: task.agent?.timeout_sec ?? 600 },
      verifier: {
        timeout_sec: task.verifier?.timeout_sec ?? 300,
        agent_output_path: task.verifier!.agent_output_path!,
        report: task.verifier?.report ?? "harness",
      },
      metadata: {
        null_floor: task.metadata?.null_floor,
        tests: task.metadata?.tests,
        not_under_gvisor: task.metadata?.not_under_gvisor,
      },
    },
  };
}
