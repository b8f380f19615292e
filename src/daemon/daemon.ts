/**
 * `trajrl-validator run`: one object that opens everything the validator needs and runs its loops.
 * Two modes, as upstream's validator (EVAL_ENABLED, default off):
 *
 * weight-only (default): no Docker, no provider key, no pack fetch, no evaluation environment.
 *   winner    every 60 s (primed once before the loops start): GET winner/current → winner cache
 *   weights   every WEIGHTS_INTERVAL_S: snapshot → winner, owner's row or burn → set_weights
 *   heartbeat at start and every HEARTBEAT_INTERVAL_S: last_set_weights_at only
 * EVAL_ENABLED=1, in addition:
 *   eval      every EVAL_POLL_INTERVAL_S: signed GET epoch/current → evaluate → verdict → outbox
 *   outbox    every few seconds (and at once after a verdict): POST due verdicts, back-off on failure
 *   the heartbeat adds the evaluator's telemetry and replays pending log uploads
 *
 * stop(): stop taking work, abort the running evaluation with SHUTDOWN (it stays resumable and the
 * next start resumes it), let the outbox attempt in flight finish, close chain, environment, db.
 */
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { type ChainClient, type Hotkey, loadHotkey, PolkadotChainClient } from "../chain/index.js";
import { type Config, lockedEnvWarning } from "../config.js";
import { InfraError, InputError, toValidatorError, ValidatorError } from "../errors.js";
import { SHUTDOWN } from "../evaluation/index.js";
import type { Logger } from "../log.js";
import { PackCache, PlatformClient } from "../platform/index.js";
import { LiveStatus, type Upstream } from "../status/index.js";
import {
  type Db,
  EvaluationRepo,
  LogUploadRepo,
  openDb,
  PlatformMarksRepo,
  ScoredEpochRepo,
  VerdictOutboxRepo,
  WeightsRepo,
  WinnerCacheRepo,
} from "../store/index.js";
import { UPSTREAM_RELEASE } from "../subnet.js";
import { VERSION } from "../version.js";
import { ALARM, EpochEvaluator, type FinishedEvaluation } from "./eval-loop.js";
import { HealthIssue } from "./heartbeat.js";
import type { LogTap } from "./log-archive.js";
import { archiveEvaluation, LogUploader } from "./log-uploads.js";
import { Loop } from "./loop.js";
import { type EvaluationEnvironment, loadPipeline, type Pipeline } from "./pipeline.js";
import { deliverTick, heartbeatTick } from "./platform-ticks.js";
import { maxScoreOf, specFor } from "./specs.js";
import { assertSubnetRules, benchFor } from "./subnet-rules.js";
import { type DaemonTiming, DEFAULT_TIMING, UPSTREAM_OWNER_UID, waitFor } from "./timing.js";
import { evidenceEntry, recordVerdictEvidence } from "./verdict-evidence.js";
import { WeightSetter } from "./weights-loop.js";
import { WinnerRefresher } from "./winner-loop.js";

export interface DaemonOptions {
  config: Config;
  log: Logger;
  live?: LiveStatus;
  /** Copies of the daemon's log lines for the per-evaluation archive (see LogTap). */
  logTap?: LogTap;
  /** Run this scenario subset instead of the epoch's spec (tests, demos; never on the real subnet). */
  scenarios?: string[];
  timing?: Partial<DaemonTiming>;
  /** Wall clock, ms (signatures, outbox, caches). */
  now?: () => number;
  // Seams. Defaults: the real pipeline, the btcli hotkey, @polkadot/api, a database at config.dbPath.
  pipeline?: Pipeline;
  hotkey?: Hotkey;
  chain?: ChainClient;
  db?: Db;
}

type State = "new" | "starting" | "running" | "stopping" | "stopped";

export class Daemon {
  readonly live: LiveStatus;
  private readonly config: Config;
  private readonly log: Logger;
  private readonly timing: DaemonTiming;
  private readonly now: () => number;
  private state: State = "new";
  private stopPromise: Promise<void> | undefined;
  private resolveDone!: () => void;
  /** Resolves once the daemon has stopped (after stop(), or a failed start). */
  readonly done: Promise<void>;

  private hotkey: Hotkey | undefined;
  private db: Db | undefined;
  private ownDb = false;
  private chain: ChainClient | undefined;
  private env: EvaluationEnvironment | undefined;
  private platform: PlatformClient | undefined;
  private uploader: LogUploader | undefined;
  private loops: Loop[] = [];
  private outboxLoop: Loop | undefined;
  private evalLoop: Loop | undefined;
  private readonly background = new Set<Promise<unknown>>();
  /** The heartbeat's health_issue (in memory, as upstream's `_health_issue`). */
  readonly health = new HealthIssue();
  private readonly backgroundCtrl = new AbortController();

  constructor(private readonly opts: DaemonOptions) {
    this.config = opts.config;
    this.log = opts.log.child({ component: "daemon" });
    this.live = opts.live ?? new LiveStatus();
    this.timing = { ...DEFAULT_TIMING, ...opts.timing };
    this.now = opts.now ?? Date.now;
    this.done = new Promise((resolve) => {
      this.resolveDone = resolve;
    });
  }

  get hotkeySs58(): string | undefined {
    return this.hotkey?.ss58;
  }

  get database(): Db | undefined {
    return this.db;
  }

  /**
   * Open everything and start the loops. Operator mistakes (no wallet, an encrypted one, a chain of
   * the wrong network, no Docker) throw here with one clear line; what was opened is closed again.
   */
  async start(): Promise<void> {
    if (this.state !== "new")
      throw new InfraError("daemon_state", `cannot start a daemon that is ${this.state}`);
    this.state = "starting";
    const c = this.config;
    try {
      assertSubnetRules(c);
      logConfigWarnings(c, this.log);
      this.hotkey =
        this.opts.hotkey ??
        (await loadHotkey({
          walletPath: c.chain.walletPath,
          walletName: c.chain.walletName,
          walletHotkey: c.chain.walletHotkey,
        }));
      const hotkey = this.hotkey;
      this.log.info(
        { version: VERSION, hotkey: hotkey.ss58, network: c.chain.network, netuid: c.chain.netuid },
        "daemon.starting",
      );
      this.ownDb = this.opts.db === undefined;
      this.db = this.opts.db ?? openDb(c.dbPath, { log: this.opts.log });
      const db = this.db;

      this.chain =
        this.opts.chain ??
        new PolkadotChainClient({
          endpoint: c.chain.endpoint,
          network: c.chain.network,
          hotkey,
          log: this.opts.log,
        });
      const chainUp = await this.connectChain(this.chain);

      // Weight-only (upstream's default) never opens the evaluation environment: no Docker, no meter.
      const evaluating = c.evaluation.enabled;
      const pipeline = evaluating ? (this.opts.pipeline ?? (await loadPipeline())) : undefined;
      if (pipeline)
        this.env = await pipeline.openEnvironment(c, {
          log: this.opts.log,
          live: this.live,
          db,
          bench: benchFor(c),
        });

      this.platform = new PlatformClient({
        baseUrl: c.platform.baseUrl,
        signer: hotkey,
        log: this.opts.log,
        version: UPSTREAM_RELEASE,
        now: this.now,
        onReachability: reachabilityOf(this.live, "platform"),
      });
      const platform = this.platform;
      const outbox = new VerdictOutboxRepo(db);
      const winnerCache = new WinnerCacheRepo(db);
      const marks = new PlatformMarksRepo(db);
      if (evaluating)
        this.uploader = new LogUploader({
          repo: new LogUploadRepo(db),
          client: platform,
          dir: join(c.dataDir, "log-archives"),
          log: this.opts.log,
          now: this.now,
        });

      const winner = this.winnerRefresher(platform, winnerCache, outbox, hotkey.ss58);
      const up = UPSTREAM_OWNER_UID;
      const weights = new WeightSetter({
        chain: this.chain,
        netuid: c.chain.netuid,
        hotkey: hotkey.ss58,
        weights: new WeightsRepo(db),
        winnerCache,
        marks,
        live: this.live,
        log: this.opts.log,
        now: this.now,
        winnerCacheTtlMs: c.platform.winnerCacheTtlMs,
        ...(c.chain.weightsVersionKey !== undefined ? { versionKeyOverride: c.chain.weightsVersionKey } : {}),
        ...(c.chain.network === up.network && c.chain.netuid === up.netuid
          ? { upstreamOwnerUid: up.uid }
          : {}),
        backoff: { intervalMs: c.chain.weightsIntervalMs, ...this.timing.weightsBackoff },
        setWeightsTimeoutMs: this.timing.setWeightsTimeoutMs,
      });
      if (chainUp) weights.markConnected();

      const winnerTick = async (s: AbortSignal): Promise<undefined> => {
        try {
          return await winner.tick(s);
        } catch (err) {
          if (!s.aborted) {
            const message = `winner/current: ${toValidatorError(err).message}`;
            this.live.raise(ALARM.platformUnreachable, message, "warn", this.live.outageSince("platform"));
          }
          throw err;
        }
      };
      // Prime the winner cache before the loops start (as upstream's run()): a fresh install must
      // not spend its first weights on an empty cache. A failure or a slow platform does not block.
      const primeCtrl = new AbortController();
      let primed: "ok" | "failed" | "timeout" = "timeout";
      const priming = winnerTick(primeCtrl.signal).then(
        () => {
          primed = "ok";
        },
        (err: unknown) => {
          if (primeCtrl.signal.aborted) return;
          primed = "failed";
          this.log.warn({ err: toValidatorError(err).message }, "daemon.winner_prime_failed");
        },
      );
      await waitFor(priming, this.timing.winnerPrimeMs, this.backgroundCtrl.signal);
      primeCtrl.abort(SHUTDOWN);

      const winnerLoop = this.loop({
        name: "winner",
        intervalMs: this.timing.winnerPollMs,
        immediate: false,
        tick: winnerTick,
      });
      const weightsLoop = this.loop({
        name: "weights",
        intervalMs: c.chain.weightsIntervalMs,
        tick: (s) => weights.tick(s),
        backoffMs: (n, err) => weights.backoffAfterThrow(n, err),
      });
      const heartbeatLoop = this.loop({
        name: "heartbeat",
        intervalMs: c.platform.heartbeatIntervalMs,
        tick: (s) =>
          heartbeatTick(s, {
            platform,
            marks,
            config: c,
            health: this.health,
            uploader: this.uploader,
            now: this.now,
          }),
      });
      this.loops = [winnerLoop, weightsLoop, heartbeatLoop];

      if (pipeline && this.env) {
        const evaluator = new EpochEvaluator({
          config: c,
          log: this.opts.log,
          live: this.live,
          now: this.now,
          hotkey: hotkey.ss58,
          platform,
          pipeline,
          env: this.env,
          evaluations: new EvaluationRepo(db),
          outbox,
          scored: new ScoredEpochRepo(db),
          marks,
          packCache: PackCache.forDataDir(c.dataDir),
          ...(this.opts.scenarios ? { scenarios: this.opts.scenarios } : {}),
          specFor: (n) => specFor(c, this.log, n),
          onVerdictQueued: () => this.outboxLoop?.wake(),
          health: this.health,
          onEvaluationFinished: (f) => this.archiveInBackground(f),
          ...(this.opts.logTap ? { logTap: this.opts.logTap } : {}),
          packFetchAttempts: this.timing.packFetchAttempts,
          packFetchRetryMs: this.timing.packFetchRetryMs,
        });
        this.evalLoop = this.loop({
          name: "eval",
          intervalMs: c.platform.pollIntervalMs,
          tick: (s) => evaluator.tick(s),
        });
        this.outboxLoop = this.loop({
          name: "outbox",
          intervalMs: this.timing.outboxPollMs,
          tick: (s) =>
            deliverTick(s, {
              outbox,
              platform,
              marks,
              log: this.opts.log,
              live: this.live,
              health: this.health,
              timing: this.timing,
              now: this.now,
            }),
        });
        this.loops.push(this.evalLoop, this.outboxLoop);
      }

      this.state = "running";
      if (this.uploader) this.track(this.uploader.replay(this.backgroundCtrl.signal));
      for (const l of this.loops) l.start();
      this.log.info(
        {
          hotkey: hotkey.ss58,
          mode: evaluating ? "eval" : "weight-only",
          platform: c.platform.baseUrl,
          chain: chainUp ? "connected" : "retrying",
          winnerPrimed: primed,
          loops: this.loops.map((l) => l.name),
          weightsMs: c.chain.weightsIntervalMs,
        },
        "daemon.started",
      );
    } catch (err) {
      this.state = "stopping";
      await this.close().catch(() => {});
      this.state = "stopped";
      this.resolveDone();
      throw err;
    }
  }

  /** Graceful stop; idempotent. Resolves when everything is closed. */
  stop(): Promise<void> {
    if (this.stopPromise) return this.stopPromise;
    if (this.state === "new" || this.state === "stopped") {
      this.state = "stopped";
      this.resolveDone();
      this.stopPromise = Promise.resolve();
      return this.stopPromise;
    }
    this.stopPromise = this.shutdown();
    return this.stopPromise;
  }

  /**
   * Connect to the chain, its losses and returns feeding health's outage clock. False when the
   * endpoint is down now (the weight loop keeps trying); a chain of the wrong network or runtime is
   * the operator's to fix and throws.
   */
  private async connectChain(chain: ChainClient): Promise<boolean> {
    chain.watchReachability?.(reachabilityOf(this.live, "chain"));
    try {
      await chain.connect();
      return true;
    } catch (err) {
      const e = toValidatorError(err);
      if (e instanceof InputError || !e.retryable) throw e;
      this.log.error({ code: e.code, err: e.message }, "daemon.chain_unavailable_at_start");
      const message = `chain: ${e.code}: ${e.message}`;
      this.live.raise(ALARM.chainUnreachable, message, "error", this.live.outageSince("chain"));
      return false;
    }
  }

  private async shutdown(): Promise<void> {
    // A start still opening things finishes first (its failure path closes on its own).
    while (this.state === "starting") await sleep(20);
    if (this.state === "stopped") return;
    this.state = "stopping";
    const t0 = performance.now();
    this.log.info("daemon.stopping");
    const graceOf = (l: Loop) =>
      l === this.evalLoop
        ? this.timing.evaluationGraceMs
        : l === this.outboxLoop
          ? this.timing.outboxGraceMs
          : 15_000;
    // Every loop stops taking work at once; the evaluation aborts with SHUTDOWN (resumable), the
    // outbox finishes the POST it is making, the weight loop's transaction is left to the chain.
    await Promise.all(this.loops.map((l) => l.stop(SHUTDOWN, graceOf(l))));
    this.backgroundCtrl.abort(SHUTDOWN);
    await this.settleBackground(10_000);
    await this.close();
    this.state = "stopped";
    this.log.info({ ms: Math.round(performance.now() - t0) }, "daemon.stopped");
    this.resolveDone();
  }

  private async close(): Promise<void> {
    const steps: Array<[string, (() => Promise<void>) | undefined]> = [
      ["environment", this.env ? () => this.env!.close() : undefined],
      ["chain", this.chain ? () => this.chain!.disconnect() : undefined],
    ];
    for (const [what, step] of steps) {
      if (!step) continue;
      try {
        await step();
      } catch (err) {
        this.log.warn({ what, err: (err as Error).message }, "daemon.close_failed");
      }
    }
    if (this.ownDb && this.db?.open) this.db.close();
  }

  /** The winner loop's worker: the seat, the consensus cross-checks, and whether our vote counted. */
  private winnerRefresher(
    platform: PlatformClient,
    cache: WinnerCacheRepo,
    outbox: VerdictOutboxRepo,
    hotkey: string,
  ): WinnerRefresher {
    const c = this.config;
    return new WinnerRefresher({
      platform,
      cache,
      live: this.live,
      log: this.opts.log,
      now: this.now,
      stakeWeighted: c.chain.stakeWeighted,
      maxScoreOf: (spec) => maxScoreOf(c, this.opts.scenarios, spec),
      ownVotes: { hotkey, outbox },
    });
  }

  private loop(spec: ConstructorParameters<typeof Loop>[0]): Loop {
    return new Loop(spec, this.live, this.opts.log);
  }

  /** The verdict's evidence, then its log archive (the evidence in it), recorded and uploaded; in the background. */
  private archiveInBackground(f: FinishedEvaluation): void {
    const uploader = this.uploader;
    if (!uploader || !this.db || !this.hotkey) return;
    const deps = { db: this.db, hotkey: this.hotkey, dataDir: this.config.dataDir, log: this.opts.log };
    const run = async () => {
      const evidence = await recordVerdictEvidence(deps, f);
      const entry = evidence ? await evidenceEntry(evidence, this.log) : undefined;
      await archiveEvaluation(uploader, f, this.config.dataDir, this.backgroundCtrl.signal, entry);
    };
    this.track(
      run().catch((err: unknown) =>
        this.log.warn({ epoch: f.plan.epochId, err: toValidatorError(err).message }, "logs.archive_failed"),
      ),
    );
  }

  private track(p: Promise<unknown>): void {
    const q = p.catch((err: unknown) => {
      if (!(err instanceof ValidatorError && err.code === "aborted"))
        this.log.warn({ err: (err as Error).message }, "daemon.background_failed");
    });
    this.background.add(q);
    void q.finally(() => this.background.delete(q));
  }

  private async settleBackground(ms: number): Promise<void> {
    if (this.background.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...this.background]),
      new Promise((resolve) => {
        timer = setTimeout(resolve, ms);
      }),
    ]);
    clearTimeout(timer);
  }
}

/** What the settings say that the operator should hear at start: locked variables set, likely typos. */
function logConfigWarnings(c: Config, log: Logger): void {
  const ignored = lockedEnvWarning(c);
  if (ignored) log.warn({ ignored: c.ignoredEnv, reason: ignored }, "config.locked_env_ignored");
  for (const warning of c.warnings) log.warn({ warning }, "config.warning");
}

/** A reachability callback (chain client, platform client) that keeps `upstream`'s outage in `live`. */
function reachabilityOf(live: LiveStatus, upstream: Upstream): (ok: boolean, reason: string) => void {
  return (ok, reason) => (ok ? live.upstreamReached(upstream) : live.upstreamFailed(upstream, reason));
}
