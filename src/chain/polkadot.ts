/**
 * ChainClient over @polkadot/api (16.5.6): connect (reconnects on its own through WsProvider's
 * auto-connect) and the startup checks (genesis vs NETWORK, every call and storage item by name).
 * What it reads is in snapshot.ts, how it sends weights in extrinsic.ts.
 */
import { ApiPromise, WsProvider } from "@polkadot/api";
import { InfraError, InputError, isAbortError } from "../errors.js";
import { type Logger, safeUrl, silentLogger } from "../log.js";
import { withDeadline } from "./codec.js";
import { routePolkadotLogs } from "./console-bridge.js";
import { WeightsSender } from "./extrinsic.js";
import type { Hotkey } from "./keys.js";
import { GENESIS_HASHES, REQUIRED_CALLS, REQUIRED_STORAGE, STAKE_STORAGE } from "./networks.js";
import { preflightCheck } from "./preflight.js";
import { readSnapshot, readWeightsRow } from "./snapshot.js";
import type {
  ChainClient,
  ChainInfo,
  Network,
  Preflight,
  SetWeightsOptions,
  SetWeightsResult,
  StoredWeights,
  SubnetSnapshot,
} from "./types.js";

export { dispatchErrorName, extrinsicStatus } from "./inclusion.js";

/** Subtensor's own signed extensions carry no data (PhantomData); declaring them silences polkadot-js. */
const SIGNED_EXTENSIONS = {
  SubtensorSignedExtension: { extrinsic: {}, payload: {} },
  CommitmentsSignedExtension: { extrinsic: {}, payload: {} },
};

export interface PolkadotChainClientOptions {
  endpoint: string;
  network: Network;
  hotkey?: Hotkey;
  log?: Logger;
  /** Override the genesis check: a hash to require, or null to skip it. Default: by network. */
  expectedGenesisHash?: string | null;
  connectTimeoutMs?: number;
  /** Delay between reconnection attempts. */
  reconnectDelayMs?: number;
  /** Per-request RPC timeout. */
  requestTimeoutMs?: number;
  /** Mortal era of our extrinsics, in blocks. */
  eraPeriod?: number;
  /** How often to look for a lost transaction after a reconnect. */
  pollIntervalMs?: number;
  /** Seconds per block, for the commit-reveal round. */
  blockTimeS?: number;
  /** Wall clock in seconds (drand rounds are wall-clock); injectable for tests. */
  nowS?: () => number;
}

/** While the endpoint stays lost, one warning per this long (each reconnect attempt is a debug line). */
const OUTAGE_REPORT_MS = 60_000;

export class PolkadotChainClient implements ChainClient {
  private api: ApiPromise | undefined;
  private provider: WsProvider | undefined;
  private info: ChainInfo | undefined;
  private readonly log: Logger;
  /** Counts provider disconnects, for the logs. */
  private connectionEpoch = 0;
  /** The endpoint lost: since when (monotonic ms), failed attempts since, when last reported. */
  private outage: { since: number; attempts: number; reportedAt: number } | undefined;
  private reachability: (ok: boolean, reason: string) => void = () => {};
  private readonly opts: Required<
    Pick<
      PolkadotChainClientOptions,
      | "connectTimeoutMs"
      | "reconnectDelayMs"
      | "requestTimeoutMs"
      | "eraPeriod"
      | "pollIntervalMs"
      | "blockTimeS"
    >
  > &
    PolkadotChainClientOptions;

  constructor(opts: PolkadotChainClientOptions) {
    this.opts = {
      connectTimeoutMs: 30_000,
      reconnectDelayMs: 2_500,
      requestTimeoutMs: 60_000,
      eraPeriod: 64,
      pollIntervalMs: 3_000,
      blockTimeS: 12,
      ...opts,
    };
    this.log = (opts.log ?? silentLogger).child({ component: "chain", endpoint: safeUrl(opts.endpoint) });
    // @polkadot/api writes its own lines (API-WS: disconnected …) to the console: into our log instead.
    if (opts.log) routePolkadotLogs(this.log);
  }

  get isConnected(): boolean {
    return this.api?.isConnected ?? false;
  }

  get hotkeySs58(): string | undefined {
    return this.opts.hotkey?.ss58;
  }

  async connect(opts: { signal?: AbortSignal } = {}): Promise<ChainInfo> {
    if (this.api && this.info) return this.info;
    const provider = new WsProvider(
      this.opts.endpoint,
      this.opts.reconnectDelayMs,
      {},
      this.opts.requestTimeoutMs,
    );
    provider.on("disconnected", () => this.onDisconnected());
    provider.on("connected", () => this.onConnected());
    provider.on("error", () => {});
    const api = new ApiPromise({ provider, noInitWarn: true, signedExtensions: SIGNED_EXTENSIONS });
    api.on("error", () => {});
    try {
      await withDeadline(
        api.isReadyOrError,
        this.opts.connectTimeoutMs,
        opts.signal,
        "chain_connect_timeout",
      );
    } catch (err) {
      await api.disconnect().catch(() => {});
      if (!isAbortError(err)) this.reachability(false, `cannot connect to ${safeUrl(this.opts.endpoint)}`);
      if (err instanceof InfraError || isAbortError(err)) throw err;
      throw new InfraError(
        "chain_connect_failed",
        `cannot connect to ${safeUrl(this.opts.endpoint)}: ${(err as Error).message}`,
        {
          cause: err,
        },
      );
    }
    try {
      this.info = this.startupChecks(api);
    } catch (err) {
      await api.disconnect().catch(() => {});
      throw err;
    }
    this.api = api;
    this.provider = provider;
    this.log.info(
      {
        genesis: this.info.genesisHash,
        spec: this.info.specVersion,
        chain: this.info.chain,
        calls: this.info.weightCalls,
      },
      "chain.ready",
    );
    return this.info;
  }

  watchReachability(cb: (ok: boolean, reason: string) => void): void {
    this.reachability = cb;
  }

  /**
   * The provider lost the endpoint, or failed to reach it again (it retries every reconnectDelayMs):
   * the first loss is a warning, the attempts after it debug lines and one warning a minute.
   */
  private onDisconnected(): void {
    this.connectionEpoch++;
    const t = performance.now();
    const o = this.outage;
    if (!o) {
      this.outage = { since: t, attempts: 1, reportedAt: t };
      this.log.warn({ connection: this.connectionEpoch }, "chain.disconnected");
    } else {
      o.attempts++;
      const fields = { attempts: o.attempts, forS: Math.round((t - o.since) / 1000) };
      if (t - o.reportedAt < OUTAGE_REPORT_MS) this.log.debug(fields, "chain.reconnect_failed");
      else {
        o.reportedAt = t;
        this.log.warn(fields, "chain.still_disconnected");
      }
    }
    this.reachability(false, `disconnected from ${safeUrl(this.opts.endpoint)}`);
  }

  private onConnected(): void {
    const o = this.outage;
    this.outage = undefined;
    this.log.info(
      {
        connection: this.connectionEpoch,
        ...(o ? { attempts: o.attempts, afterS: Math.round((performance.now() - o.since) / 1000) } : {}),
      },
      "chain.connected",
    );
    this.reachability(true, "connected");
  }

  async disconnect(): Promise<void> {
    const api = this.api;
    this.api = undefined;
    this.provider = undefined;
    this.info = undefined;
    await api?.disconnect().catch(() => {});
  }

  /** Genesis vs the configured network, and every call/storage item we need, by name. */
  private startupChecks(api: ApiPromise): ChainInfo {
    const genesisHash = api.genesisHash.toHex();
    const expected =
      this.opts.expectedGenesisHash === undefined
        ? GENESIS_HASHES[this.opts.network]
        : (this.opts.expectedGenesisHash ?? undefined);
    if (expected && genesisHash !== expected)
      throw new InputError(
        "chain_genesis_mismatch",
        `endpoint ${safeUrl(this.opts.endpoint)} serves genesis ${genesisHash}, not ${this.opts.network} (${expected}); check NETWORK and SUBTENSOR_ENDPOINT`,
      );
    const inv = metadataInventory(api);
    const missing = [
      ...REQUIRED_STORAGE.filter((s) => !inv.storage.has(s)),
      ...REQUIRED_CALLS.filter((c) => !inv.calls.has(c)),
      ...(STAKE_STORAGE.some((s) => inv.storage.has(s)) ? [] : [STAKE_STORAGE.join(" | ")]),
    ];
    if (missing.length > 0)
      throw new InfraError(
        "chain_runtime_incompatible",
        `the runtime lacks what this validator needs: ${missing.join(", ")}`,
        {
          retryable: false,
          detail: { missing },
        },
      );
    const rv = api.runtimeVersion;
    return {
      network: this.opts.network,
      endpoint: this.opts.endpoint,
      genesisHash,
      chain: api.runtimeChain.toString(),
      specName: rv.specName.toString(),
      specVersion: rv.specVersion.toNumber(),
      txVersion: rv.transactionVersion.toNumber(),
      weightCalls: {
        setWeights: inv.calls.has("SubtensorModule.set_weights"),
        commitTimelockedWeights: inv.calls.has("SubtensorModule.commit_timelocked_weights"),
        commitCrv3Weights: inv.calls.has("SubtensorModule.commit_crv3_weights"),
      },
    };
  }

  private requireApi(): ApiPromise {
    if (!this.api)
      throw new InfraError("chain_not_connected", "the chain client is not connected; call connect() first");
    return this.api;
  }

  async headBlock(): Promise<{ number: number; hash: string }> {
    const header = await this.requireApi().rpc.chain.getHeader();
    return { number: header.number.toNumber(), hash: header.hash.toHex() };
  }

  async snapshot(netuid: number, opts: { at?: string; signal?: AbortSignal } = {}): Promise<SubnetSnapshot> {
    const read = readSnapshot(this.requireApi(), netuid, { at: opts.at }, this.log);
    return withDeadline(read, this.opts.requestTimeoutMs, opts.signal, "chain_snapshot_timeout");
  }

  async weightsRow(
    netuid: number,
    uid: number,
    opts: { at?: string; signal?: AbortSignal } = {},
  ): Promise<StoredWeights> {
    const read = readWeightsRow(this.requireApi(), netuid, uid, { at: opts.at });
    return withDeadline(read, this.opts.requestTimeoutMs, opts.signal, "chain_request_timeout");
  }

  async preflight(netuid: number, uids: number[], weights: number[], versionKey: number): Promise<Preflight> {
    const hotkey = this.requireHotkey();
    const snap = await this.snapshot(netuid);
    return preflightCheck(snap, { hotkey: hotkey.ss58, uids, weights, versionKey });
  }

  private requireHotkey(): Hotkey {
    if (!this.opts.hotkey)
      throw new InputError("wallet_not_loaded", "no hotkey loaded: the chain client cannot sign");
    return this.opts.hotkey;
  }

  /** u16 weights (see convertWeightsForEmit); resolves on inclusion, rejection or the deadline. */
  async setWeights(
    netuid: number,
    uids: number[],
    weights: number[],
    versionKey: number,
    opts: SetWeightsOptions = {},
  ): Promise<SetWeightsResult> {
    const api = this.requireApi();
    const hotkey = this.requireHotkey();
    const sender = new WeightsSender({
      api,
      provider: this.provider!,
      log: this.log,
      eraPeriod: this.opts.eraPeriod,
      pollIntervalMs: this.opts.pollIntervalMs,
      blockTimeS: this.opts.blockTimeS,
      nowS: this.opts.nowS,
    });
    return sender.send(hotkey, netuid, uids, weights, versionKey, opts);
  }
}

export interface MetadataInventory {
  storage: Set<string>;
  calls: Set<string>;
}

/** "Pallet.Item" storage names and "Pallet.call_name" calls of the connected runtime. */
export function metadataInventory(api: ApiPromise): MetadataInventory {
  const storage = new Set<string>();
  const calls = new Set<string>();
  const latest = api.runtimeMetadata.asLatest;
  for (const p of latest.pallets) {
    const pallet = p.name.toString();
    if (p.storage.isSome)
      for (const item of p.storage.unwrap().items) storage.add(`${pallet}.${item.name.toString()}`);
    if (p.calls.isSome)
      for (const v of latest.lookup.getSiType(p.calls.unwrap().type).def.asVariant.variants)
        calls.add(`${pallet}.${v.name.toString()}`);
  }
  return { storage, calls };
}
