/**
 * The composition root's parts, each built from the typed configuration: `openEnvironment`
 * assembles them for `eval`, the daemon and the benchmarks, and the test rigs call the same
 * builders, so a setting added here reaches every one of them. What only tests set (a simulator
 * profile object, the meter's shortened retry) is an option of the builder, never a copy of it.
 */
import { ProjectImages } from "../bench/index.js";
import type { Config } from "../config.js";
import type { EngySim, SimProfileOverride } from "../engy-sim/index.js";
import type { Logger } from "../log.js";
import {
  type Allowlist,
  loadAllowlist,
  loadPriceTable,
  Meter,
  type PriceTable,
  type ReceiptSink,
  type RetryPolicy,
} from "../meter/index.js";
import { ALLOWLIST_FILE, PRICE_TABLE_FILE, REPO_ROOT } from "../repo.js";
import type { Docker, EpisodeRuntimeSetting } from "../sandbox/index.js";

/** Where the meter forwards: the operator's upstream, or the simulator (then `sim` is set: close it). */
export interface Upstream {
  upstreamUrl: string;
  apiKey: string | undefined;
  sim?: EngySim;
}

/**
 * The upstream the meter forwards to: the operator's, or the in-process Engy simulator when no
 * LLM_API_KEY is set. `profile` (tests) stands in for ENGY_SIM_PROFILE with an override object.
 */
export async function startUpstream(
  config: Config,
  log: Logger,
  opts: { profile?: SimProfileOverride } = {},
): Promise<Upstream> {
  if (!config.llm.simulated) return { upstreamUrl: config.llm.baseUrl, apiKey: config.llm.apiKey };
  const { startEngySim } = await import("../engy-sim/index.js");
  const profile = opts.profile ?? config.sim.profilePath;
  const sim = await startEngySim({
    host: "127.0.0.1",
    port: 0,
    seed: config.sim.seed,
    ...(profile ? { profile } : {}),
    scenariosDir: config.evaluation.scenariosDir,
    latencyScale: config.sim.latencyScale,
    log: log.child({ component: "engy-sim" }),
  });
  log.info(
    { url: sim.url, seed: config.sim.seed, latencyScale: config.sim.latencyScale },
    "engy_sim.started",
  );
  return { upstreamUrl: sim.url, apiKey: "sim-key", sim };
}

/** The allowlist and the price table the meter enforces (the shipped files). */
export interface MeterTables {
  allowlist: Allowlist;
  prices: PriceTable;
}

export function loadMeterTables(): MeterTables {
  return { allowlist: loadAllowlist(ALLOWLIST_FILE), prices: loadPriceTable(PRICE_TABLE_FILE) };
}

export interface MeterOptions {
  /** Default: the shipped files, read now. */
  tables?: MeterTables;
  /** Where receipts go (the root: SQLite and the live status); default: the meter's own. */
  receipts?: ReceiptSink;
  /** The retry schedule (tests shorten upstream's delays). */
  retry?: Partial<RetryPolicy>;
}

/** The meter in front of `upstream`, with UPSTREAM_TIMEOUT_S. */
export function meterOf(config: Config, log: Logger, upstream: Upstream, opts: MeterOptions = {}): Meter {
  const { allowlist, prices } = opts.tables ?? loadMeterTables();
  return new Meter({
    upstreamUrl: upstream.upstreamUrl,
    ...(upstream.apiKey ? { apiKey: upstream.apiKey } : {}),
    allowlist,
    prices,
    ...(opts.receipts ? { receipts: opts.receipts } : {}),
    log: log.child({ component: "meter" }),
    upstreamTimeoutMs: config.llm.upstreamTimeoutMs,
    ...(opts.retry ? { retry: opts.retry } : {}),
  });
}

/** What every engine's sandbox is opened with: EPISODE_SUBNET_POOL, DAEMON_IN_CONTAINER, EPISODE_RUNTIME. */
export function sandboxSettingsOf(config: Config): {
  poolCidr: string;
  daemonInContainer: boolean | undefined;
  episodeRuntime: EpisodeRuntimeSetting;
} {
  return {
    poolCidr: config.evaluation.subnetPool,
    daemonInContainer: config.evaluation.daemonInContainer,
    episodeRuntime: config.evaluation.episodeRuntime,
  };
}

/** The built-in suite's images on `docker` (AGENT_IMAGE / SIDECAR_IMAGE pin them). */
export function projectImagesOf(config: Config, docker: Docker, log: Logger): ProjectImages {
  return new ProjectImages(docker, {
    repoRoot: REPO_ROOT,
    ...(config.evaluation.agentImage ? { agentImage: config.evaluation.agentImage } : {}),
    ...(config.evaluation.sidecarImage ? { sidecarImage: config.evaluation.sidecarImage } : {}),
    log: log.child({ component: "images" }),
  });
}
