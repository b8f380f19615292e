/**
 * What the daemon's loops share, built once at start over one network's rows: the outbox, the
 * marks, the winner refresher and the weight setter, and the log uploader when it evaluates.
 */
import { join } from "node:path";
import type { ChainClient, Hotkey } from "../chain/index.js";
import type { Config } from "../config.js";
import { toValidatorError } from "../errors.js";
import type { Logger } from "../log.js";
import type { PlatformClient } from "../platform/index.js";
import type { LiveStatus } from "../status/index.js";
import {
  type Db,
  LogUploadRepo,
  type NetworkId,
  PlatformMarksRepo,
  VerdictOutboxRepo,
  WeightsRepo,
  WinnerCacheRepo,
} from "../store/index.js";
import { ALARM } from "./eval-loop.js";
import { LogUploader } from "./log-uploads.js";
import { maxScoreOf } from "./specs.js";
import { type DaemonTiming, UPSTREAM_OWNER_UID } from "./timing.js";
import { WeightSetter } from "./weights-loop.js";
import { WinnerRefresher } from "./winner-loop.js";

/** What start() builds once and the loops share. */
export interface Parts {
  platform: PlatformClient;
  outbox: VerdictOutboxRepo;
  marks: PlatformMarksRepo;
  weights: WeightSetter;
  winnerTick: (s: AbortSignal) => Promise<undefined>;
}

export interface WorkerDeps {
  db: Db;
  network: NetworkId;
  hotkey: Hotkey;
  platform: PlatformClient;
  chain: ChainClient;
  config: Config;
  live: LiveStatus;
  log: Logger;
  now: () => number;
  timing: DaemonTiming;
  scenarios: string[] | undefined;
}

export function buildWorkers(d: WorkerDeps): { parts: Parts; uploader: LogUploader | undefined } {
  const c = d.config;
  const { db, network } = d;
  const winnerCache = new WinnerCacheRepo(db, network);
  const marks = new PlatformMarksRepo(db, network);
  const uploader = c.evaluation.enabled
    ? new LogUploader({
        repo: new LogUploadRepo(db, network),
        client: d.platform,
        dir: join(c.dataDir, "log-archives"),
        log: d.log,
        now: d.now,
      })
    : undefined;
  const outbox = new VerdictOutboxRepo(db, network);
  const winner = new WinnerRefresher({
    platform: d.platform,
    cache: winnerCache,
    live: d.live,
    log: d.log,
    now: d.now,
    stakeWeighted: c.chain.stakeWeighted,
    maxScoreOf: (spec) => maxScoreOf(c, d.scenarios, spec),
    ownVotes: { hotkey: d.hotkey.ss58, outbox },
  });
  const up = UPSTREAM_OWNER_UID;
  const weights = new WeightSetter({
    chain: d.chain,
    netuid: c.chain.netuid,
    hotkey: d.hotkey.ss58,
    weights: new WeightsRepo(db, network),
    winnerCache,
    marks,
    live: d.live,
    log: d.log,
    now: d.now,
    winnerCacheTtlMs: c.platform.winnerCacheTtlMs,
    ...(c.chain.weightsVersionKey !== undefined ? { versionKeyOverride: c.chain.weightsVersionKey } : {}),
    ...(c.chain.network === up.network && c.chain.netuid === up.netuid ? { upstreamOwnerUid: up.uid } : {}),
    backoff: { intervalMs: c.chain.weightsIntervalMs, ...d.timing.weightsBackoff },
    setWeightsTimeoutMs: d.timing.setWeightsTimeoutMs,
  });
  const winnerTick = async (s: AbortSignal): Promise<undefined> => {
    try {
      return await winner.tick(s);
    } catch (err) {
      if (!s.aborted) {
        const message = `winner/current: ${toValidatorError(err).message}`;
        d.live.raise(ALARM.platformUnreachable, message, "warn", d.live.outageSince("platform"));
      }
      throw err;
    }
  };
  const parts = {
    platform: d.platform,
    outbox,
    marks,
    weights,
    winnerTick,
  };
  return { parts, uploader };
}
