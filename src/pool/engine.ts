/**
 * One engine of the pool as a record: its connection, state, counters and images; the view of it
 * the status page shows; the timeouts and the last sweep of its shutdown.
 */
import type { EngineConfig } from "../config.js";
import { InfraError } from "../errors.js";
import type { Logger } from "../log.js";
import type { Docker, EngineConnection, Sandbox } from "../sandbox/index.js";

/** One engine of the pool as the status page and /metrics show it (src/pool keeps it up to date). */
export interface EngineView {
  name: string;
  /** The engine's URL without credentials. */
  url: string;
  /** The first engine builds and pulls the images and runs the bench's probes. */
  primary: boolean;
  /** ready: takes episodes; down: failed its checks or went away (probed back in); starting: being checked. */
  state: "starting" | "ready" | "down";
  /** `engines drain NAME`: no new episodes; running ones finish. */
  draining: boolean;
  /** Episodes at once; null: the evaluation's concurrency (the default single engine). */
  slots: number | null;
  running: number;
  /** Episodes that ended on this engine since start, by how. */
  episodes: { scored: number; failed: number };
  /** Failures since start, by code: checks that failed, losses (`engine_lost`), infra failures of its episodes. */
  failures: Record<string, number>;
  /** Images of the current evaluation on this engine, and what was copied or pulled to get them. */
  images: { present: number; wanted: number; copies: number; copiedBytes: number; pulls: number };
  version: string | null;
  /** The OCI runtime of its episode containers, once checked (EPISODE_RUNTIME, src/sandbox/runtime.ts). */
  runtime: { name: string; gvisor: boolean } | null;
  lastError: { code: string; message: string; at: number } | null;
  /** When the engine entered its state (unix ms). */
  since: number;
}

export interface ImageStats {
  present: Set<string>;
  wanted: number;
  copies: number;
  copiedBytes: number;
  pulls: number;
}

/** One engine of the pool and everything the pool knows of it. */
export interface PoolEngine {
  cfg: EngineConfig;
  conn: EngineConnection | undefined;
  sandbox: Sandbox | undefined;
  /** Not on this host: reached over tcp:// or ssh://, the meter through a relay. */
  remote: boolean;
  primary: boolean;
  state: EngineView["state"];
  since: number;
  draining: boolean;
  running: number;
  episodes: { scored: number; failed: number };
  failures: Record<string, number>;
  lastError: EngineView["lastError"];
  version: string | null;
  lost: AbortController;
  missedBeats: number;
  lastBeatOk: number;
  beating: boolean;
  /** Image copies to this engine run one after the other (a copy is heavy for both engines). */
  copyChain: Promise<unknown>;
  /**
   * The running evaluation's images are all here: only then does the engine take its episodes (the
   * longest episodes go first; none should wait on a copy while another engine could start it).
   */
  imagesReady: boolean;
  imagesRetry: NodeJS.Timeout | undefined;
  probeFailures: number;
  probeTimer: NodeJS.Timeout | undefined;
  imageJobs: Map<string, Promise<void>>;
  images: ImageStats;
  log: Logger;
}

export function newPoolEngine(cfg: EngineConfig, primary: boolean, log: Logger): PoolEngine {
  return {
    cfg,
    conn: undefined,
    sandbox: undefined,
    remote: !cfg.url.startsWith("unix://"),
    primary,
    state: "starting",
    since: Date.now(),
    draining: false,
    running: 0,
    episodes: { scored: 0, failed: 0 },
    failures: {},
    lastError: null,
    version: null,
    lost: new AbortController(),
    missedBeats: 0,
    lastBeatOk: Date.now(),
    beating: false,
    copyChain: Promise.resolve(),
    imagesReady: true,
    imagesRetry: undefined,
    probeFailures: 0,
    probeTimer: undefined,
    imageJobs: new Map(),
    images: { present: new Set(), wanted: 0, copies: 0, copiedBytes: 0, pulls: 0 },
    log: log.child({ engine: cfg.name }),
  };
}

export function viewOf(e: PoolEngine): EngineView {
  return {
    name: e.cfg.name,
    url: e.conn?.label ?? e.cfg.url,
    primary: e.primary,
    state: e.state,
    draining: e.draining,
    slots: e.cfg.slots ?? null,
    running: e.running,
    episodes: { ...e.episodes },
    failures: { ...e.failures },
    images: {
      present: e.images.present.size,
      wanted: e.images.wanted,
      copies: e.images.copies,
      copiedBytes: e.images.copiedBytes,
      pulls: e.images.pulls,
    },
    version: e.version,
    runtime: runtimeView(e),
    lastError: e.lastError,
    since: e.since,
  };
}

function runtimeView(e: PoolEngine): EngineView["runtime"] {
  const r = e.sandbox?.episodeRuntime;
  return r ? { name: r.name, gvisor: r.gvisor } : null;
}

export function withTimeout<T>(p: Promise<T>, ms: number, onTimeout: () => void, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        onTimeout();
        reject(new InfraError("engine_check_timeout", `${what} took longer than ${Math.round(ms / 1000)} s`));
      }, ms);
      timer.unref();
    }),
  ]).finally(() => clearTimeout(timer));
}

/** A ping that gives up after `ms` (dockerode's ping takes an abort signal it does not declare). */
export function pingWithin(docker: Docker, ms: number): Promise<unknown> {
  type WithSignal = (o: { abortSignal: AbortSignal }) => Promise<unknown>;
  const ping = docker.ping as unknown as WithSignal;
  return ping.call(docker, { abortSignal: AbortSignal.timeout(ms) });
}

/**
 * Shut one engine's sandbox down, within a bound. An engine that is down gets one short chance: if
 * it answers again, what this process left there goes now; a silent one must not hold the shutdown
 * (the next start sweeps it).
 */
export async function closeEngine(e: PoolEngine): Promise<void> {
  clearTimeout(e.probeTimer);
  clearTimeout(e.imagesRetry);
  if (!e.sandbox) return;
  if (e.state !== "ready") {
    e.sandbox.engineWatch.stop();
    e.sandbox.reaper.stop();
    e.conn?.restore();
    const answers = e.conn
      ? await pingWithin(e.conn.docker, 5_000)
          .then(() => true)
          .catch(() => false)
      : false;
    if (answers)
      await withTimeout(e.sandbox.close(), 30_000, () => e.conn?.sever("closing"), "the last sweep").catch(
        (x) => e.log.warn({ err: (x as Error).message }, "engine.close_failed"),
      );
    return;
  }
  // A ready engine that stops answering now must not hold the shutdown either (the next start sweeps).
  await withTimeout(e.sandbox.close(), 120_000, () => e.conn?.sever("closing"), "the last sweep").catch((x) =>
    e.log.warn({ err: (x as Error).message }, "engine.close_failed"),
  );
}
