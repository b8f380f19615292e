/**
 * The daemon's test world, shared by the daemon integration and reliability tests: a btcli wallet,
 * the subtensor test node with subnet 11, the fake platform, a config pointing at them, and a
 * started Daemon on the real evaluation core with a scripted episode runner.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { expect } from "vitest";
import { loadHotkey, PolkadotChainClient } from "../../src/chain/index.js";
import type { Config } from "../../src/config.js";
import { Daemon, type DaemonTiming, LogTap } from "../../src/daemon/index.js";
import { createLogger } from "../../src/log.js";
import { LiveStatus } from "../../src/status/index.js";
import { FakePlatform } from "../fakes/platform.js";
import {
  type CorePipelineOptions,
  corePipeline,
  startSubnet,
  type TestSubnet,
  type TestWallet,
  testConfig,
  testEnv,
  writeWallet,
} from "./daemon.js";

export const PIN = join(import.meta.dirname, "../../examples/packs/pin.json");
/** The example pin pack's bytes (read once). */
export const readPinPack = (): Promise<Buffer> => readFile(PIN);

export const FAST: Partial<DaemonTiming> = {
  outboxPollMs: 100,
  outboxBackoff: { initialMs: 300, factor: 2, maxMs: 2_000, jitter: 0, maxAgeMs: 24 * 3_600_000 },
  weightsBackoff: { transientBaseMs: 200, permanentMaxMs: 2_000 },
  setWeightsTimeoutMs: 20_000,
  packFetchAttempts: 2,
  packFetchRetryMs: 50,
  winnerPollMs: 200,
  winnerPrimeMs: 5_000,
};

export interface World {
  dir: string;
  wallet: TestWallet;
  subnet: TestSubnet;
  fake: FakePlatform;
  config: Config;
}

const cleanups: Array<() => Promise<unknown>> = [];
/** Tear down every world and daemon started since the last call (call it in afterEach). */
export async function runCleanups(): Promise<void> {
  while (cleanups.length) await cleanups.pop()!().catch(() => {});
}
/** Something the next runCleanups() tears down (a daemon, a child process), before the world under it. */
export function onCleanup(fn: () => Promise<unknown>): void {
  cleanups.push(fn);
}

/** What every daemon test stands on: a data directory, a wallet, the chain node and the fake platform. */
interface Ground {
  dir: string;
  wallet: TestWallet;
  subnet: TestSubnet;
  fake: FakePlatform;
}

async function ground(
  prefix: string,
  platformNow?: () => number,
  on: { dir?: string; wallet?: TestWallet; genesisHash?: string } = {},
): Promise<Ground> {
  const dir = on.dir ?? (await mkdtemp(join(tmpdir(), prefix)));
  if (!on.dir) cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const wallet = on.wallet ?? (await writeWallet(dir));
  const subnet = await startSubnet(wallet.ss58, on.genesisHash ? { genesisHash: on.genesisHash } : {});
  cleanups.push(() => subnet.node.stop());
  const fake = await FakePlatform.start({
    validators: [wallet.ss58],
    ...(platformNow ? { now: platformNow } : {}),
  });
  cleanups.push(() => fake.close());
  return { dir, wallet, subnet, fake };
}

/**
 * `platformNow`: the fake platform's clock for its ±5 min signature check (tests that move the daemon's
 * clock). `on`: another network on the same host — the same data directory and wallet as an earlier
 * world, a chain of its own (`genesisHash`, default finney's) and a platform of its own.
 */
export async function world(
  env: Record<string, string> = {},
  platformNow?: () => number,
  on: { dir?: string; wallet?: TestWallet; genesisHash?: string } = {},
): Promise<World> {
  const g = await ground("daemon-it-", platformNow, on);
  const config = testConfig({
    dataDir: join(g.dir, "data"),
    wallet: g.wallet,
    platformUrl: g.fake.url,
    chainUrl: g.subnet.node.url,
    env,
  });
  return { ...g, config };
}

/**
 * The real pipeline on the built-in simulator (`run` as a process, or an in-process daemon on the
 * real environment): EVAL_ENABLED=1, the built-in suite's quick set, on a local chain (the built-in
 * suite votes only there; the fake node answers any genesis).
 */
export const SIM_ENV: Readonly<Record<string, string>> = {
  EVAL_ENABLED: "1",
  SUITE: "quick",
  LLM_API_KEY: "",
  ENGY_SIM_SEED: "11",
  ENGY_SIM_LATENCY_SCALE: "0",
  NETWORK: "local",
  BENCH_SOURCE: "builtin",
};

export interface ProcessWorld extends Ground {
  /** The environment `trajrl-validator run` gets (testEnv with SIM_ENV and `extra`). */
  env: Record<string, string>;
}

/** A world for the daemon as a process on the real pipeline: the ground and the env of `run`. */
export async function processWorld(extra: Record<string, string> = {}): Promise<ProcessWorld> {
  const g = await ground("daemon-e2e-");
  const env = testEnv({
    dataDir: join(g.dir, "data"),
    wallet: g.wallet,
    platformUrl: g.fake.url,
    chainUrl: g.subnet.node.url,
    env: { ...SIM_ENV, ...extra },
  });
  return { ...g, env };
}

export interface Running {
  daemon: Daemon;
  live: LiveStatus;
  seen: ReturnType<typeof corePipeline>["seen"];
  logs: string[];
}

export async function startDaemon(
  w: World,
  p: CorePipelineOptions,
  timing: Partial<DaemonTiming> = {},
  now?: () => number,
): Promise<Running> {
  const live = new LiveStatus();
  const { pipeline, seen } = corePipeline(p);
  const tap = new LogTap();
  const logs: string[] = [];
  const dump = process.env.DAEMON_TEST_LOG;
  const log = createLogger({
    level: "debug",
    destination: pino.multistream([
      { stream: tap, level: "trace" },
      { stream: { write: (l: string) => void logs.push(l) }, level: "trace" },
      ...(dump
        ? [{ stream: pino.destination({ dest: dump, sync: true, append: true }), level: "trace" as const }]
        : []),
    ]),
  });
  const hotkey = await loadHotkey(w.config.chain);
  const chain = new PolkadotChainClient({
    endpoint: w.config.chain.endpoint,
    network: w.config.chain.network,
    hotkey,
    log,
    reconnectDelayMs: 150,
    pollIntervalMs: 100,
  });
  const daemon = new Daemon({
    config: w.config,
    log,
    live,
    logTap: tap,
    pipeline,
    chain,
    scenarios: p.scenarios,
    timing: { ...FAST, ...timing },
    ...(now ? { now } : {}),
  });
  cleanups.push(() => daemon.stop());
  await daemon.start();
  return { daemon, live, seen, logs };
}

export const scoreRequests = (fake: FakePlatform, epochId: number) =>
  fake.requests("epoch.score").filter((r) => r.path === `/api/v2/epoch/${epochId}/score`);

export function setWeightsOf(subnet: TestSubnet) {
  return subnet.node.received.filter((r) => r.call?.method === "setWeights");
}

export function expectEveryExtrinsicVerifies(subnet: TestSubnet): void {
  expect(subnet.node.received.length).toBeGreaterThan(0);
  for (const r of subnet.node.received) {
    expect(r.verifyError).toBeUndefined();
    expect(r.signatureValid).toBe(true);
  }
}

export function seat(s: TestSubnet) {
  return {
    success: true,
    winner: {
      hotkey: s.winner,
      uid: s.uids.winner,
      pack_hash: "cd".repeat(32),
      score: 1.5,
      since_epoch_id: 7,
    },
    finalized_epoch: null,
    submissions: [],
  };
}
