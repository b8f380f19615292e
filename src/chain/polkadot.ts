/**
 * ChainClient over @polkadot/api (16.5.6). Reconnects on its own (WsProvider's auto-connect); a
 * set_weights whose websocket drops is recovered by scanning new blocks for its hash and, when it
 * is nowhere to be seen, re-sending the SAME signed bytes: the pool deduplicates them by hash and
 * the nonce makes a second inclusion impossible, so a lost connection never double-submits.
 */
import { performance } from "node:perf_hooks";
import { ApiPromise, WsProvider } from "@polkadot/api";
import type { QueryableModuleStorage, SubmittableExtrinsic } from "@polkadot/api/types";
import type { Codec } from "@polkadot/types/types";
import { u8aToHex } from "@polkadot/util";
import { z } from "zod";
import { InfraError, InputError, isAbortError, ValidatorError } from "../errors.js";
import { type Logger, safeUrl, silentLogger } from "../log.js";
import { parsePoolRejection, weightsErrorKind } from "./errors.js";
import type { Hotkey } from "./keys.js";
import { GENESIS_HASHES, REQUIRED_CALLS, REQUIRED_STORAGE, STAKE_STORAGE } from "./networks.js";
import { preflightCheck } from "./preflight.js";
import { snapshotProblems } from "./snapshot-check.js";
import { buildTimelockedCommit } from "./timelock.js";
import type {
  ChainClient,
  ChainInfo,
  Network,
  Neuron,
  Preflight,
  SetWeightsOptions,
  SetWeightsResult,
  StoredWeights,
  SubnetSnapshot,
  WeightsMode,
} from "./types.js";
import { U16_MAX } from "./weights.js";

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

type WatchResult =
  | { kind: "inBlock"; blockHash: string }
  | { kind: "rejected"; name: string; message: string; custom?: number }
  | { kind: "dropped"; status: string }
  | { kind: "disconnected" }
  | { kind: "deadline" }
  | { kind: "aborted" };

interface InBlock {
  blockHash: string;
  blockNumber: number;
  success: boolean;
  errorName: string | undefined;
  events: string[];
}

const toNum = (c: Codec): number => {
  const v = c.toPrimitive();
  if (typeof v === "number") return v;
  if (typeof v === "string" || typeof v === "bigint") return Number(v);
  if (typeof v === "boolean") return v ? 1 : 0;
  throw new InfraError("chain_decode_failed", `expected a number, got ${JSON.stringify(v)}`);
};
const toBig = (c: Codec): bigint => BigInt(c.toString());
const toBool = (c: Codec): boolean => c.toPrimitive() === true;
const toList = <T>(c: Codec): T[] => c.toPrimitive() as T[];
const u16 = z.number().int().min(0).max(U16_MAX);
/** `SubtensorModule.Weights` as polkadot-js renders Vec<(u16, u16)>. */
const storedWeightsSchema = z.array(z.tuple([u16, u16]));
/** Pool answers to a resend that mean the first send is pooled or already included. */
const BENIGN_ON_RESEND = new Set(["AlreadyImported", "PriorityTooLow", "Stale", "TemporarilyBanned"]);

const isEmptyAccount = (s: string) =>
  /^0x0+$/.test(s) || s === "5C4hrfjw9DjXZTzV3MwzrrAr9P1MJhSrvWGWqi1eSuyUpnhM";

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

export class PolkadotChainClient implements ChainClient {
  private api: ApiPromise | undefined;
  private provider: WsProvider | undefined;
  private info: ChainInfo | undefined;
  private readonly log: Logger;
  /** Counts provider disconnects, for the logs. */
  private connectionEpoch = 0;
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
    this.log = (opts.log ?? silentLogger).child({ mod: "chain", endpoint: safeUrl(opts.endpoint) });
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
    provider.on("disconnected", () => {
      this.connectionEpoch++;
      this.log.warn({ epoch: this.connectionEpoch }, "chain.disconnected");
    });
    provider.on("connected", () => this.log.info({ epoch: this.connectionEpoch }, "chain.connected"));
    provider.on("error", () => {});
    const api = new ApiPromise({ provider, noInitWarn: true, signedExtensions: SIGNED_EXTENSIONS });
    api.on("error", () => {});
    try {
      await this.withDeadline(
        api.isReadyOrError,
        this.opts.connectTimeoutMs,
        opts.signal,
        "chain_connect_timeout",
      );
    } catch (err) {
      await api.disconnect().catch(() => {});
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

  private async withDeadline<T>(
    p: Promise<T>,
    ms: number,
    signal: AbortSignal | undefined,
    code: string,
  ): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    try {
      return await Promise.race([
        p,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new InfraError(code, `no answer from the chain within ${ms} ms`)),
            ms,
          );
          if (signal) {
            onAbort = () => reject(signal.reason ?? new DOMException("aborted", "AbortError"));
            if (signal.aborted) onAbort();
            else signal.addEventListener("abort", onAbort, { once: true });
          }
        }),
      ]);
    } finally {
      clearTimeout(timer);
      if (onAbort) signal?.removeEventListener("abort", onAbort);
    }
  }

  async headBlock(): Promise<{ number: number; hash: string }> {
    const header = await this.requireApi().rpc.chain.getHeader();
    return { number: header.number.toNumber(), hash: header.hash.toHex() };
  }

  async snapshot(netuid: number, opts: { at?: string; signal?: AbortSignal } = {}): Promise<SubnetSnapshot> {
    const api = this.requireApi();
    const read = async (): Promise<SubnetSnapshot> => {
      const header = opts.at ? await api.rpc.chain.getHeader(opts.at) : await api.rpc.chain.getHeader();
      const blockHash = header.hash.toHex();
      const at = await api.at(blockHash);
      const q = at.query.subtensorModule!;
      const has = (name: string) => typeof q[name] === "function";
      const [n, permits, lastUpdate, tempo, rate, versionKey, cr, minW, maxW, ownerColdkey] =
        await Promise.all([
          q.subnetworkN!(netuid),
          q.validatorPermit!(netuid),
          q.lastUpdate!(netuid),
          q.tempo!(netuid),
          q.weightsSetRateLimit!(netuid),
          q.weightsVersionKey!(netuid),
          q.commitRevealWeightsEnabled!(netuid),
          q.minAllowedWeights!(netuid),
          q.maxWeightsLimit!(netuid),
          q.subnetOwner!(netuid),
        ]);
      const count = toNum(n);
      const uids = Array.from({ length: count }, (_, uid) => uid);
      const hotkeys = count
        ? (await q.keys!.multi(uids.map((uid) => [netuid, uid]))).map((c) => c.toString())
        : [];
      const stakeSource = has("totalHotkeyAlpha") ? "TotalHotkeyAlpha" : "TotalHotkeyStake";
      const stakes = !count
        ? []
        : stakeSource === "TotalHotkeyAlpha"
          ? await q.totalHotkeyAlpha!.multi(hotkeys.map((h) => [h, netuid]))
          : await q.totalHotkeyStake!.multi(hotkeys);
      const permitList = toList<boolean>(permits);
      const lastList = toList<number | string>(lastUpdate).map(Number);
      const neurons: Neuron[] = hotkeys.map((hotkey, uid) => {
        const stakeRao = toBig(stakes[uid]!);
        return {
          uid,
          hotkey,
          stakeRao,
          stake: Number(stakeRao) / 1e9,
          validatorPermit: permitList[uid] === true,
          lastUpdate: lastList[uid] ?? 0,
        };
      });
      const coldkey = ownerColdkey.toString();
      let ownerHotkey: string | undefined;
      if (has("subnetOwnerHotkey")) {
        const hk = (await q.subnetOwnerHotkey!(netuid)).toString();
        ownerHotkey = isEmptyAccount(hk) ? undefined : hk;
      } else if (count && !isEmptyAccount(coldkey)) {
        // Older runtimes store only the owner's coldkey: the owner hotkey is the lowest uid it owns.
        const owners = (await q.owner!.multi(hotkeys)).map((c) => c.toString());
        const uid = owners.indexOf(coldkey);
        ownerHotkey = uid >= 0 ? hotkeys[uid] : undefined;
      }
      const ownerUid = ownerHotkey === undefined ? undefined : hotkeys.indexOf(ownerHotkey);
      const optionalNum = async (name: string, ...args: unknown[]) =>
        has(name) ? toNum(await q[name]!(...(q[name]!.creator.meta.type.isPlain ? [] : args))) : undefined;
      const snap: SubnetSnapshot = {
        netuid,
        block: header.number.toNumber(),
        blockHash,
        neurons,
        stakeSource,
        ownerColdkey: isEmptyAccount(coldkey) ? undefined : coldkey,
        ownerHotkey,
        ownerUid: ownerUid === undefined || ownerUid < 0 ? undefined : ownerUid,
        tempo: toNum(tempo),
        weightsSetRateLimit: toNum(rate),
        weightsVersionKey: toNum(versionKey),
        commitRevealEnabled: toBool(cr),
        revealPeriodEpochs: await optionalNum("revealPeriodEpochs", netuid),
        commitRevealVersion: await optionalNum("commitRevealWeightsVersion", netuid),
        minAllowedWeights: toNum(minW),
        maxWeightsLimit: toNum(maxW),
      };
      const problems = snapshotProblems(snap, {
        count,
        permits: permitList.length,
        lastUpdates: lastList.length,
      });
      if (problems.length > 0) {
        this.log.warn({ netuid, block: snap.block, reasons: problems }, "chain.malformed_snapshot");
        throw new InfraError(
          "chain_data_malformed",
          `subnet ${netuid} at block ${snap.block}: ${problems.join("; ")}`,
          {
            detail: { netuid, block: snap.block, reasons: problems },
          },
        );
      }
      return snap;
    };
    const decoded = read().catch((err: unknown) => {
      // Bytes the runtime's types cannot decode: the node served corrupt storage.
      if (!(err instanceof ValidatorError) && /decode|createType|Unable to/i.test(String(err))) {
        this.log.warn({ netuid, reason: String(err).slice(0, 500) }, "chain.malformed_snapshot");
        throw new InfraError("chain_data_malformed", `subnet ${netuid}: the node's storage does not decode`, {
          cause: err,
          detail: { netuid },
        });
      }
      throw err;
    });
    return this.withDeadline(decoded, this.opts.requestTimeoutMs, opts.signal, "chain_snapshot_timeout");
  }

  async weightsRow(
    netuid: number,
    uid: number,
    opts: { at?: string; signal?: AbortSignal } = {},
  ): Promise<StoredWeights> {
    const api = this.requireApi();
    const read = async (): Promise<StoredWeights> => {
      const at = opts.at ? await api.at(opts.at) : await api.at((await api.rpc.chain.getHeader()).hash);
      const q = at.query.subtensorModule!;
      if (typeof q.weights !== "function")
        throw new InfraError("chain_runtime_incompatible", "the runtime stores no SubtensorModule.Weights", {
          retryable: false,
        });
      const parsed = storedWeightsSchema.safeParse((await q.weights(netuid, uid)).toPrimitive());
      if (!parsed.success)
        throw new InfraError(
          "chain_data_malformed",
          `subnet ${netuid} uid ${uid}: Weights is not a list of (u16, u16)`,
        );
      return parsed.data;
    };
    const decoded = read().catch((err: unknown) => {
      if (!(err instanceof ValidatorError) && /decode|createType|Unable to/i.test(String(err)))
        throw new InfraError("chain_data_malformed", `subnet ${netuid} uid ${uid}: Weights does not decode`, {
          cause: err,
        });
      throw err;
    });
    return this.withDeadline(decoded, this.opts.requestTimeoutMs, opts.signal, "chain_request_timeout");
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

  async setWeights(
    netuid: number,
    uids: number[],
    weights: number[],
    versionKey: number,
    opts: SetWeightsOptions = {},
  ): Promise<SetWeightsResult> {
    const api = this.requireApi();
    const hotkey = this.requireHotkey();
    if (uids.length !== weights.length || uids.length === 0)
      throw new InputError(
        "weights_invalid",
        `uids (${uids.length}) and weights (${weights.length}) must be non-empty and equal`,
      );
    for (const v of [...uids, ...weights])
      if (!Number.isInteger(v) || v < 0 || v > U16_MAX)
        throw new InputError("weights_invalid", `${v} is not a u16`);
    if (!Number.isSafeInteger(versionKey) || versionKey < 0)
      throw new InputError("weights_invalid", `bad version key ${versionKey}`);
    const deadline = performance.now() + (opts.timeoutMs ?? 120_000);
    const signal = opts.signal;
    const log = this.log.child({ netuid, signer: hotkey.ss58 });
    let mode: WeightsMode = "set_weights";
    const result = (r: Partial<SetWeightsResult> & Pick<SetWeightsResult, "outcome">): SetWeightsResult => ({
      mode,
      txHash: undefined,
      blockHash: undefined,
      blockNumber: undefined,
      errorName: undefined,
      errorKind: r.errorName ? weightsErrorKind(r.errorName) : undefined,
      message: undefined,
      nonce: undefined,
      resubmissions: 0,
      revealRound: undefined,
      ...r,
    });
    // Build and sign. Failures here are connection problems: retryable, nothing was sent.
    let tx: SubmittableExtrinsic<"promise">;
    let nonce: number;
    let fromBlock: number;
    let revealRound: number | undefined;
    try {
      const header = await api.rpc.chain.getHeader();
      fromBlock = header.number.toNumber();
      const at = await api.at(header.hash);
      const q = at.query.subtensorModule!;
      const commitReveal = toBool(await q.commitRevealWeightsEnabled!(netuid));
      const txs = api.tx.subtensorModule!;
      if (!commitReveal) {
        tx = txs.setWeights!(netuid, uids, weights, versionKey);
      } else {
        const built = await this.buildCommit(api, q, netuid, uids, weights, versionKey, fromBlock, hotkey);
        if ("unsupported" in built)
          return result({
            outcome: "rejected",
            errorName: "CommitRevealUnsupported",
            message: built.unsupported,
          });
        ({ tx, mode, revealRound } = built);
      }
      nonce = (await api.rpc.system.accountNextIndex(hotkey.ss58)).toNumber();
      await tx.signAsync(hotkey.keyringPair(), { nonce, era: this.opts.eraPeriod });
    } catch (err) {
      if (err instanceof ValidatorError) throw err;
      throw new InfraError(
        "chain_sign_failed",
        `cannot prepare the weights extrinsic: ${(err as Error).message}`,
        { cause: err },
      );
    }
    const hex = tx.toHex();
    const txHash = tx.hash.toHex();
    // The era was anchored at the header polkadot-js signed against (≥ fromBlock): its birth is the
    // first block ≥ fromBlock in the era's phase; from birth + period on it can never be included.
    let eraDeath = Number.POSITIVE_INFINITY;
    if (tx.era.isMortalEra) {
      const period = tx.era.asMortalEra.period.toNumber();
      const phase = tx.era.asMortalEra.phase.toNumber();
      eraDeath = fromBlock + ((((phase - fromBlock) % period) + period) % period) + period;
    }
    log.info(
      { mode, txHash, nonce, from: fromBlock, uids: uids.length, revealRound },
      "chain.weights.submit",
    );
    const track = await this.track(api, { hex, txHash, fromBlock, eraDeath, deadline, signal, log });
    const out = result({ ...track, txHash, nonce, revealRound });
    log.info(
      {
        outcome: out.outcome,
        txHash,
        block: out.blockNumber,
        error: out.errorName,
        resubmissions: out.resubmissions,
      },
      "chain.weights.result",
    );
    return out;
  }

  private async buildCommit(
    api: ApiPromise,
    q: QueryableModuleStorage<"promise">,
    netuid: number,
    uids: number[],
    values: number[],
    versionKey: number,
    head: number,
    hotkey: Hotkey,
  ): Promise<
    { tx: SubmittableExtrinsic<"promise">; mode: WeightsMode; revealRound: number } | { unsupported: string }
  > {
    const txs = api.tx.subtensorModule!;
    const tempo = toNum(await q.tempo!(netuid));
    const reveal = typeof q.revealPeriodEpochs === "function" ? toNum(await q.revealPeriodEpochs(netuid)) : 1;
    const round = {
      tempo,
      currentBlock: head,
      netuid,
      revealPeriodEpochs: reveal,
      blockTimeS: this.opts.blockTimeS,
      nowS: this.opts.nowS?.() ?? Date.now() / 1000,
    };
    if (typeof txs.commitTimelockedWeights === "function") {
      const c = await buildTimelockedCommit(
        { hotkey: hotkey.keyringPair().publicKey, uids, values, versionKey },
        round,
      );
      const version =
        typeof q.commitRevealWeightsVersion === "function"
          ? toNum(
              await q.commitRevealWeightsVersion(
                ...(q.commitRevealWeightsVersion.creator.meta.type.isPlain ? [] : [netuid]),
              ),
            )
          : 4;
      // Hex, not Uint8Array: polkadot-js reads a Uint8Array given for Bytes as already length-prefixed.
      const args: unknown[] = [netuid, u8aToHex(c.commit), c.revealRound];
      if (txs.commitTimelockedWeights.meta.args.length >= 4) args.push(version);
      return {
        tx: txs.commitTimelockedWeights(...args),
        mode: "commit_timelocked_weights",
        revealRound: c.revealRound,
      };
    }
    if (typeof txs.commitCrv3Weights === "function") {
      const c = await buildTimelockedCommit({ uids, values, versionKey }, round);
      return {
        tx: txs.commitCrv3Weights(netuid, u8aToHex(c.commit), c.revealRound),
        mode: "commit_crv3_weights",
        revealRound: c.revealRound,
      };
    }
    return { unsupported: "commit-reveal is enabled but the runtime offers no timelocked commit call" };
  }

  /** Submit and follow one signed extrinsic to a definite outcome, across reconnects. */
  private async track(
    api: ApiPromise,
    t: {
      hex: string;
      txHash: string;
      fromBlock: number;
      eraDeath: number;
      deadline: number;
      signal: AbortSignal | undefined;
      log: Logger;
    },
  ): Promise<Partial<SetWeightsResult> & Pick<SetWeightsResult, "outcome">> {
    let resubmissions = 0;
    let scannedTo = t.fromBlock;
    // Set when a watch lost its socket: the node may or may not have the bytes. Sending the same
    // signed bytes again is always safe (same hash, same nonce), so we do, once per loss.
    let needsResend = false;
    const aborted = () => ({
      outcome: "aborted" as const,
      message: "aborted by the caller; the extrinsic may still be included",
      resubmissions,
    });
    const found = (b: InBlock) => ({
      outcome: b.success ? ("included" as const) : ("failed" as const),
      blockHash: b.blockHash,
      blockNumber: b.blockNumber,
      errorName: b.errorName,
      resubmissions,
    });
    let w = await this.watch(api, t.hex, t.deadline, t.signal);
    for (;;) {
      switch (w.kind) {
        case "inBlock":
          try {
            const b = await this.inBlock(api, w.blockHash, t.txHash);
            if (b) return found(b);
          } catch (err) {
            t.log.warn({ err: (err as Error).message }, "chain.weights.inblock_read_failed");
          }
          break;
        case "rejected":
          // After a resend, "already pooled" or "nonce already used" means the first send landed.
          if (resubmissions === 0 || !BENIGN_ON_RESEND.has(w.name))
            return { outcome: "rejected", errorName: w.name, message: w.message, resubmissions };
          break;
        case "dropped":
          return {
            outcome: "rejected",
            errorName: w.status,
            message: `the pool reported ${w.status}`,
            resubmissions,
          };
        case "aborted":
          return aborted();
        case "deadline":
          return {
            outcome: "timeout",
            message: "no inclusion seen before the deadline; it may still land",
            resubmissions,
          };
        case "disconnected":
          needsResend = true;
          break;
      }
      // Lost sight of it: look for it in every block since signing, resend once per lost socket.
      let next: WatchResult | undefined;
      while (!next) {
        if (t.signal?.aborted) return aborted();
        if (performance.now() >= t.deadline)
          return {
            outcome: "timeout",
            message: "no inclusion found before the deadline; it may still land",
            resubmissions,
          };
        try {
          const head = (
            await this.withDeadline(api.rpc.chain.getHeader(), 5_000, t.signal, "chain_request_timeout")
          ).number.toNumber();
          for (let n = scannedTo + 1; n <= head; n++) {
            const b = await this.inBlock(api, (await api.rpc.chain.getBlockHash(n)).toHex(), t.txHash);
            if (b) {
              t.log.info({ block: n, resubmissions }, "chain.weights.found_after_reconnect");
              return found(b);
            }
            scannedTo = n;
          }
          if (head >= t.eraDeath)
            return {
              outcome: "rejected",
              errorName: "EraExpired",
              message: "the extrinsic's era ended without inclusion",
              resubmissions,
            };
          if (needsResend) {
            needsResend = false;
            resubmissions++;
            t.log.warn({ resubmissions }, "chain.weights.resend");
            next = await this.watch(api, t.hex, t.deadline, t.signal);
            break;
          }
        } catch (err) {
          if (isAbortError(err)) return aborted();
          t.log.debug({ err: (err as Error).message }, "chain.weights.scan_failed");
        }
        await sleep(this.opts.pollIntervalMs, t.signal);
      }
      w = next;
    }
  }

  /** submitAndWatch until InBlock/Finalized, a pool verdict, a lost socket, the deadline or the signal. */
  private watch(
    api: ApiPromise,
    hex: string,
    deadline: number,
    signal: AbortSignal | undefined,
  ): Promise<WatchResult> {
    return new Promise<WatchResult>((resolve) => {
      if (signal?.aborted) return resolve({ kind: "aborted" });
      let settled = false;
      let unsub: (() => void) | undefined;
      const onDisconnected = () => finish({ kind: "disconnected" });
      const onAbort = () => finish({ kind: "aborted" });
      const timer = setTimeout(() => finish({ kind: "deadline" }), Math.max(0, deadline - performance.now()));
      api.on("disconnected", onDisconnected);
      signal?.addEventListener("abort", onAbort, { once: true });
      function finish(r: WatchResult) {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        api.off("disconnected", onDisconnected);
        try {
          unsub?.();
        } catch {
          // the subscription died with its socket
        }
        resolve(r);
      }
      const provider = this.provider;
      if (!api.isConnected || !provider) return finish({ kind: "disconnected" });
      // Straight to the provider, not api.rpc: rpc-core memoizes subscriptions by their params, so
      // re-sending the same bytes after a lost socket would silently reuse the dead subscription.
      provider
        .subscribe(
          "author_extrinsicUpdate",
          "author_submitAndWatchExtrinsic",
          [hex],
          (error, status: unknown) => {
            if (error) return;
            const s = extrinsicStatus(status);
            if ((s.kind === "inBlock" || s.kind === "finalized") && s.hash)
              finish({ kind: "inBlock", blockHash: s.hash });
            else if (s.kind === "invalid" || s.kind === "dropped" || s.kind === "usurped")
              finish({ kind: "dropped", status: s.kind });
          },
        )
        .then((id) => {
          unsub = () => {
            provider.unsubscribe("author_extrinsicUpdate", "author_unwatchExtrinsic", id).catch(() => {});
          };
          if (settled) unsub();
        })
        .catch((err: unknown) => {
          const rej = parsePoolRejection(err);
          if (rej)
            finish({
              kind: "rejected",
              name: rej.name,
              message: rej.message,
              ...(rej.custom === undefined ? {} : { custom: rej.custom }),
            });
          else finish({ kind: "disconnected" });
        });
    });
  }

  /** Where the extrinsic sits in this block and what its events say; undefined if it is not there. */
  private async inBlock(api: ApiPromise, blockHash: string, txHash: string): Promise<InBlock | undefined> {
    const signed = await api.rpc.chain.getBlock(blockHash);
    const index = signed.block.extrinsics.findIndex((ex) => ex.hash.toHex() === txHash);
    if (index < 0) return undefined;
    const at = await api.at(blockHash);
    const records = (await at.query.system!.events!()) as unknown as Array<{
      phase: { isApplyExtrinsic: boolean; asApplyExtrinsic: { toNumber(): number } };
      event: { section: string; method: string; data: Codec[] };
    }>;
    const mine = records.filter(
      (r) => r.phase.isApplyExtrinsic && r.phase.asApplyExtrinsic.toNumber() === index,
    );
    const failed = mine.find((r) => r.event.section === "system" && r.event.method === "ExtrinsicFailed");
    let errorName: string | undefined;
    if (failed) errorName = dispatchErrorName(api, failed.event.data[0]!);
    return {
      blockHash,
      blockNumber: signed.block.header.number.toNumber(),
      success:
        !failed && mine.some((r) => r.event.section === "system" && r.event.method === "ExtrinsicSuccess"),
      errorName,
      events: mine.map((r) => `${r.event.section}.${r.event.method}`),
    };
  }
}

type StatusKind =
  | "future"
  | "ready"
  | "broadcast"
  | "inBlock"
  | "retracted"
  | "finalityTimeout"
  | "finalized"
  | "usurped"
  | "dropped"
  | "invalid"
  | "unknown";

/** Substrate's TransactionStatus as JSON: "ready" | {"inBlock": hash} | {"finalized": hash} | "dropped" | … */
export function extrinsicStatus(raw: unknown): { kind: StatusKind; hash?: string } {
  const known: StatusKind[] = [
    "future",
    "ready",
    "broadcast",
    "inBlock",
    "retracted",
    "finalityTimeout",
    "finalized",
    "usurped",
    "dropped",
    "invalid",
  ];
  if (typeof raw === "string")
    return { kind: known.includes(raw as StatusKind) ? (raw as StatusKind) : "unknown" };
  if (raw && typeof raw === "object") {
    const [key, value] = Object.entries(raw as Record<string, unknown>)[0] ?? [];
    if (key && known.includes(key as StatusKind))
      return typeof value === "string"
        ? { kind: key as StatusKind, hash: value }
        : { kind: key as StatusKind };
  }
  return { kind: "unknown" };
}

/** A DispatchError's name: module errors through the metadata of the runtime that produced them. */
export function dispatchErrorName(api: ApiPromise, dispatchError: Codec): string {
  const e = dispatchError as unknown as {
    isModule: boolean;
    asModule: Parameters<ApiPromise["registry"]["findMetaError"]>[0];
    type: string;
    value?: { type?: string };
  };
  if (e.isModule) {
    try {
      return api.registry.findMetaError(e.asModule).name;
    } catch {
      return "UnknownModuleError";
    }
  }
  return e.value?.type && e.value.type !== e.type ? `${e.type}.${e.value.type}` : e.type;
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
