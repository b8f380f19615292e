/**
 * The engine pool: the Docker engines episodes run on, each with its number of slots. An episode
 * runs whole on one engine (its networks, sidecar, agent, verifier: src/episode takes one Sandbox);
 * the pool only decides which, and keeps each engine honest:
 *  - at start every engine is checked (reachable, API ≥ 1.41, Linux, its own episode firewall in
 *    place); one that fails is out of placement with an alarm and probed back in; when none can take
 *    episodes the start fails with every problem in one message;
 *  - a heartbeat and the engine's event stream notice an engine that dies or is cut off: its running
 *    episodes are aborted (infra, `engine_lost`: re-run, on another engine while one has a slot), its
 *    connection severed so nothing waits on a silent host, and it is probed back in; the probe's
 *    sweep removes what the outage left there;
 *  - `engines drain NAME` (the database) stops new episodes there; running ones finish;
 *  - the first engine builds and pulls the images; the others get exactly those images (copied
 *    through the engines' APIs, or pulled by digest for a registry's), before their first episode.
 * With nothing configured the pool is one engine, the local socket, bounded by the evaluation's
 * concurrency, with no heartbeat: what ran before the pool runs unchanged.
 */
import type { BenchProgress } from "../bench/index.js";
import type { EngineConfig } from "../config.js";
import type { EpisodeImages, EpisodeResult } from "../episode/index.js";
import { InfraError, InputError, toValidatorError } from "../errors.js";
import type { Logger } from "../log.js";
import {
  type BuiltImage,
  connectEngine,
  copyImages,
  type Docker,
  type EngineConnection,
  imageIdOf,
  probeEngine,
  pullDigestAs,
  Sandbox,
} from "../sandbox/index.js";
import type { EngineView } from "../status/index.js";
import type { KvRepo } from "../store/index.js";
import { readDrained } from "./drain.js";
import { pickEngine, probeDelayMs, totalSlots } from "./placement.js";

/** Who hears about engines (LiveStatus satisfies it). */
export interface PoolObserver {
  raise(code: string, message: string, severity?: "warn" | "error"): void;
  clear?(code: string): void;
  setEngines?(views: EngineView[]): void;
  benchProgress?(p: BenchProgress): void;
}

export interface PoolOptions {
  engines: readonly EngineConfig[];
  /** ENGINES was set. Otherwise the one default engine runs as before: no heartbeat, no drains. */
  explicit: boolean;
  sshAgent?: string | undefined;
  poolCidr: string;
  /** DAEMON_IN_CONTAINER, for engines on this host (unix://). */
  daemonInContainer?: boolean | undefined;
  log: Logger;
  observer?: PoolObserver;
  /** Drain flags (`engines drain NAME`). */
  kv?: Pick<KvRepo, "get">;
  /** The meter relay image, built on the first engine (`docker`); needed once an engine is not on this host. */
  relayImage?: (docker: Docker, signal?: AbortSignal) => Promise<BuiltImage>;
  /**
   * Ping period of explicit pools (default 5 s); an engine that has not answered one for
   * `lostAfterMs` (default 25 s, two misses at least) is lost. 0: no heartbeat.
   */
  heartbeatMs?: number;
  lostAfterMs?: number;
  /** First probe delay of an engine that is down (doubling to 30 s). */
  probeBaseMs?: number;
  drainPollMs?: number;
  /** A check (or a probe) taking longer than this fails (default 180 s: the first relay copy). */
  checkTimeoutMs?: number;
  /** Episodes waiting while no engine is ready fail (infra) after this long (default 10 min). */
  noEngineMs?: number;
  reapIntervalMs?: number;
  /** Sandbox firewall; "off" only where the operator chose it. */
  firewall?: "iptables" | "off";
}

/** Where one episode runs: what runEpisode needs of the engine. */
export interface Placement {
  engine: string;
  sandbox: Sandbox;
  /** The evaluation's signal, and the engine's loss. */
  signal: AbortSignal;
  /** The evaluation's images, placed on this engine before they are used. */
  images(of: EpisodeImages): EpisodeImages;
}

export interface EvaluationPlacement {
  /** Run one attempt of `scenario` on an engine; an engine lost meanwhile makes it `engine_lost` (infra). */
  run(
    scenario: string,
    signal: AbortSignal,
    fn: (p: Placement) => Promise<EpisodeResult>,
    /** The episode's id, for the placement's log line. */
    episode?: string,
  ): Promise<EpisodeResult>;
}

interface ImageStats {
  present: Set<string>;
  wanted: number;
  copies: number;
  copiedBytes: number;
  pulls: number;
}

interface PoolEngine {
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

interface Waiter {
  avoid: ReadonlySet<string>;
  resolve: (e: PoolEngine) => void;
  reject: (err: unknown) => void;
}

const imageKey = (i: Pick<BuiltImage, "ref" | "id">) => `${i.ref}@${i.id}`;

function withTimeout<T>(p: Promise<T>, ms: number, onTimeout: () => void, what: string): Promise<T> {
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

function untilAborted<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

export class EnginePool {
  private readonly engines: PoolEngine[];
  private readonly waiters: Waiter[] = [];
  private readonly log: Logger;
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly closing = new AbortController();
  private relay: Promise<BuiltImage> | undefined;
  /** The running evaluation's images (prefetch): an engine that needs one gets them all in one copy. */
  private wanted: readonly BuiltImage[] = [];
  private noReadySince: number | undefined;
  private closed = false;

  private constructor(private readonly opts: PoolOptions) {
    this.log = opts.log;
    this.engines = opts.engines.map((cfg, k) => ({
      cfg,
      conn: undefined,
      sandbox: undefined,
      remote: !cfg.url.startsWith("unix://"),
      primary: k === 0,
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
      log: opts.log.child({ engine: cfg.name }),
    }));
  }

  /**
   * Connect and check every engine. Throws (one message naming every problem) when the first engine
   * (it builds the images) fails, or when no engine could take an episode.
   */
  static async open(opts: PoolOptions): Promise<EnginePool> {
    if (!opts.engines.length) throw new InputError("engines_empty", "no engine to run episodes on");
    const pool = new EnginePool(opts);
    try {
      await pool.start();
    } catch (err) {
      await pool.close();
      throw err;
    }
    return pool;
  }

  private async start(): Promise<void> {
    const problems: string[] = [];
    for (const e of this.engines) {
      try {
        e.conn = connectEngine({
          url: e.cfg.url,
          ...(e.cfg.tlsDir ? { tlsDir: e.cfg.tlsDir } : {}),
          ...(e.cfg.sshKey ? { sshKey: e.cfg.sshKey } : {}),
          ...(this.opts.sshAgent ? { sshAgent: this.opts.sshAgent } : {}),
        });
      } catch (err) {
        problems.push(`engine ${e.cfg.name} (${e.cfg.url}): ${(err as Error).message}`);
      }
    }
    if (problems.length) throw new InputError("engines_invalid", problems.join("; "));

    const [first, ...rest] = this.engines as [PoolEngine, ...PoolEngine[]];
    const firstErr = await this.check(first).then(
      () => undefined,
      (err: unknown) => err,
    );
    // Without the first engine there is no relay image: the others are then only asked whether they answer.
    const restErr = await Promise.all(
      rest.map((e) =>
        (firstErr === undefined || !e.remote ? this.check(e) : probeEngine(e.conn!.docker)).then(
          () => undefined,
          (err: unknown) => err,
        ),
      ),
    );
    const named = (pairs: Array<[PoolEngine, unknown]>) =>
      pairs
        .filter(([, err]) => err !== undefined)
        .map(([e, err]) => `engine ${e.cfg.name} (${e.conn?.label ?? e.cfg.url}): ${(err as Error).message}`);
    const all: Array<[PoolEngine, unknown]> = [
      [first, firstErr],
      ...rest.map((e, k): [PoolEngine, unknown] => [e, restErr[k]]),
    ];
    if (firstErr !== undefined)
      throw new InfraError(
        "engine_pool_unavailable",
        `the first engine builds and pulls the images and must pass its checks: ${named(all).join("; ")}`,
        { retryable: false },
      );
    for (const [e, err] of all) {
      if (err === undefined) this.markReady(e);
      else this.markDown(e, "check", err);
    }
    const down = named(all);
    if (!this.engines.some((e) => e.state === "ready" && e.cfg.slots !== 0))
      throw new InfraError("engine_pool_unavailable", `no engine can take episodes: ${down.join("; ")}`, {
        retryable: false,
      });
    if (down.length) this.log.error({ problems: down }, "pool.engines_down");
    this.log.info(
      {
        engines: this.engines.map((e) => ({
          name: e.cfg.name,
          url: e.conn?.label,
          slots: e.cfg.slots,
          state: e.state,
        })),
      },
      "pool.opened",
    );

    if (this.opts.explicit) {
      const beat = this.opts.heartbeatMs ?? 5_000;
      if (beat > 0) {
        const t = setInterval(() => this.heartbeat(beat), beat);
        t.unref();
        this.timers.push(t);
      }
      if (this.opts.kv) {
        this.readDrains();
        const t = setInterval(() => this.readDrains(), this.opts.drainPollMs ?? 2_000);
        t.unref();
        this.timers.push(t);
      }
    }
    this.update();
  }

  // ------------------------------------------------------------------ checks, losses, probes

  private relayImage(): Promise<BuiltImage> {
    if (!this.opts.relayImage)
      return Promise.reject(
        new InfraError("relay_image_missing", "an engine not on this host needs the meter relay image"),
      );
    this.relay ??= this.opts.relayImage(this.engines[0]!.conn!.docker, this.closing.signal).catch((err) => {
      this.relay = undefined;
      throw err;
    });
    return this.relay;
  }

  /** Reachable, recent, Linux; its relay image present; its firewall installed; swept. */
  private async check(e: PoolEngine): Promise<void> {
    const conn = e.conn!;
    await withTimeout(
      (async () => {
        const facts = await probeEngine(conn.docker);
        e.version = facts.version;
        let relayRef: string | undefined;
        if (e.remote) {
          const relay = await this.relayImage();
          await this.ensureImagesOn(e, [relay], {});
          relayRef = relay.ref;
        }
        e.sandbox ??= Sandbox.create({
          docker: conn.docker,
          poolCidr: this.opts.poolCidr,
          log: e.log.child({ component: "sandbox" }),
          ...(this.opts.firewall ? { firewall: this.opts.firewall } : {}),
          ...(this.opts.reapIntervalMs !== undefined ? { reapIntervalMs: this.opts.reapIntervalMs } : {}),
          ...(relayRef ? { remote: { relayImage: relayRef } } : {}),
          ...(!e.remote && this.opts.daemonInContainer !== undefined
            ? { daemonInContainer: this.opts.daemonInContainer }
            : {}),
          // Owner containers (a daemon in a container) live on this host's engine, if there is one.
          ownerDocker: e.remote ? (this.engines.find((x) => !x.remote)?.conn?.docker ?? null) : conn.docker,
        });
        if (this.opts.explicit)
          e.sandbox.engineWatch.onLost = () =>
            this.markDown(
              e,
              "lost",
              new Error("its event stream ended (the engine stopped, restarted or was cut off)"),
            );
        await e.sandbox.start();
      })(),
      this.opts.checkTimeoutMs ?? 180_000,
      () => conn.sever("the engine's check timed out"),
      `checking engine ${e.cfg.name}`,
    );
  }

  private markReady(e: PoolEngine): void {
    if (this.closed) return;
    const was = e.state;
    e.state = "ready";
    e.since = Date.now();
    e.probeFailures = 0;
    e.missedBeats = 0;
    e.lastBeatOk = Date.now();
    if (e.lost.signal.aborted) e.lost = new AbortController();
    if (was === "down") {
      this.opts.observer?.clear?.(`engine_down:${e.cfg.name}`);
      e.log.info({ version: e.version }, "engine.back");
      // What it held before the outage is verified again before it takes episodes.
      this.refreshImages(e);
    }
    this.update();
    this.pump();
  }

  /**
   * `check`: failed its checks (at start or a probe); `lost`: a ready engine went away (its episodes
   * are aborted as `engine_lost`). Either way: out of placement, an alarm, probed back in.
   */
  private markDown(e: PoolEngine, kind: "check" | "lost", err: unknown): void {
    if (this.closed) return;
    if (kind === "lost" && e.state !== "ready") return;
    const wasReady = e.state === "ready";
    const ve = toValidatorError(err, kind === "lost" ? "engine_lost" : "engine_check_failed");
    const code = kind === "lost" ? "engine_lost" : ve.code;
    e.state = "down";
    e.since = Date.now();
    e.failures[code] = (e.failures[code] ?? 0) + 1;
    e.lastError = { code, message: ve.message, at: Date.now() };
    if (wasReady) {
      // Nothing may wait on a silent host: requests in flight fail now, new ones at once, until a probe.
      e.conn?.sever(`engine ${e.cfg.name} is out of placement: ${ve.message}`);
      e.sandbox?.engineWatch.declareLost();
      e.lost.abort(new InfraError("engine_lost", `engine ${e.cfg.name} went away: ${ve.message}`));
      e.imageJobs.clear();
      e.log.error({ code, err: ve.message, running: e.running }, "engine.lost");
    } else e.log.warn({ code, err: ve.message }, "engine.check_failed");
    this.opts.observer?.raise(
      `engine_down:${e.cfg.name}`,
      `engine ${e.cfg.name} (${e.conn?.label ?? e.cfg.url}) ${wasReady ? "went away" : "failed its checks"}: ${ve.message}. ` +
        `${wasReady ? "Its episodes re-run on the other engines; it" : "It"} takes no episodes until a probe finds it healthy.`,
      "error",
    );
    this.scheduleProbe(e);
    this.update();
    this.checkStarved();
  }

  private scheduleProbe(e: PoolEngine): void {
    if (this.closed || e.probeTimer) return;
    const delay = probeDelayMs(e.probeFailures, this.opts.probeBaseMs ?? 2_000);
    e.probeTimer = setTimeout(() => {
      e.probeTimer = undefined;
      void this.probe(e);
    }, delay);
    e.probeTimer.unref();
  }

  private async probe(e: PoolEngine): Promise<void> {
    if (this.closed || e.state === "ready") return;
    e.conn?.restore();
    try {
      await this.check(e);
      this.markReady(e);
    } catch (err) {
      e.probeFailures++;
      e.conn?.sever("the engine failed its probe");
      const ve = toValidatorError(err, "engine_check_failed");
      e.lastError = { code: ve.code, message: ve.message, at: Date.now() };
      e.log.warn({ code: ve.code, err: ve.message, failures: e.probeFailures }, "engine.probe_failed");
      this.update();
      this.scheduleProbe(e);
    }
  }

  private heartbeat(periodMs: number): void {
    for (const e of this.engines) {
      if (e.state !== "ready" || e.beating || !e.conn) continue;
      e.beating = true;
      type WithSignal = (o: { abortSignal: AbortSignal }) => Promise<unknown>;
      const ping = e.conn.docker.ping as unknown as WithSignal;
      const lostAfter = this.opts.lostAfterMs ?? 25_000;
      ping
        .call(e.conn.docker, { abortSignal: AbortSignal.timeout(Math.max(2 * periodMs, 10_000)) })
        .then(
          () => {
            e.missedBeats = 0;
            e.lastBeatOk = Date.now();
          },
          (err) => {
            e.missedBeats++;
            // A busy engine answers late; a gone one never: lost only after `lostAfter` of silence.
            const silentMs = Date.now() - e.lastBeatOk;
            if (e.missedBeats >= 2 && silentMs >= lostAfter)
              this.markDown(
                e,
                "lost",
                new Error(
                  `no answer to a ping for ${Math.round(silentMs / 1000)} s (${(err as Error).message})`,
                ),
              );
          },
        )
        .finally(() => {
          e.beating = false;
        });
    }
    this.checkStarved();
  }

  private readDrains(): void {
    if (!this.opts.kv) return;
    let drained: Record<string, unknown>;
    try {
      drained = readDrained(this.opts.kv);
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, "pool.drains_unreadable");
      return;
    }
    let changed = false;
    for (const e of this.engines) {
      const d = e.cfg.name in drained;
      if (d === e.draining) continue;
      e.draining = d;
      changed = true;
      e.log.warn({ running: e.running }, d ? "engine.draining" : "engine.resumed");
    }
    if (changed) {
      this.update();
      this.pump();
    }
  }

  /** Episodes waiting while no engine is ready fail after noEngineMs (the evaluation re-runs or discards). */
  private checkStarved(): void {
    const ready = this.engines.some((e) => e.state === "ready" && e.cfg.slots !== 0);
    if (ready || !this.waiters.length) {
      this.noReadySince = undefined;
      return;
    }
    this.noReadySince ??= Date.now();
    if (Date.now() - this.noReadySince < (this.opts.noEngineMs ?? 600_000)) return;
    const err = new InfraError(
      "no_engine_available",
      "no engine of the pool has been ready to take episodes",
    );
    for (const w of this.waiters.splice(0)) w.reject(err);
  }

  // ------------------------------------------------------------------ placement

  /** Slots of all engines (undefined: the default engine, bounded by the evaluation's concurrency). */
  get capacity(): number | undefined {
    return totalSlots(this.engines.map((e) => e.cfg.slots));
  }

  /** The first engine's sandbox: where images are built and pulled and the bench's probes run. */
  get primary(): Sandbox {
    const s = this.engines[0]?.sandbox;
    if (!s) throw new InfraError("engine_pool_closed", "the engine pool is not open");
    return s;
  }

  private free(e: PoolEngine): number {
    return e.cfg.slots === undefined ? Number.POSITIVE_INFINITY : e.cfg.slots - e.running;
  }

  private pump(): void {
    while (this.waiters.length) {
      const w = this.waiters[0]!;
      const name = pickEngine(
        this.engines.map((e) => ({
          name: e.cfg.name,
          placeable: e.state === "ready" && !e.draining && e.imagesReady && e.sandbox !== undefined,
          free: this.free(e),
        })),
        w.avoid,
      );
      if (name === undefined) break;
      this.waiters.shift();
      const e = this.engines.find((x) => x.cfg.name === name)!;
      e.running++;
      w.resolve(e);
    }
    this.update();
  }

  private acquire(avoid: ReadonlySet<string>, signal: AbortSignal): Promise<PoolEngine> {
    signal.throwIfAborted();
    return new Promise<PoolEngine>((resolve, reject) => {
      const w: Waiter = {
        avoid,
        resolve: (e) => {
          signal.removeEventListener("abort", onAbort);
          resolve(e);
        },
        reject: (err) => {
          signal.removeEventListener("abort", onAbort);
          reject(err);
        },
      };
      const onAbort = () => {
        const i = this.waiters.indexOf(w);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.waiters.push(w);
      this.pump();
      this.checkStarved();
    });
  }

  private release(e: PoolEngine, r: EpisodeResult | undefined): void {
    e.running = Math.max(0, e.running - 1);
    if (r) {
      if (r.status === "scored") e.episodes.scored++;
      else e.episodes.failed++;
      // The loss itself is counted once by markDown, not once per episode it cut short.
      if (r.failure && r.failure.class !== "policy" && r.failure.code !== "engine_lost")
        e.failures[r.failure.code] = (e.failures[r.failure.code] ?? 0) + 1;
    }
    this.pump();
  }

  /** One evaluation's placements: re-runs of a scenario avoid the engines it failed on (infra). */
  forEvaluation(): EvaluationPlacement {
    const failedOn = new Map<string, Set<string>>();
    return {
      run: async (scenario, signal, fn, episode) => {
        const avoid = failedOn.get(scenario) ?? new Set<string>();
        const e = await this.acquire(avoid, signal);
        const lost = e.lost.signal;
        let r: EpisodeResult | undefined;
        try {
          e.log.info({ scenario, ...(episode ? { episode } : {}), running: e.running }, "episode.placed");
          r = await fn({
            engine: e.cfg.name,
            sandbox: e.sandbox!,
            signal: AbortSignal.any([signal, lost]),
            images: (of) => this.imagesOn(e, of),
          });
          if (lost.aborted && !signal.aborted) r = engineLost(r, e.cfg.name, lost.reason);
          if (r.status === "failed" && r.failure?.class === "infra") {
            const s = failedOn.get(scenario) ?? new Set<string>();
            s.add(e.cfg.name);
            failedOn.set(scenario, s);
          }
          return r;
        } finally {
          this.release(e, r);
        }
      },
    };
  }

  // ------------------------------------------------------------------ images

  private imagesOn(e: PoolEngine, of: EpisodeImages): EpisodeImages {
    if (e.primary) return of;
    return {
      sidecar: async (signal) => {
        const img = await of.sidecar(signal);
        await this.ensureImagesOn(e, [img, ...this.wanted], signal ? { signal } : {});
        return img;
      },
      scenario: async (s, signal) => {
        const img = await of.scenario(s, signal);
        await this.ensureImagesOn(e, [img, ...this.wanted], signal ? { signal } : {});
        return img;
      },
    };
  }

  /**
   * Place an evaluation's images on every other engine that takes episodes, in the background (one
   * copy per engine for all of them: shared layers travel once); episodes there wait for theirs.
   */
  prefetch(images: readonly BuiltImage[], onProgress?: (p: BenchProgress) => void): void {
    this.wanted = images;
    for (const e of this.engines) {
      e.images.wanted = images.length;
      if (e.primary) {
        for (const i of images) e.images.present.add(imageKey(i));
        continue;
      }
      if (e.state !== "ready" || e.cfg.slots === 0) continue;
      this.refreshImages(e, onProgress);
    }
    this.update();
  }

  /**
   * Bring the wanted images to `e`, which takes episodes again once they are all there. A failed
   * copy (a full disk, the engine away) is counted and tried again in 30 s while it is ready.
   */
  private refreshImages(e: PoolEngine, onProgress?: (p: BenchProgress) => void): void {
    clearTimeout(e.imagesRetry);
    e.imagesRetry = undefined;
    const wanted = this.wanted;
    if (e.primary || !wanted.length || this.closed) {
      e.imagesReady = true;
      return;
    }
    e.imagesReady = wanted.every((i) => e.images.present.has(imageKey(i)) && e.imageJobs.has(imageKey(i)));
    this.ensureImagesOn(e, wanted, onProgress ? { onProgress } : {}).then(
      () => {
        if (this.wanted !== wanted) return;
        e.imagesReady = true;
        this.update();
        this.pump();
      },
      (err) => {
        const ve = toValidatorError(err, "image_copy_failed");
        e.failures[ve.code] = (e.failures[ve.code] ?? 0) + 1;
        e.lastError = { code: ve.code, message: ve.message, at: Date.now() };
        e.log.warn({ code: ve.code, err: ve.message }, "engine.images_failed");
        this.update();
        if (this.closed || this.wanted !== wanted) return;
        e.imagesRetry = setTimeout(() => {
          if (e.state === "ready") this.refreshImages(e, onProgress);
        }, 30_000);
        e.imagesRetry.unref();
      },
    );
  }

  private async ensureImagesOn(
    e: PoolEngine,
    images: readonly BuiltImage[],
    opts: { signal?: AbortSignal; onProgress?: (p: BenchProgress) => void },
  ): Promise<void> {
    const waits: Array<Promise<void>> = [];
    const todo: BuiltImage[] = [];
    for (const img of images) {
      const job = e.imageJobs.get(imageKey(img));
      if (job) waits.push(job);
      else if (!todo.some((t) => imageKey(t) === imageKey(img))) todo.push(img);
    }
    if (todo.length) {
      const job = e.copyChain.then(() => this.placeImages(e, todo, opts.onProgress));
      e.copyChain = job.catch(() => undefined);
      for (const img of todo) e.imageJobs.set(imageKey(img), job);
      job.catch(() => {
        for (const img of todo) if (e.imageJobs.get(imageKey(img)) === job) e.imageJobs.delete(imageKey(img));
      });
      waits.push(job);
    }
    await untilAborted(Promise.all(waits), opts.signal);
  }

  private async placeImages(
    e: PoolEngine,
    images: readonly BuiltImage[],
    onProgress?: (p: BenchProgress) => void,
  ): Promise<void> {
    const docker = e.conn!.docker;
    const source = this.engines[0]!.conn!.docker;
    const progress = (
      img: BuiltImage | string,
      phase: BenchProgress["phase"],
      extra: Partial<BenchProgress> = {},
    ) => {
      const p: BenchProgress = {
        engine: e.cfg.name,
        image: typeof img === "string" ? img : shortImage(img.ref),
        ref: typeof img === "string" ? img : img.ref,
        phase,
        ...extra,
      };
      onProgress?.(p);
      this.opts.observer?.benchProgress?.(p);
    };
    const missing: BuiltImage[] = [];
    for (const img of images) {
      if ((await imageIdOf(docker, img.ref)) === img.id) e.images.present.add(imageKey(img));
      else missing.push(img);
    }
    // A registry's image: the engine pulls exactly that digest itself (no transit through this host).
    const toCopy: BuiltImage[] = [];
    for (const img of missing) {
      if (!img.repoDigest) {
        toCopy.push(img);
        continue;
      }
      try {
        progress(img, "pulling");
        await pullDigestAs(docker, img.repoDigest, img.ref, { signal: this.closing.signal });
        if ((await imageIdOf(docker, img.ref)) === img.id) {
          e.images.pulls++;
          e.images.present.add(imageKey(img));
          progress(img, "ready");
          continue;
        }
      } catch (err) {
        e.log.warn({ image: img.repoDigest, err: (err as Error).message }, "engine.pull_failed_copying");
      }
      toCopy.push(img);
    }
    if (toCopy.length) {
      const t0 = performance.now();
      const what = toCopy.length === 1 ? shortImage(toCopy[0]!.ref) : `${toCopy.length} images`;
      progress(what, "copying", { bytes: 0 });
      e.log.info({ images: toCopy.map((i) => i.ref) }, "engine.images_copying");
      const r = await copyImages(
        source,
        docker,
        toCopy.map((i) => i.ref),
        { signal: this.closing.signal, onProgress: (c) => progress(what, "copying", { bytes: c.bytes }) },
      );
      for (const img of toCopy) {
        const id = await imageIdOf(docker, img.ref);
        if (id !== img.id)
          throw new InfraError(
            "image_copy_failed",
            `engine ${e.cfg.name}: ${img.ref} arrived as ${id ?? "nothing"}, not ${img.id}`,
          );
        e.images.present.add(imageKey(img));
      }
      e.images.copies += toCopy.length;
      e.images.copiedBytes += r.bytes;
      const ms = performance.now() - t0;
      progress(what, "ready", { bytes: r.bytes, ms });
      e.log.info({ images: toCopy.length, bytes: r.bytes, ms: Math.round(ms) }, "engine.images_copied");
    }
    this.update();
  }

  // ------------------------------------------------------------------ views and shutdown

  views(): EngineView[] {
    return this.engines.map((e) => ({
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
      lastError: e.lastError,
      since: e.since,
    }));
  }

  /** The Docker client of engine `name` (tests, the CLI). */
  docker(name: string): Docker | undefined {
    return this.engines.find((e) => e.cfg.name === name)?.conn?.docker;
  }

  /** The sandbox of engine `name`, once it was checked. */
  sandbox(name: string): Sandbox | undefined {
    return this.engines.find((e) => e.cfg.name === name)?.sandbox;
  }

  private update(): void {
    this.opts.observer?.setEngines?.(this.views());
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.closing.abort(new InfraError("engine_pool_closed", "the engine pool is closing"));
    for (const t of this.timers) clearInterval(t);
    const err = new InfraError("engine_pool_closed", "the engine pool is closing");
    for (const w of this.waiters.splice(0)) w.reject(err);
    await Promise.all(
      this.engines.map(async (e) => {
        clearTimeout(e.probeTimer);
        clearTimeout(e.imagesRetry);
        if (!e.sandbox) return;
        if (e.state !== "ready") {
          // An engine that is down gets one short chance: if it answers again, what this process
          // left there goes now; a silent one must not hold the shutdown (the next start sweeps it).
          e.sandbox.engineWatch.stop();
          e.sandbox.reaper.stop();
          e.conn?.restore();
          type WithSignal = (o: { abortSignal: AbortSignal }) => Promise<unknown>;
          const ping = e.conn?.docker.ping as unknown as WithSignal | undefined;
          const answers = await ping
            ?.call(e.conn?.docker, { abortSignal: AbortSignal.timeout(5_000) })
            .then(() => true)
            .catch(() => false);
          if (answers)
            await withTimeout(
              e.sandbox.close(),
              30_000,
              () => e.conn?.sever("closing"),
              "the last sweep",
            ).catch((x) => e.log.warn({ err: (x as Error).message }, "engine.close_failed"));
          return;
        }
        await e.sandbox
          .close()
          .catch((x) => e.log.warn({ err: (x as Error).message }, "engine.close_failed"));
      }),
    );
  }
}

function shortImage(ref: string): string {
  return ref.replace(/^.*\//, "").replace(/:.*$/, "");
}

/** An attempt cut short by its engine's loss says nothing of the policy: infra, re-run elsewhere. */
export function engineLost(r: EpisodeResult, engine: string, reason: unknown): EpisodeResult {
  const why = reason instanceof Error ? reason.message : `engine ${engine} went away`;
  return {
    ...r,
    status: "failed",
    quality: 0,
    failure: {
      class: "infra",
      code: "engine_lost",
      message: `${why} during the episode; it runs again (on another engine while one has a free slot)`,
    },
    notes: [...r.notes, "engine_lost"],
  };
}

/** Without a pool (tests that build an environment by hand): every episode on the one sandbox. */
export function singleEngine(sandbox: Sandbox): EvaluationPlacement {
  return {
    run: (_scenario, signal, fn) => fn({ engine: "local", sandbox, signal, images: (of) => of }),
  };
}
