/**
 * The real parts an episode test needs, all on this machine, built by the composition root's own
 * builders (src/environment) from a configuration of the rig's: the Engy simulator on loopback,
 * the meter in front of it, a sandbox on the real engine, and the project's images (built by
 * content hash, reused across runs). And one runner of whole episodes on them, `runTestEpisode`.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { parse as parseToml } from "smol-toml";
import { expect } from "vitest";
import type { ProjectImages } from "../../src/bench/index.js";
import { type Config, loadConfig } from "../../src/config.js";
import type { EngySim, SimProfileOverride } from "../../src/engy-sim/index.js";
import {
  type MeterOptions,
  meterOf,
  projectImagesOf,
  sandboxSettingsOf,
  startUpstream,
} from "../../src/environment/index.js";
import {
  type EpisodeResult,
  type EpisodeScenario,
  type RunEpisodeOptions,
  runEpisode,
} from "../../src/episode/index.js";
import type { Logger } from "../../src/log.js";
import { silentLogger } from "../../src/log.js";
import type { Meter } from "../../src/meter/index.js";
import { loadPack, type Pack } from "../../src/pack/index.js";
import { REPO_ROOT } from "../../src/repo.js";
import type { EpisodeRuntimeSetting } from "../../src/sandbox/index.js";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import { countLabelled, openTestSandbox, TEST_EPISODE_RUNTIME } from "./sandbox.js";

export { REPO_ROOT };
export const SCENARIOS_DIR = join(REPO_ROOT, "scenarios");

export interface EpisodeRig {
  sim: EngySim;
  meter: Meter;
  sandbox: Sandbox;
  images: ProjectImages;
  close(): Promise<void>;
}

export interface EpisodeRigOptions {
  seed?: number;
  log?: Logger;
  /** What the simulated models know how to do (default: the shipped scenarios' solutions). */
  simScenariosDir?: string;
  simProfile?: SimProfileOverride;
  /** EPISODE_RUNTIME of the rig's sandbox (default: the test project's, TEST_EPISODE_RUNTIME). */
  episodeRuntime?: EpisodeRuntimeSetting;
}

/**
 * The rig's configuration, read as the operator's is (src/config.ts) from an environment of the
 * rig's own, never this process's: the simulator (no LLM_API_KEY) with its delays off.
 */
function rigConfig(opts: EpisodeRigOptions): Config {
  return loadConfig({
    ENGY_SIM_SEED: String(opts.seed ?? 11),
    ENGY_SIM_LATENCY_SCALE: "0",
    SCENARIOS_DIR: opts.simScenariosDir ?? SCENARIOS_DIR,
    EPISODE_RUNTIME: opts.episodeRuntime ?? TEST_EPISODE_RUNTIME,
  });
}

/** The meter's retry delays in the rigs (the schedule itself is tested in meter.test.ts). */
export const SHORT_METER_RETRY = { statusStepMs: 20, streamStepMs: 20 } as const;

export interface MeterRig {
  sim: EngySim;
  meter: Meter;
  close(): Promise<void>;
}

/**
 * The Engy simulator on loopback and the meter in front of it, as the composition root builds
 * them from the rig's configuration (`opts.retry`, `opts.receipts`: the meter's own by default).
 */
export async function startMeterRig(
  opts: EpisodeRigOptions & Pick<MeterOptions, "retry" | "receipts"> = {},
): Promise<MeterRig & { config: Config }> {
  const log = opts.log ?? silentLogger;
  const config = rigConfig(opts);
  const upstream = await startUpstream(config, log, opts.simProfile ? { profile: opts.simProfile } : {});
  const sim = upstream.sim!;
  const meter = meterOf(config, log, upstream, {
    ...(opts.retry ? { retry: opts.retry } : {}),
    ...(opts.receipts ? { receipts: opts.receipts } : {}),
  });
  return {
    config,
    sim,
    meter,
    async close() {
      await meter.stop();
      await sim.close();
    },
  };
}

export async function startEpisodeRig(opts: EpisodeRigOptions = {}): Promise<EpisodeRig> {
  const log = opts.log ?? silentLogger;
  // Upstream's retry schedule (6 × 1.5 s·n for a 503) stacked under the policy SDK's own: the
  // rig shortens the meter's delays.
  const { config, sim, meter, close } = await startMeterRig({ ...opts, retry: SHORT_METER_RETRY });
  const sandbox = await openTestSandbox({ log, ...sandboxSettingsOf(config) });
  const images = projectImagesOf(config, sandbox.docker, log);
  return {
    sim,
    meter,
    sandbox,
    images,
    async close() {
      await sandbox.close();
      await close();
    },
  };
}

/** What `runTestEpisode` fills in when a test file does not say. */
export const EPISODE_DEFAULTS = { capUsd: 0.3, defaultModel: "glm-5.3-flash" } as const;

type Defaulted = "sandbox" | "images" | "meter" | "pack" | "capUsd" | "defaultModel" | "outDir";

/** One episode of a test: RunEpisodeOptions, the rig's parts and the defaults filled in where unset. */
export type TestEpisodeOptions = Omit<RunEpisodeOptions, Defaulted> &
  Partial<Pick<RunEpisodeOptions, Defaulted>> & {
    /** Where the artifacts go, a fresh folder each (unless `outDir` names one). */
    runsDir: string;
    /** The start of the episode's folder name. */
    label?: string;
    /** Count what the episode left on the engine (labelled containers and networks): none (default true). */
    expectNothingLeft?: boolean;
    /** A line to print once the episode ended (how it ended, for the run's log). */
    report?: (r: EpisodeResult, ms: number) => string;
  };

export interface EpisodeRun {
  r: EpisodeResult;
  /** The episode's wall time (the leftover count aside). */
  ms: number;
}

/**
 * Runs one whole episode on the rig's parts (a test may bring its own sandbox, images or meter)
 * with `EPISODE_DEFAULTS` and an empty pack where the test file sets nothing, and checks that
 * nothing the episode made survives it.
 */
export async function runTestEpisode(
  rig: Pick<EpisodeRig, "sandbox" | "images" | "meter">,
  opts: TestEpisodeOptions,
): Promise<EpisodeRun> {
  const { runsDir, label, expectNothingLeft = true, report, ...episode } = opts;
  const name = `${Date.now().toString(36)}-${Math.random().toString(16).slice(2, 6)}`;
  const sandbox = episode.sandbox ?? rig.sandbox;
  const t0 = performance.now();
  const r = await runEpisode({
    ...EPISODE_DEFAULTS,
    images: rig.images,
    meter: rig.meter,
    pack: packOf({}),
    outDir: join(runsDir, label ? `${label}-${name}` : name),
    ...episode,
    sandbox,
  });
  const ms = performance.now() - t0;
  if (report) console.log(report(r, ms));
  if (expectNothingLeft)
    expect(await countLabelled(sandbox.docker, sandbox.session.id, r.episode_id)).toEqual({
      containers: 0,
      networks: 0,
    });
  return { r, ms };
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
