/**
 * The composition root: the one place that builds what an evaluating process needs, from the
 * configuration, once per process. The store, the live status, the meter with the operator's key
 * (or the in-process Engy simulator when no LLM_API_KEY is set), the Docker sandbox and the
 * images. `eval`, the daemon, the benchmarks and the tests all open it here.
 */
import {
  type BenchSource,
  BuiltinBench,
  benchImageRef,
  loadSubnetSpecs,
  type ProjectImages,
  RegistryBench,
} from "../bench/index.js";
import type { Config } from "../config.js";
import type { EvaluationEnvironment, EvaluationSettings } from "../evaluation/index.js";
import type { Logger } from "../log.js";
import type { Meter, Receipt, ReceiptSink, RetryPolicy } from "../meter/index.js";
import { sdkSingleFile } from "../policy/index.js";
import { EnginePool } from "../pool/index.js";
import type { Docker } from "../sandbox/index.js";
import { type Catalogue, loadCatalogue } from "../scenarios/index.js";
import { LiveStatus } from "../status/index.js";
import { type Db, EvaluationRepo, KvRepo, type NetworkId, openDb, ReceiptRepo } from "../store/index.js";
import { loadMeterTables, meterOf, projectImagesOf, sandboxSettingsOf, startUpstream } from "./parts.js";

export interface Environment extends EvaluationEnvironment {
  config: Config;
  db: Db;
  live: LiveStatus;
  meter: Meter;
  /** The engines episodes run on (ENGINES; by default the local socket alone). */
  pool: EnginePool;
  /** The built-in suite's images. */
  images: ProjectImages;
  catalogue: Catalogue;
  priceTableHash: string;
  /** The upstream the meter forwards to (the simulator's loopback URL when simulated). */
  upstreamUrl: string;
  close(): Promise<void>;
}

export interface OpenEnvironmentOptions {
  log: Logger;
  live?: LiveStatus;
  db?: Db;
  /** Shorter per-episode timeouts (tests). */
  episodeTimeouts?: EvaluationSettings["episodeTimeouts"];
  /** Extra environment for the built-in agent (tests). */
  agentEnv?: Record<string, string>;
  /** The meter's retry schedule (tests shorten upstream's delays). */
  meterRetry?: Partial<RetryPolicy>;
  /**
   * Which bench the evaluations run; default BENCH_SOURCE, else the built-in suite. `benchRef`
   * overrides BENCH_IMAGE / IMAGE_CHANNEL for the registry source (`eval --bench REF`).
   */
  bench?: "builtin" | "registry";
  benchRef?: string;
  /** The daemon's network: its epochs' evaluations are stamped with it, and no other's are resumed. */
  network?: NetworkId;
}

/** Receipts go to SQLite and, as they are flushed, to the live status (metrics, status page). */
function receiptTee(repo: ReceiptRepo, live: LiveStatus): ReceiptSink {
  return {
    insertMany(receipts: readonly Receipt[]) {
      repo.insertMany(receipts);
      for (const r of receipts) {
        live.meterCall({
          episodeId: r.episode_id,
          model: r.model,
          status: r.status,
          usd: r.usd,
          clamped: r.clamped,
          ...(r.error_code === "cap" || r.status === 402
            ? { refused: "cap" as const }
            : r.error_code === "allowlist"
              ? { refused: "allowlist" as const }
              : {}),
          promptTokens: r.prompt_tokens,
          completionTokens: r.completion_tokens,
          ...(r.ttfb_ms !== null ? { ttfbMs: r.ttfb_ms } : {}),
        });
      }
    },
    listByEpisode: (id) => repo.listByEpisode(id),
  };
}

function settingsOf(config: Config, opts: OpenEnvironmentOptions): EvaluationSettings {
  return {
    dataDir: config.dataDir,
    concurrency: config.evaluation.concurrency,
    specNumber: config.evaluation.specNumber,
    defaultModel: config.llm.defaultModel,
    agentCommand: config.evaluation.agentCommand,
    episodeTimeouts: opts.episodeTimeouts,
    agentEnv: opts.agentEnv,
    strictProvenance: config.evaluation.strictProvenance,
    llm: { baseUrl: config.llm.baseUrl, simulated: config.llm.simulated },
  };
}

type Cleanup = () => Promise<void> | void;

export async function openEnvironment(config: Config, opts: OpenEnvironmentOptions): Promise<Environment> {
  const log = opts.log;
  const live = opts.live ?? new LiveStatus();
  const db = opts.db ?? openDb(config.dbPath, { log });
  const cleanups: Cleanup[] = [];
  try {
    const [tables, catalogue] = await Promise.all([
      loadMeterTables(),
      loadCatalogue(config.evaluation.scenariosDir),
    ]);
    const upstream = await startUpstream(config, log);
    const { upstreamUrl, sim } = upstream;
    if (sim) cleanups.push(() => sim.close());
    const meter = meterOf(config, log, upstream, {
      tables,
      receipts: receiptTee(new ReceiptRepo(db), live),
      ...(opts.meterRetry ? { retry: opts.meterRetry } : {}),
    });
    cleanups.push(() => meter.stop());
    const { pool, projectImages } = await openPool(config, log, live, db, cleanups);
    const bench = await benchOf(config, opts, pool.primary, catalogue, projectImages);
    log.info({ bench: bench.label }, "environment.bench");
    return {
      config,
      log,
      db,
      live,
      observer: live,
      settings: settingsOf(config, opts),
      priceTableHash: meter.priceTableHash,
      meter,
      sandbox: pool.primary,
      pool,
      images: projectImages,
      catalogue,
      bench,
      repo: new EvaluationRepo(db, opts.network),
      upstreamUrl,
      close: closerOf(cleanups, opts.db ? undefined : db, log),
    };
  } catch (err) {
    for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => undefined);
    if (!opts.db) db.close();
    throw err;
  }
}

/** The engines episodes run on; the first one builds the images (and the meter relay the others need). */
async function openPool(config: Config, log: Logger, live: LiveStatus, db: Db, cleanups: Cleanup[]) {
  let images: ProjectImages | undefined;
  const imagesOn = (docker: Docker) => (images ??= projectImagesOf(config, docker, log));
  const engines = config.evaluation.engines;
  const pool = await EnginePool.open({
    engines: engines.list,
    explicit: engines.explicit,
    sshAgent: engines.sshAgent,
    ...sandboxSettingsOf(config),
    log: log.child({ component: "pool" }),
    observer: live,
    kv: new KvRepo(db),
    relayImage: (docker, signal) => imagesOn(docker).meterRelay(signal),
  });
  cleanups.push(() => pool.close());
  return { pool, projectImages: imagesOn(pool.primary.docker) };
}

/** Where scenarios and images come from: the subnet's registry bench, or the built-in suite (default). */
async function benchOf(
  config: Config,
  opts: OpenEnvironmentOptions,
  sandbox: EnginePool["primary"],
  catalogue: Catalogue,
  projectImages: ProjectImages,
): Promise<BenchSource> {
  const kind = opts.bench ?? config.evaluation.benchSource ?? "builtin";
  if (kind !== "registry")
    return new BuiltinBench(catalogue, projectImages, {
      episodeCapUsd: config.llm.episodeCapUsd,
      defaultSuite: config.evaluation.suite,
    });
  const sdk = sdkSingleFile();
  return new RegistryBench({
    docker: sandbox.docker,
    session: sandbox.session,
    ref: opts.benchRef ?? benchImageRef(config.evaluation.benchImage, config.evaluation.imageChannel),
    specs: await loadSubnetSpecs(config.evaluation.subnetSpecsFile),
    sdk: { entry: sdk.name, files: [{ path: sdk.name, data: sdk.content }] },
    verifierNetwork: config.evaluation.verifierNetwork ?? "bridge",
    credentials: {
      username: config.evaluation.registryUsername,
      password: config.evaluation.registryPassword,
    },
    log: opts.log.child({ component: "bench" }),
  });
}

/** Closes once, in reverse order of opening; a failing step is logged and the rest still close. */
function closerOf(cleanups: Cleanup[], ownDb: Db | undefined, log: Logger): () => Promise<void> {
  let closed = false;
  return async () => {
    if (closed) return;
    closed = true;
    for (const c of cleanups.reverse()) {
      try {
        await c();
      } catch (err) {
        log.warn({ err: (err as Error).message }, "environment.close_failed");
      }
    }
    ownDb?.close();
  };
}
