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
 * Every row it keeps belongs to its network, the chain's genesis hash (network.ts). A start it
 * refuses throws; `run` holds it (hold.ts).
 *
 * stop(): stop taking work, abort the running evaluation with SHUTDOWN (it stays resumable and the
 * next start resumes it), let the outbox attempt in flight finish, close chain, environment, db.
 */
import { setTimeout as sleep } from "node:timers/promises";
import {
  type ChainClient,
  type ChainInfo,
  type Hotkey,
  loadHotkey,
  PolkadotChainClient,
} from "../chain/index.js";
import { type Config, lockedEnvWarning } from "../config.js";
import { InfraError, InputError, toValidatorError, ValidatorError } from "../errors.js";
import { SHUTDOWN } from "../evaluation/index.js";
import type { Logger } from "../log.js";
import { PackCache, PlatformClient } from "../platform/index.js";
import { LiveStatus, type Upstream } from "../status/index.js";
import { type Db, EvaluationRepo, type NetworkId, openDb, ScoredEpochRepo } from "../store/index.js";
import { UPSTREAM_RELEASE } from "../subnet.js";
import { VERSION } from "../version.js";
import { ALARM, EpochEvaluator, type FinishedEvaluation } from "./eval-loop.js";
import { HealthIssue } from "./heartbeat.js";
import type { LogTap } from "./log-archive.js";
import { archiveEvaluation, type LogUploader } from "./log-uploads.js";
import { Loop } from "./loop.js";
import { openNetwork } from "./network.js";
import { loadPipeline, type OpenedEnvironment, type Pipeline } from "./pipeline.js";
import { deliverTick, heartbeatTick } from "./platform-ticks.js";
import { specFor } from "./specs.js";
import { assertSubnetRules, benchFor } from "./subnet-rules.js";
import { type DaemonTiming, DEFAULT_TIMING, waitFor } from "./timing.js";
import { evidenceEntry, recordVerdictEvidence } from "./verdict-evidence.js";
import { buildWorkers, type Parts } from "./workers.js";

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
  private env: OpenedEnvironment | undefined;
  private platform: PlatformClient | undefined;
  private pipeline: Pipeline | undefined;
  private networkId: NetworkId | undefined;
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

  /** The network this daemon's rows belong to (its chain's genesis hash), once start() has found it. */
  get network(): NetworkId | undefined {
    return this.networkId;
  }

  /**
   * Open everything and start the loops, as a sequence of named steps. Operator mistakes (no wallet,
   * an encrypted one, a chain of the wrong network, no Docker) throw here with one clear line; what
   * was opened is closed again. `run` holds such a refusal instead of exiting (hold.ts).
   */
  async start(): Promise<void> {
    if (this.state !== "new")
      throw new InfraError("daemon_state", `cannot start a daemon that is ${this.state}`);
    this.state = "starting";
    try {
      this.checkSettings();
      const hotkey = await this.openHotkey();
      const db = this.openDatabase();
      const chainInfo = await this.connectChain(hotkey);
      const network = this.claimNetwork(db, chainInfo);
      await this.openEvaluation(db, network);
      const platform = this.openPlatform(hotkey);
      const parts = this.buildParts({ db, network, hotkey, platform });
      if (chainInfo) parts.weights.markConnected();
      const primed = await this.primeWinner(parts.winnerTick);
      this.loops = this.platformLoops(parts);
      this.addEvalLoops(db, network, hotkey, parts);
      this.state = "running";
      if (this.uploader) this.track(this.uploader.replay(this.backgroundCtrl.signal));
      for (const l of this.loops) l.start();
      this.log.info(
        {
          hotkey: hotkey.ss58,
          mode: this.config.evaluation.enabled ? "eval" : "weight-only",
          platform: this.config.platform.baseUrl,
          chain: chainInfo ? "connected" : "retrying",
          genesis: network,
          winnerPrimed: primed,
          loops: this.loops.map((l) => l.name),
          weightsMs: this.config.chain.weightsIntervalMs,
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

  /** The subnet's rules a vote is made under (refused on a real network), and locked variables that were set. */
  private checkSettings(): void {
    const c = this.config;
    assertSubnetRules(c);
    logConfigWarnings(c, this.log);
  }

  private async openHotkey(): Promise<Hotkey> {
    const c = this.config;
    this.hotkey =
      this.opts.hotkey ??
      (await loadHotkey({
        walletPath: c.chain.walletPath,
        walletName: c.chain.walletName,
        walletHotkey: c.chain.walletHotkey,
      }));
    this.log.info(
      { version: VERSION, hotkey: this.hotkey.ss58, network: c.chain.network, netuid: c.chain.netuid },
      "daemon.starting",
    );
    return this.hotkey;
  }

  private openDatabase(): Db {
    this.ownDb = this.opts.db === undefined;
    this.db = this.opts.db ?? openDb(this.config.dbPath, { log: this.opts.log });
    return this.db;
  }

  /**
   * The chain client, connected. A chain of the wrong network or runtime is the operator's to fix:
   * refuse to start. An endpoint that is down now may be up in a minute: undefined, and the weight
   * loop keeps connecting.
   */
  private async connectChain(hotkey: Hotkey): Promise<ChainInfo | undefined> {
    const c = this.config;
    this.chain =
      this.opts.chain ??
      new PolkadotChainClient({
        endpoint: c.chain.endpoint,
        network: c.chain.network,
        hotkey,
        log: this.opts.log,
      });
    this.chain.watchReachability?.(reachabilityOf(this.live, "chain"));
    try {
      return await this.chain.connect();
    } catch (err) {
      const e = toValidatorError(err);
      if (e instanceof InputError || !e.retryable) throw e;
      this.log.error({ code: e.code, err: e.message }, "daemon.chain_unavailable_at_start");
      const message = `chain: ${e.code}: ${e.message}`;
      this.live.raise(ALARM.chainUnreachable, message, "error", this.live.outageSince("chain"));
      return undefined;
    }
  }

  /** Which network's rows this daemon reads and writes (network.ts); adopts the rows from before networks were recorded. */
  private claimNetwork(db: Db, chainInfo: ChainInfo | undefined): NetworkId {
    this.networkId = openNetwork({
      db,
      config: this.config,
      genesisHash: chainInfo?.genesisHash,
      log: this.log,
      now: this.now(),
    });
    return this.networkId;
  }

  /** EVAL_ENABLED only: the evaluation environment. Weight-only never opens it: no Docker, no meter. */
  private async openEvaluation(db: Db, network: NetworkId): Promise<void> {
    const c = this.config;
    if (!c.evaluation.enabled) return;
    this.pipeline = this.opts.pipeline ?? (await loadPipeline());
    this.env = await this.pipeline.openEnvironment(c, {
      log: this.opts.log,
      live: this.live,
      db,
      bench: benchFor(c),
      network,
    });
  }

  private openPlatform(hotkey: Hotkey): PlatformClient {
    this.platform = new PlatformClient({
      baseUrl: this.config.platform.baseUrl,
      signer: hotkey,
      log: this.opts.log,
      version: UPSTREAM_RELEASE,
      now: this.now,
      onReachability: reachabilityOf(this.live, "platform"),
    });
    return this.platform;
  }

  /** The repositories of this network and the winner and weights workers over them (workers.ts). */
  private buildParts(a: { db: Db; network: NetworkId; hotkey: Hotkey; platform: PlatformClient }): Parts {
    const { parts, uploader } = buildWorkers({
      ...a,
      config: this.config,
      chain: this.chain!,
      live: this.live,
      log: this.opts.log,
      now: this.now,
      timing: this.timing,
      scenarios: this.opts.scenarios,
    });
    this.uploader = uploader;
    return parts;
  }

  /**
   * Prime the winner cache before the loops start (as upstream's run()): a fresh install must not
   * spend its first weights on an empty cache. A failure or a slow platform does not block.
   */
  private async primeWinner(winnerTick: Parts["winnerTick"]): Promise<"ok" | "failed" | "timeout"> {
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
    return primed;
  }

  /** The loops of both modes: winner, weights, heartbeat. */
  private platformLoops(p: Parts): Loop[] {
    const c = this.config;
    return [
      this.loop({
        name: "winner",
        intervalMs: this.timing.winnerPollMs,
        immediate: false,
        tick: p.winnerTick,
      }),
      this.loop({
        name: "weights",
        intervalMs: c.chain.weightsIntervalMs,
        tick: (s) => p.weights.tick(s),
        backoffMs: (n, err) => p.weights.backoffAfterThrow(n, err),
      }),
      this.loop({
        name: "heartbeat",
        intervalMs: c.platform.heartbeatIntervalMs,
        tick: (s) =>
          heartbeatTick(s, {
            platform: p.platform,
            marks: p.marks,
            config: c,
            health: this.health,
            uploader: this.uploader,
            now: this.now,
          }),
      }),
    ];
  }

  /** EVAL_ENABLED only: the eval loop (epoch → evaluation → verdict) and the outbox that posts verdicts. */
  private addEvalLoops(db: Db, network: NetworkId, hotkey: Hotkey, p: Parts): void {
    const c = this.config;
    if (!this.pipeline || !this.env) return;
    const evaluator = new EpochEvaluator({
      config: c,
      log: this.opts.log,
      live: this.live,
      now: this.now,
      hotkey: hotkey.ss58,
      platform: p.platform,
      pipeline: this.pipeline,
      env: this.env,
      evaluations: new EvaluationRepo(db, network),
      outbox: p.outbox,
      scored: new ScoredEpochRepo(db, network),
      marks: p.marks,
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
    const deliver = { outbox: p.outbox, platform: p.platform, marks: p.marks, log: this.opts.log };
    this.outboxLoop = this.loop({
      name: "outbox",
      intervalMs: this.timing.outboxPollMs,
      tick: (s) =>
        deliverTick(s, {
          ...deliver,
          live: this.live,
          health: this.health,
          timing: this.timing,
          now: this.now,
        }),
    });
    this.loops.push(this.evalLoop, this.outboxLoop);
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
