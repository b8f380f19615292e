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
import type { EpisodeResult } from "../episode/index.js";
import { InfraError, InputError, toValidatorError } from "../errors.js";
import type { Logger } from "../log.js";
import { type BuiltImage, connectEngine, type Docker, probeEngine, type Sandbox } from "../sandbox/index.js";
import { readDrained } from "./drain.js";
import {
  closeEngine,
  type EngineView,
  newPoolEngine,
  type PoolEngine,
  pingWithin,
  viewOf,
} from "./engine.js";
import { checkEngine } from "./engine-check.js";
import { type EvaluationPlacement, engineLost, unlessStuckAfterLoss } from "./episode-placement.js";
import { EngineImages } from "./images.js";
import type { PoolOptions } from "./options.js";
import { pickEngine, probeDelayMs, totalSlots } from "./placement.js";

interface Waiter {
  avoid: ReadonlySet<string>;
  resolve: (e: PoolEngine) => void;
  reject: (err: unknown) => void;
}

export class EnginePool {
  private readonly engines: PoolEngine[];
  private readonly waiters: Waiter[] = [];
  private readonly log: Logger;
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly closing = new AbortController();
  private relay: Promise<BuiltImage> | undefined;
  private readonly images: EngineImages;
  private noReadySince: number | undefined;
  private closed = false;

  private constructor(private readonly opts: PoolOptions) {
    this.log = opts.log;
    this.engines = opts.engines.map((cfg, k) => newPoolEngine(cfg, k === 0, opts.log));
    this.images = new EngineImages({
      source: () => this.engines[0]!.conn!.docker,
      signal: this.closing.signal,
      closed: () => this.closed,
      observer: opts.observer,
      changed: () => this.update(),
      ready: () => {
        this.update();
        this.pump();
      },
    });
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
  private check(e: PoolEngine): Promise<void> {
    return checkEngine(e, {
      opts: this.opts,
      relayImage: () => this.relayImage(),
      images: this.images,
      localDocker: this.engines.find((x) => !x.remote)?.conn?.docker ?? null,
      onLost: () =>
        this.markDown(
          e,
          "lost",
          new Error("its event stream ended (the engine stopped, restarted or was cut off)"),
        ),
    });
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
      this.images.refreshImages(e);
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
      const lostAfter = this.opts.lostAfterMs ?? 25_000;
      pingWithin(e.conn.docker, Math.max(2 * periodMs, 10_000))
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
        const failedHere = () =>
          failedOn.set(scenario, (failedOn.get(scenario) ?? new Set()).add(e.cfg.name));
        try {
          e.log.info({ scenario, ...(episode ? { episode } : {}), running: e.running }, "episode.placed");
          r = await unlessStuckAfterLoss(
            fn({
              engine: e.cfg.name,
              sandbox: e.sandbox!,
              signal: AbortSignal.any([signal, lost]),
              images: (of) => this.images.imagesOn(e, of),
            }),
            lost,
            this.opts.abandonAfterLossMs ?? 60_000,
            () => {
              e.log.error({ scenario, ...(episode ? { episode } : {}) }, "episode.abandoned");
              failedHere();
            },
          );
          if (lost.aborted && !signal.aborted) r = engineLost(r, e.cfg.name, lost.reason);
          if (r.status === "failed" && r.failure?.class === "infra") failedHere();
          return r;
        } finally {
          this.release(e, r);
        }
      },
    };
  }

  // ------------------------------------------------------------------ images, views and shutdown

  /**
   * Place an evaluation's images on every other engine that takes episodes, in the background (one
   * copy per engine for all of them: shared layers travel once); episodes there wait for theirs.
   */
  prefetch(images: readonly BuiltImage[], onProgress?: (p: BenchProgress) => void): void {
    this.images.prefetch(this.engines, images, onProgress);
  }

  views(): EngineView[] {
    return this.engines.map(viewOf);
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
    await Promise.all(this.engines.map(closeEngine));
  }
}
