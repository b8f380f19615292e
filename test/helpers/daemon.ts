/**
 * Daemon test wiring: a btcli hotkey file written with @polkadot/keyring, a subtensor test node
 * with subnet 11 (owner, challenger, winner, us), a config pointing at the fakes, and a stand-in
 * evaluation pipeline built on the REAL evaluation core (src/evaluation evaluate(): SQLite rows,
 * retries, SHUTDOWN resume, one verdict) with a scripted episode runner instead of Docker.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Keyring } from "@polkadot/keyring";
import { u8aToHex } from "@polkadot/util";
import {
  cryptoWaitReady,
  mnemonicGenerate,
  mnemonicToMiniSecret,
  sr25519PairFromSeed,
} from "@polkadot/util-crypto";
import type { Config } from "../../src/config.js";
import { loadConfig } from "../../src/config.js";
import type {
  OpenedEnvironment,
  PackEvaluation,
  PackEvaluationRequest,
  Pipeline,
} from "../../src/daemon/index.js";
import {
  type EpisodeOutcome,
  type EpisodeRequest,
  evaluate,
  type Provenance,
  rejectionVerdict,
  SHUTDOWN,
  toScoreVerdict,
} from "../../src/evaluation/index.js";
import { EvaluationRepo } from "../../src/store/index.js";
import { FakeSubtensorNode, randomAccount } from "../fakes/subtensor-node.js";

export interface TestWallet {
  walletPath: string;
  walletName: string;
  walletHotkey: string;
  ss58: string;
}

/** An unencrypted btcli hotkey file (the fields bittensor-wallet writes; see src/chain/keys.ts). */
export async function writeWallet(dir: string, name = "validator", hotkey = "default"): Promise<TestWallet> {
  await cryptoWaitReady();
  const mnemonic = mnemonicGenerate();
  const seed = mnemonicToMiniSecret(mnemonic);
  const pair = sr25519PairFromSeed(seed);
  const ss58 = new Keyring({ type: "sr25519", ss58Format: 42 }).addFromPair(pair).address;
  const walletPath = join(dir, "wallets");
  await mkdir(join(walletPath, name, "hotkeys"), { recursive: true });
  await writeFile(
    join(walletPath, name, "hotkeys", hotkey),
    JSON.stringify({
      accountId: u8aToHex(pair.publicKey),
      publicKey: u8aToHex(pair.publicKey),
      secretPhrase: mnemonic,
      secretSeed: u8aToHex(seed),
      ss58Address: ss58,
    }),
  );
  return { walletPath, walletName: name, walletHotkey: hotkey, ss58 };
}

export interface TestSubnet {
  node: FakeSubtensorNode;
  owner: string;
  challenger: string;
  winner: string;
  uids: { owner: number; challenger: number; winner: number; me: number };
}

/** Subnet 11 on the finney-spec219 test node: owner uid 0, challenger 1, winner 2, us 3 (with a permit). */
export async function startSubnet(
  me: string,
  o: { rateLimit?: number; versionKey?: number; genesisHash?: string; port?: number } = {},
): Promise<TestSubnet> {
  const owner = randomAccount();
  const ownerCold = randomAccount();
  const challenger = randomAccount();
  const winner = randomAccount();
  const node = await FakeSubtensorNode.start({
    fixture: "finney-spec219",
    ...(o.genesisHash ? { genesisHash: o.genesisHash } : {}),
    ...(o.port ? { port: o.port } : {}),
    startBlock: 20_000,
    subnets: [
      {
        netuid: 11,
        ownerColdkey: ownerCold,
        neurons: [
          { hotkey: owner, coldkey: ownerCold },
          { hotkey: challenger },
          { hotkey: winner },
          { hotkey: me, validatorPermit: true, stakeRao: 50_000_000_000n },
        ],
        weightsSetRateLimit: o.rateLimit ?? 5,
        weightsVersionKey: o.versionKey ?? 3,
      },
    ],
  });
  return { node, owner, challenger, winner, uids: { owner: 0, challenger: 1, winner: 2, me: 3 } };
}

export interface TestEnvArgs {
  dataDir: string;
  wallet: TestWallet;
  platformUrl: string;
  chainUrl: string;
  env?: Record<string, string>;
}

/**
 * The environment of a daemon wired to the fakes (also what a `run` child process gets). It
 * evaluates (EVAL_ENABLED=1): most daemon tests are about evaluations; a weight-only test passes
 * `EVAL_ENABLED: "0"`. A daemon that evaluates on finney needs a provider key (the simulator never
 * votes): the scripted pipeline calls no provider, so any key does; a run on the simulator passes
 * `LLM_API_KEY: ""` with `NETWORK: "local"`.
 */
export function testEnv(a: TestEnvArgs): Record<string, string> {
  return {
    EVAL_ENABLED: "1",
    LLM_API_KEY: "sk-trajrl-test-daemon",
    DATA_DIR: a.dataDir,
    LOG_LEVEL: "debug",
    NETWORK: "finney",
    NETUID: "11",
    SUBTENSOR_ENDPOINT: a.chainUrl,
    WALLET_PATH: a.wallet.walletPath,
    WALLET_NAME: a.wallet.walletName,
    WALLET_HOTKEY: a.wallet.walletHotkey,
    TRAJECTORYRL_API_BASE_URL: a.platformUrl,
    EVAL_POLL_INTERVAL_S: "0.2",
    WEIGHTS_INTERVAL_S: "1",
    HEARTBEAT_INTERVAL_S: "600",
    // The runtime of the test project (vitest.config.ts), not the product's `auto`.
    EPISODE_RUNTIME: process.env.EPISODE_RUNTIME || "runc",
    ...a.env,
  };
}

export function testConfig(a: TestEnvArgs): Config {
  return loadConfig(testEnv(a));
}

// ---------------------------------------------------------------------------------------------
// A pipeline on the real evaluation core
// ---------------------------------------------------------------------------------------------

export interface ScriptedEpisode {
  /** Quality the verifier "measured" (passed/tests of 4 tests). */
  quality: number;
  /** How long the episode takes (abortable). */
  ms?: number;
  /** An infra failure instead of a score (discards the run after the retries). */
  infra?: boolean;
}

export interface CorePipelineOptions {
  scenarios: string[];
  spec?: number;
  /** Per scenario; default: quality 0.5 in 50 ms. */
  script?: (scenario: string, attempt: number) => ScriptedEpisode;
  maxAttempts?: number;
}

/** What the stand-in pipeline saw, for assertions. */
export interface CorePipelineLog {
  calls: Array<{ epochId: number | undefined; specNumber: number | undefined; resumedFrom?: string }>;
  episodes: Array<{ evaluationId: string; scenario: string; attempt: number; outcome: "done" | "aborted" }>;
  probes: number;
  /** openEnvironment calls (a weight-only daemon makes none). */
  opened: number;
}

const PROVENANCE = (config: Config): Provenance => ({
  priceTableHash: "0".repeat(64),
  imageDigests: { sidecar: `sha256:${"5".repeat(64)}` },
  validatorVersion: "test",
  harness: { name: "trajrl-validator-ts", version: "test" },
  llm: { baseUrl: config.llm.baseUrl, simulated: true, defaultModel: config.llm.defaultModel },
  capUsd: config.llm.episodeCapUsd,
  concurrency: 1,
  bench: {
    source: "builtin",
    harnessImageHash: `sha256:${"5".repeat(64)}`,
    harnessName: "trajrl-validator-ts",
    harnessVersion: "test",
  },
});

export function corePipeline(o: CorePipelineOptions): { pipeline: Pipeline; seen: CorePipelineLog } {
  const seen: CorePipelineLog = { calls: [], episodes: [], probes: 0, opened: 0 };
  // The daemon's network, as the real environment stamps it on the epochs' evaluations.
  let network: string | undefined;
  const pipeline: Pipeline = {
    async openEnvironment(config, opts): Promise<OpenedEnvironment> {
      seen.opened++;
      network = opts.network;
      const env = { config, db: opts.db!, log: opts.log };
      return {
        ...env,
        live: opts.live!,
        priceTableHash: "0".repeat(64),
        close: async () => {},
        evaluatePack: (req) => evaluatePack(env, req),
      };
    },
    // The production mapping: what the daemon posts is what the pipeline module makes of a verdict.
    toScoreVerdict,
  };
  async function evaluatePack(
    env: Pick<OpenedEnvironment, "config" | "db" | "log">,
    req: PackEvaluationRequest,
  ): Promise<PackEvaluation> {
    seen.calls.push({ epochId: req.epochId, specNumber: req.specNumber });
    const spec = o.spec ?? req.specNumber ?? 900;
    const repo = new EvaluationRepo(env.db, network);
    const checked = req.pack;
    if (!checked.ok) {
      const at = new Date().toISOString();
      const verdict = rejectionVerdict({
        evaluationId: `ev_rej_${Date.now()}`,
        packHash: req.rejectedHash ?? "",
        spec,
        code: checked.rejection.code,
        message: checked.rejection.message,
        provenance: PROVENANCE(env.config),
        at,
      });
      return { kind: "verdict", evaluationId: verdict.evaluationId, verdict };
    }
    const epochCtrl = new AbortController();
    const outer = req.signal;
    const onOuter = () => epochCtrl.abort(outer!.reason);
    if (outer?.aborted) onOuter();
    else outer?.addEventListener("abort", onOuter, { once: true });
    const probe = async () => {
      if (!req.stillCurrent) return;
      seen.probes++;
      if (!(await req.stillCurrent()) && !epochCtrl.signal.aborted)
        epochCtrl.abort({ code: "epoch_changed", message: "the epoch moved on" });
    };
    const runner = async (r: EpisodeRequest): Promise<EpisodeOutcome> => {
      await probe();
      r.signal.throwIfAborted();
      const s = o.script?.(r.scenario, r.attempt) ?? { quality: 0.5 };
      r.onProgress({ phase: "running" });
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(resolve, s.ms ?? 50);
        r.signal.addEventListener(
          "abort",
          () => {
            clearTimeout(t);
            seen.episodes.push({
              evaluationId: r.evaluationId,
              scenario: r.scenario,
              attempt: r.attempt,
              outcome: "aborted",
            });
            reject(r.signal.reason);
          },
          { once: true },
        );
      });
      r.onProgress({ phase: "verifying", spentUsd: 0.01 });
      seen.episodes.push({
        evaluationId: r.evaluationId,
        scenario: r.scenario,
        attempt: r.attempt,
        outcome: "done",
      });
      await probe();
      const passed = Math.round(s.quality * 4);
      return {
        scenario: r.scenario,
        status: s.infra ? "failed" : "scored",
        quality: s.infra ? 0 : passed / 4,
        tests: 4,
        passed: s.infra ? 0 : passed,
        ...(s.infra
          ? { failure: { class: "infra" as const, code: "docker_timeout", message: "scripted" } }
          : {}),
        // A scripted infra failure strikes before any model call (our Docker, not the pack).
        costUsd: s.infra ? 0 : 0.01,
        byModel: {},
        billedCalls: s.infra ? 0 : 1,
        truncatedBeforeToolCall: false,
        timings: { setupMs: 1, agentMs: s.ms ?? 50, verifyMs: 1, totalMs: (s.ms ?? 50) + 2 },
        imageDigests: {},
      };
    };
    try {
      const r = await evaluate({
        repo,
        runner,
        packHash: checked.pack.hash,
        spec,
        scenarios: req.scenarios ?? o.scenarios,
        concurrency: 1,
        capUsd: env.config.llm.episodeCapUsd,
        log: env.log,
        provenance: () => PROVENANCE(env.config),
        signal: epochCtrl.signal,
        ...(req.onEvent ? { onEvent: req.onEvent } : {}),
        source: req.source,
        ...(req.epochId !== undefined ? { epochId: String(req.epochId) } : {}),
        maxAttempts: o.maxAttempts ?? 2,
        backoffScale: 0.001,
      });
      return r as PackEvaluation;
    } finally {
      outer?.removeEventListener("abort", onOuter);
    }
  }
  return { pipeline, seen };
}

export { until } from "./wait.js";
export { SHUTDOWN };
