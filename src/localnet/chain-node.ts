/**
 * A local subtensor test node: a WebSocket JSON-RPC server (package `ws`) that serves the REAL
 * runtime metadata of a fixture (spec 219 finney or spec 224 testnet), so @polkadot/api connects
 * to it as to a chain. It keeps a small subnet state, answers storage reads with values encoded
 * through the metadata, decodes every submitted extrinsic, verifies its sr25519 signature over the
 * signing payload it rebuilds itself, applies set_weights / commit_crv3_weights the way subtensor
 * does (SettingWeightsTooFast, IncorrectWeightVersionKey, CommitRevealEnabled, …), and includes
 * them in new blocks with real events. It can drop every websocket on demand, and it records every
 * extrinsic it received with its verification result.
 *
 * Loopback unless told otherwise (`trajrl-validator localnet` in a container listens on its network).
 * Blocks are produced when a transaction arrives (after `inclusionDelayMs`), on
 * `produceBlock()`/`advance()`, or every `blockIntervalMs` when set.
 */
import { randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import { compactToU8a, u8aConcat, u8aToHex } from "@polkadot/util";
import { blake2AsHex, decodeAddress, encodeAddress } from "@polkadot/util-crypto";
import { type WebSocket, WebSocketServer } from "ws";
import {
  type ChainContext,
  FakeRuntime,
  type FixtureName,
  loadFixture,
  type ParsedExtrinsic,
  parseAndVerify,
} from "./subtensor-runtime.js";

export type { FixtureName } from "./subtensor-runtime.js";

export interface FakeNeuronSpec {
  hotkey: string;
  coldkey?: string;
  stakeRao?: bigint;
  validatorPermit?: boolean;
  lastUpdate?: number;
}

export interface FakeSubnetSpec {
  netuid: number;
  neurons: FakeNeuronSpec[];
  ownerColdkey: string;
  /** Only stored where the runtime has SubnetOwnerHotkey (spec 224); spec 219 resolves via Owner. */
  ownerHotkey?: string;
  tempo?: number;
  weightsSetRateLimit?: number;
  weightsVersionKey?: number;
  commitRevealEnabled?: boolean;
  minAllowedWeights?: number;
  maxWeightsLimit?: number;
  revealPeriodEpochs?: number;
  /** Stored weight rows (`SubtensorModule.Weights`) by setter uid: (destination uid, u16 value). */
  weights?: Record<number, Array<[number, number]>>;
}

export interface FakeNodeOptions {
  /** Where to listen: loopback and any free port unless told (localnet in a container: 0.0.0.0). */
  host?: string;
  port?: number;
  fixture?: FixtureName;
  subnets: FakeSubnetSpec[];
  startBlock?: number;
  inclusionDelayMs?: number;
  blockIntervalMs?: number;
}

export interface ReceivedExtrinsic {
  receivedAt: number;
  hash: string;
  hex: string;
  signer: string | undefined;
  nonce: number | undefined;
  call: { section: string; method: string; args: Record<string, unknown> } | undefined;
  signatureValid: boolean;
  verifyError: string | undefined;
  /** "accepted" or the pool rejection ("1010: Invalid Transaction: …"). */
  pool: string;
  /** After inclusion: "success" or the dispatch error's name. */
  outcome: string | undefined;
  blockNumber: number | undefined;
}

interface NeuronState {
  hotkey: string;
  coldkey: string;
  stakeRao: bigint;
  validatorPermit: boolean;
  lastUpdate: number;
}

interface SubnetState {
  netuid: number;
  neurons: NeuronState[];
  ownerColdkey: string;
  ownerHotkey: string | undefined;
  tempo: number;
  weightsSetRateLimit: number;
  weightsVersionKey: number;
  commitRevealEnabled: boolean;
  minAllowedWeights: number;
  maxWeightsLimit: number;
  revealPeriodEpochs: number;
  weights: Map<number, { uids: number[]; values: number[] }>;
  commits: { who: string; commit: string; revealRound: number; block: number }[];
}

interface Block {
  number: number;
  hash: string;
  header: {
    parentHash: string;
    number: string;
    stateRoot: string;
    extrinsicsRoot: string;
    digest: { logs: string[] };
  };
  extrinsics: string[];
  storage: Map<string, string>;
}

interface PoolTx {
  parsed: ParsedExtrinsic;
  record: ReceivedExtrinsic;
}

interface Sub {
  ws: WebSocket;
  id: string;
  kind: "newHead" | "finalizedHead" | "allHead" | "runtimeVersion" | "storage" | "extrinsic";
  keys?: string[];
  txHash?: string;
}

class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: string,
  ) {
    super(message);
  }
}

const NOTIFY: Record<Sub["kind"], string> = {
  newHead: "chain_newHead",
  finalizedHead: "chain_finalizedHead",
  allHead: "chain_allHead",
  runtimeVersion: "state_runtimeVersion",
  storage: "state_storage",
  extrinsic: "author_extrinsicUpdate",
};

const hex32 = () => u8aToHex(randomBytes(32));

export class FakeSubtensorNode {
  readonly runtime: FakeRuntime;
  readonly received: ReceivedExtrinsic[] = [];
  /** Every JSON-RPC method called, in order (for "what does the client ask" assertions). */
  readonly rpcCalls: string[] = [];
  /**
   * Drop the websocket on the next submitAndWatch: right after accepting it ("after-accept"),
   * instead of answering it ("before-accept"), or after accepting it and then losing it from the
   * pool as a restarting node would ("accept-and-lose").
   */
  dropOnNextSubmit: "after-accept" | "before-accept" | "accept-and-lose" | undefined;
  /** Reject the next submission from the pool with this custom code ("1010: Invalid Transaction: Custom error: N"). */
  rejectNextWithCustom: number | undefined;
  /** Accept transactions but do not produce blocks for them until released. */
  holdInclusion = false;
  connections = 0;

  private readonly subnets = new Map<number, SubnetState>();
  private readonly nonces = new Map<string, number>();
  private readonly blocks: Block[] = [];
  private readonly byHash = new Map<string, Block>();
  private readonly genesis: Block;
  private pool: PoolTx[] = [];
  private readonly subs = new Map<string, Sub>();
  private readonly sockets = new Set<WebSocket>();
  private nextSubId = 1;
  private wss!: WebSocketServer;
  private inclusionTimer: NodeJS.Timeout | undefined;
  private intervalTimer: NodeJS.Timeout | undefined;
  private readonly inclusionDelayMs: number;
  url = "";

  private constructor(opts: FakeNodeOptions) {
    this.runtime = new FakeRuntime(loadFixture(opts.fixture ?? "finney-spec219"));
    this.inclusionDelayMs = opts.inclusionDelayMs ?? 30;
    for (const s of opts.subnets) {
      this.subnets.set(s.netuid, {
        netuid: s.netuid,
        neurons: s.neurons.map((n) => ({
          hotkey: n.hotkey,
          coldkey: n.coldkey ?? n.hotkey,
          stakeRao: n.stakeRao ?? 1_000_000_000n,
          validatorPermit: n.validatorPermit ?? false,
          lastUpdate: n.lastUpdate ?? 0,
        })),
        ownerColdkey: s.ownerColdkey,
        ownerHotkey: s.ownerHotkey,
        tempo: s.tempo ?? 360,
        weightsSetRateLimit: s.weightsSetRateLimit ?? 100,
        weightsVersionKey: s.weightsVersionKey ?? 0,
        commitRevealEnabled: s.commitRevealEnabled ?? false,
        minAllowedWeights: s.minAllowedWeights ?? 1,
        maxWeightsLimit: s.maxWeightsLimit ?? 65535,
        revealPeriodEpochs: s.revealPeriodEpochs ?? 1,
        weights: new Map(
          Object.entries(s.weights ?? {}).map(([uid, row]) => [
            Number(uid),
            { uids: row.map(([u]) => u), values: row.map(([, v]) => v) },
          ]),
        ),
        commits: [],
      });
    }
    const f = this.runtime.fixture;
    this.genesis = {
      number: 0,
      hash: f.genesisHash,
      header: {
        parentHash: `0x${"00".repeat(32)}`,
        number: "0x0",
        stateRoot: hex32(),
        extrinsicsRoot: hex32(),
        digest: { logs: [] },
      },
      extrinsics: [],
      storage: new Map(),
    };
    this.byHash.set(this.genesis.hash, this.genesis);
    this.buildBlock(opts.startBlock ?? 5000, this.genesis.hash, [], []);
  }

  static async start(opts: FakeNodeOptions): Promise<FakeSubtensorNode> {
    const node = new FakeSubtensorNode(opts);
    await node.listen(opts.host ?? "127.0.0.1", opts.port ?? 0);
    if (opts.blockIntervalMs)
      node.intervalTimer = setInterval(() => node.produceBlock(), opts.blockIntervalMs);
    return node;
  }

  private async listen(host: string, port: number): Promise<void> {
    this.wss = new WebSocketServer({ host, port });
    await new Promise<void>((resolve, reject) => {
      this.wss.once("listening", resolve);
      this.wss.once("error", reject);
    });
    const shown = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
    this.url = `ws://${shown}:${(this.wss.address() as AddressInfo).port}`;
    this.wss.on("connection", (ws) => {
      this.connections++;
      this.sockets.add(ws);
      ws.on("message", (data) => this.onMessage(ws, data.toString()));
      ws.on("close", () => {
        this.sockets.delete(ws);
        for (const [id, s] of this.subs) if (s.ws === ws) this.subs.delete(id);
      });
      ws.on("error", () => {});
    });
  }

  async stop(): Promise<void> {
    clearInterval(this.intervalTimer);
    clearTimeout(this.inclusionTimer);
    for (const ws of this.sockets) ws.terminate();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }

  /** Abruptly close every client connection (code 1006 on the client side). */
  dropConnections(): void {
    for (const ws of this.sockets) ws.terminate();
  }

  get head(): { number: number; hash: string } {
    const b = this.blocks.at(-1)!;
    return { number: b.number, hash: b.hash };
  }

  blockHash(n: number): string | undefined {
    if (n === 0) return this.genesis.hash;
    return this.blocks.find((b) => b.number === n)?.hash;
  }

  /** Extrinsics (hex) of the block with this number. */
  blockExtrinsics(n: number): string[] {
    return this.blocks.find((b) => b.number === n)?.extrinsics ?? [];
  }

  subnet(netuid: number): SubnetState {
    const s = this.subnets.get(netuid);
    if (!s) throw new Error(`fake node: no subnet ${netuid}`);
    return s;
  }

  nonceOf(ss58: string): number {
    return this.nonces.get(u8aToHex(decodeAddress(ss58))) ?? 0;
  }

  /** Produce `n` blocks (including whatever is in the pool). */
  advance(n: number): void {
    for (let i = 0; i < n; i++) this.produceBlock();
  }

  /** Store a weight row for `uid` (as a set_weights by that neuron would), served from the next block on. */
  setWeightsRow(netuid: number, uid: number, row: Array<[number, number]>): void {
    this.subnet(netuid).weights.set(uid, { uids: row.map(([u]) => u), values: row.map(([, v]) => v) });
  }

  /** Raw storage served instead of the state's encoding from the next block on (hex, or null: absent). */
  private readonly corrupted = new Map<string, string | null>();

  /**
   * Serve `hex` (raw SCALE bytes, possibly garbage) for a storage item from the next block on, as a
   * broken or hostile node would; `null` removes the entry. `undefined` restores the real encoding.
   */
  corruptStorage(pallet: string, item: string, keys: unknown[], hex: string | null | undefined): void {
    const key = this.runtime.storageKey(pallet, item, ...keys);
    if (hex === undefined) this.corrupted.delete(key);
    else this.corrupted.set(key, hex);
  }

  // ---------------------------------------------------------------- state → storage

  private storageFor(events: { extrinsic: number; event: Uint8Array }[]): Map<string, string> {
    const rt = this.runtime;
    const m = new Map<string, string>();
    const put = (pallet: string, item: string, keys: unknown[], value: unknown) => {
      if (rt.hasStorage(pallet, item))
        m.set(rt.storageKey(pallet, item, ...keys), rt.storageValue(pallet, item, value));
    };
    m.set(rt.storageKey("System", "Events"), rt.encodeEventRecords(events));
    const accounts = new Set<string>(this.nonces.keys());
    for (const s of this.subnets.values()) {
      const n = s.neurons.length;
      put("SubtensorModule", "NetworksAdded", [s.netuid], true);
      put("SubtensorModule", "SubnetworkN", [s.netuid], n);
      put("SubtensorModule", "Tempo", [s.netuid], s.tempo);
      put("SubtensorModule", "WeightsSetRateLimit", [s.netuid], s.weightsSetRateLimit);
      put("SubtensorModule", "WeightsVersionKey", [s.netuid], s.weightsVersionKey);
      put("SubtensorModule", "CommitRevealWeightsEnabled", [s.netuid], s.commitRevealEnabled);
      put("SubtensorModule", "MinAllowedWeights", [s.netuid], s.minAllowedWeights);
      put("SubtensorModule", "MaxWeightsLimit", [s.netuid], s.maxWeightsLimit);
      put("SubtensorModule", "RevealPeriodEpochs", [s.netuid], s.revealPeriodEpochs);
      put("SubtensorModule", "SubnetOwner", [s.netuid], s.ownerColdkey);
      if (s.ownerHotkey) put("SubtensorModule", "SubnetOwnerHotkey", [s.netuid], s.ownerHotkey);
      put(
        "SubtensorModule",
        "ValidatorPermit",
        [s.netuid],
        s.neurons.map((x) => x.validatorPermit),
      );
      put(
        "SubtensorModule",
        "LastUpdate",
        [s.netuid],
        s.neurons.map((x) => x.lastUpdate),
      );
      for (const [uid, row] of s.weights)
        put(
          "SubtensorModule",
          "Weights",
          [s.netuid, uid],
          row.uids.map((u, i) => [u, row.values[i]]),
        );
      s.neurons.forEach((x, uid) => {
        put("SubtensorModule", "Keys", [s.netuid, uid], x.hotkey);
        put("SubtensorModule", "Uids", [s.netuid, x.hotkey], uid);
        put("SubtensorModule", "Owner", [x.hotkey], x.coldkey);
        put("SubtensorModule", "TotalHotkeyStake", [x.hotkey], x.stakeRao);
        put("SubtensorModule", "TotalHotkeyAlpha", [x.hotkey, s.netuid], x.stakeRao);
        accounts.add(u8aToHex(decodeAddress(x.hotkey)));
      });
    }
    for (const pk of accounts)
      put("System", "Account", [pk], {
        nonce: this.nonces.get(pk) ?? 0,
        providers: 1,
        data: { free: 1_000_000_000_000n },
      });
    for (const [k, v] of this.corrupted) {
      if (v === null) m.delete(k);
      else m.set(k, v);
    }
    return m;
  }

  private buildBlock(
    number: number,
    parentHash: string,
    extrinsics: string[],
    events: { extrinsic: number; event: Uint8Array }[],
  ): Block {
    const storage = this.storageFor(events);
    const header = {
      parentHash,
      number: `0x${number.toString(16)}`,
      stateRoot: blake2AsHex(
        u8aConcat(...[...storage.entries()].flat().map((h) => Buffer.from(h.slice(2), "hex"))),
      ),
      extrinsicsRoot: blake2AsHex(u8aConcat(...extrinsics.map((h) => Buffer.from(h.slice(2), "hex")))),
      digest: { logs: [] as string[] },
    };
    // The hash polkadot-js computes for itself: blake2-256 of the SCALE header.
    const hash = this.runtime.registry.createType("Header", { ...header, number }).hash.toHex();
    const block: Block = { number, hash, header, extrinsics, storage };
    this.blocks.push(block);
    this.byHash.set(hash, block);
    return block;
  }

  /** Build the next block from the pool; notify subscribers and watchers. */
  produceBlock(): Block {
    clearTimeout(this.inclusionTimer);
    this.inclusionTimer = undefined;
    const parent = this.blocks.at(-1)!;
    const number = parent.number + 1;
    const rt = this.runtime;
    const txs = this.pool;
    this.pool = [];
    const inherent = u8aToHex(rt.timestampInherent(Date.now()));
    const extrinsics: string[] = [inherent];
    const events: { extrinsic: number; event: Uint8Array }[] = [
      {
        extrinsic: 0,
        event: rt.encodeEvent("System", "ExtrinsicSuccess", [
          { weight: { refTime: 1, proofSize: 0 }, class: "Mandatory", paysFee: "Yes" },
        ]),
      },
    ];
    for (const tx of txs) {
      const index = extrinsics.length;
      extrinsics.push(tx.parsed.hex);
      const pk = tx.parsed.signerPublicKey!;
      this.nonces.set(pk, (this.nonces.get(pk) ?? 0) + 1);
      const info = { weight: { refTime: 100_000, proofSize: 0 }, class: "Normal", paysFee: "No" };
      const result = this.dispatch(tx.parsed, number);
      for (const e of result.events) events.push({ extrinsic: index, event: e });
      if (result.error === undefined) {
        events.push({ extrinsic: index, event: rt.encodeEvent("System", "ExtrinsicSuccess", [info]) });
        tx.record.outcome = "success";
      } else {
        const error = new Uint8Array(4);
        error[0] = rt.errorIndex("SubtensorModule", result.error);
        const dispatchError = {
          Module: { index: rt.pallet("SubtensorModule").index.toNumber(), error: u8aToHex(error) },
        };
        events.push({
          extrinsic: index,
          event: rt.encodeEvent("System", "ExtrinsicFailed", [dispatchError, info]),
        });
        tx.record.outcome = result.error;
      }
      tx.record.blockNumber = number;
    }
    const block = this.buildBlock(number, parent.hash, extrinsics, events);
    for (const s of [...this.subs.values()]) {
      if (s.kind === "newHead" || s.kind === "finalizedHead" || s.kind === "allHead")
        this.notify(s, block.header);
      if (s.kind === "storage") this.notify(s, this.storageChange(block, s.keys));
    }
    for (const tx of txs)
      for (const s of [...this.subs.values()])
        if (s.kind === "extrinsic" && s.txHash === tx.parsed.hash) {
          this.notify(s, { inBlock: block.hash });
          this.notify(s, { finalized: block.hash });
        }
    return block;
  }

  // ---------------------------------------------------------------- dispatch (subtensor semantics)

  private dispatch(tx: ParsedExtrinsic, blockNumber: number): { error?: string; events: Uint8Array[] } {
    const rt = this.runtime;
    const call = rt.decodeCall(tx.call);
    const who = tx.signer!;
    const fail = (error: string) => ({ error, events: [] });
    if (call.section !== "subtensorModule") return { events: [] };
    const netuid = Number(call.args.netuid);
    const s = this.subnets.get(netuid);
    if (!s) return fail("SubNetworkDoesNotExist");
    const uid = s.neurons.findIndex((n) => n.hotkey === who);
    if (call.method === "setWeights") {
      const dests = (call.args.dests as number[]).map(Number);
      const values = (call.args.weights as number[]).map(Number);
      const versionKey = Number(call.args.version_key);
      if (s.commitRevealEnabled) return fail("CommitRevealEnabled");
      if (dests.length !== values.length) return fail("WeightVecNotEqualSize");
      if (dests.length > s.neurons.length) return fail("UidsLengthExceedUidsInSubNet");
      if (uid < 0) return fail("HotKeyNotRegisteredInSubNet");
      if (s.weightsVersionKey !== 0 && versionKey < s.weightsVersionKey)
        return fail("IncorrectWeightVersionKey");
      const neuron = s.neurons[uid]!;
      const selfOnly = dests.length === 1 && dests[0] === uid;
      if (!selfOnly && !neuron.validatorPermit) return fail("NeuronNoValidatorPermit");
      if (neuron.lastUpdate !== 0 && blockNumber - neuron.lastUpdate < s.weightsSetRateLimit)
        return fail("SettingWeightsTooFast");
      if (new Set(dests).size !== dests.length) return fail("DuplicateUids");
      if (dests.some((d) => d >= s.neurons.length)) return fail("UidVecContainInvalidOne");
      if (!selfOnly && dests.length < Math.min(s.minAllowedWeights, s.neurons.length))
        return fail("WeightVecLengthIsLow");
      neuron.lastUpdate = blockNumber;
      s.weights.set(uid, { uids: dests, values });
      return { events: [rt.encodeEvent("SubtensorModule", "WeightsSet", [netuid, uid])] };
    }
    if (call.method === "commitCrv3Weights" || call.method === "commitTimelockedWeights") {
      if (!s.commitRevealEnabled) return fail("CommitRevealDisabled");
      if (uid < 0) return fail("HotKeyNotRegisteredInSubNet");
      const neuron = s.neurons[uid]!;
      if (neuron.lastUpdate !== 0 && blockNumber - neuron.lastUpdate < s.weightsSetRateLimit)
        return fail("CommittingWeightsTooFast");
      const commit = String(call.args.commit);
      s.commits.push({ who, commit, revealRound: Number(call.args.reveal_round), block: blockNumber });
      neuron.lastUpdate = blockNumber;
      const name =
        call.method === "commitCrv3Weights" ? "CRV3WeightsCommitted" : "TimelockedWeightsCommitted";
      return {
        events: rt.hasEvent("SubtensorModule", name)
          ? [rt.encodeEvent("SubtensorModule", name, [who, netuid, blake2AsHex(commit)])]
          : [],
      };
    }
    return { events: [] };
  }

  // ---------------------------------------------------------------- JSON-RPC

  private runtimeVersion() {
    const f = this.runtime.fixture;
    return {
      specName: f.specName,
      implName: f.specName,
      authoringVersion: 1,
      specVersion: f.specVersion,
      implVersion: 1,
      apis: [
        ["0xdf6acb689907609b", 5], // Core
        ["0x37e397fc7c91f5e4", 2], // Metadata (v2: metadata_versions)
        ["0x40fe3ad401f8959a", 6], // BlockBuilder
        ["0xd2bc9897eed08f15", 3], // TaggedTransactionQueue
        ["0xbc9d89904f5b923f", 1], // AccountNonceApi
        ["0x37c8bb1350a9a2a8", 4], // TransactionPaymentApi
      ],
      transactionVersion: f.txVersion,
      stateVersion: 1,
    };
  }

  private blockAt(at: unknown): Block {
    if (at === undefined || at === null) return this.blocks.at(-1)!;
    const b = this.byHash.get(String(at));
    if (!b)
      throw new RpcError(
        4003,
        `Client error: UnknownBlock: Header was not found in the database: ${String(at)}`,
      );
    return b.number === 0 ? this.blocks[0]! : b;
  }

  private storageChange(block: Block, keys: string[] | undefined) {
    const ks = keys ?? [];
    return { block: block.hash, changes: ks.map((k) => [k, block.storage.get(k) ?? null]) };
  }

  private chainContext(): ChainContext {
    const f = this.runtime.fixture;
    return {
      genesisHash: f.genesisHash,
      specVersion: f.specVersion,
      txVersion: f.txVersion,
      currentBlock: this.head.number + 1,
      blockHashAt: (n) => this.blockHash(n),
    };
  }

  private subscribe(ws: WebSocket, kind: Sub["kind"], extra: Partial<Sub> = {}): string {
    const id = `0x${(this.nextSubId++).toString(16).padStart(16, "0")}`;
    this.subs.set(id, { ws, id, kind, ...extra });
    return id;
  }

  private notify(s: Sub, result: unknown): void {
    if (s.ws.readyState !== s.ws.OPEN) return;
    s.ws.send(
      JSON.stringify({ jsonrpc: "2.0", method: NOTIFY[s.kind], params: { subscription: s.id, result } }),
    );
  }

  private submit(hex: string): PoolTx {
    const record: ReceivedExtrinsic = {
      receivedAt: Date.now(),
      hash: blake2AsHex(Buffer.from(hex.slice(2), "hex")),
      hex,
      signer: undefined,
      nonce: undefined,
      call: undefined,
      signatureValid: false,
      verifyError: undefined,
      pool: "accepted",
      outcome: undefined,
      blockNumber: undefined,
    };
    this.received.push(record);
    const reject = (code: number, message: string, data?: string) => {
      record.pool = `${code}: ${message}${data ? `: ${data}` : ""}`;
      return new RpcError(code, message, data);
    };
    let parsed: ParsedExtrinsic;
    try {
      parsed = parseAndVerify(this.runtime, hex, this.chainContext());
    } catch (err) {
      record.verifyError = (err as Error).message;
      if (/ancient birth block/.test(record.verifyError))
        throw reject(1010, "Invalid Transaction", "Transaction has an ancient birth block");
      throw reject(1002, "Verification Error", `Runtime error: Could not decode: ${record.verifyError}`);
    }
    record.signer = parsed.signer;
    record.nonce = parsed.nonce;
    record.signatureValid = parsed.signatureValid;
    record.verifyError = parsed.verifyError;
    try {
      record.call = this.runtime.decodeCall(parsed.call);
    } catch (err) {
      throw reject(
        1002,
        "Verification Error",
        `Runtime error: Could not decode call: ${(err as Error).message}`,
      );
    }
    if (!parsed.signed) throw reject(1010, "Invalid Transaction", "Transaction call is not expected");
    if (!parsed.signatureValid) throw reject(1010, "Invalid Transaction", "Transaction has a bad signature");
    if (this.pool.some((t) => t.parsed.hash === parsed.hash))
      throw reject(1013, "Transaction Already Imported");
    const pk = parsed.signerPublicKey!;
    const stateNonce = this.nonces.get(pk) ?? 0;
    const pooled = this.pool.filter((t) => t.parsed.signerPublicKey === pk).length;
    if (parsed.nonce! < stateNonce) throw reject(1010, "Invalid Transaction", "Transaction is outdated");
    if (parsed.nonce! < stateNonce + pooled) throw reject(1014, "Priority is too low", "(0 vs 0)");
    if (parsed.nonce! > stateNonce + pooled)
      throw reject(1010, "Invalid Transaction", "Transaction will be valid in the future");
    if (this.rejectNextWithCustom !== undefined) {
      const n = this.rejectNextWithCustom;
      this.rejectNextWithCustom = undefined;
      throw reject(1010, "Invalid Transaction", `Custom error: ${n}`);
    }
    const tx = { parsed, record };
    this.pool.push(tx);
    if (!this.holdInclusion) {
      clearTimeout(this.inclusionTimer);
      this.inclusionTimer = setTimeout(() => this.produceBlock(), this.inclusionDelayMs);
    }
    return tx;
  }

  /** Let held transactions be included (see holdInclusion). */
  release(): void {
    this.holdInclusion = false;
    if (this.pool.length > 0) this.produceBlock();
  }

  private onMessage(ws: WebSocket, text: string): void {
    let req: { id?: number | string; method?: string; params?: unknown[] };
    try {
      req = JSON.parse(text);
    } catch {
      return;
    }
    const { id, method = "" } = req;
    const params = Array.isArray(req.params) ? req.params : [];
    this.rpcCalls.push(method);
    const reply = (result: unknown) => {
      if (ws.readyState === ws.OPEN) ws.send(JSON.stringify({ jsonrpc: "2.0", id, result }));
    };
    const replyError = (e: RpcError) => {
      if (ws.readyState === ws.OPEN)
        ws.send(
          JSON.stringify({
            jsonrpc: "2.0",
            id,
            error: { code: e.code, message: e.message, ...(e.data ? { data: e.data } : {}) },
          }),
        );
    };
    try {
      if (method === "author_submitAndWatchExtrinsic") {
        if (this.dropOnNextSubmit === "before-accept") {
          this.dropOnNextSubmit = undefined;
          ws.terminate();
          return;
        }
        const tx = this.submit(String(params[0]));
        const sid = this.subscribe(ws, "extrinsic", { txHash: tx.parsed.hash });
        reply(sid);
        this.notify(this.subs.get(sid)!, "ready");
        if (this.dropOnNextSubmit === "accept-and-lose") {
          this.pool = this.pool.filter((t) => t !== tx);
          clearTimeout(this.inclusionTimer);
          tx.record.pool = "accepted, then lost";
        }
        if (this.dropOnNextSubmit === "after-accept" || this.dropOnNextSubmit === "accept-and-lose") {
          this.dropOnNextSubmit = undefined;
          ws.terminate();
        }
        return;
      }
      reply(this.handle(ws, method, params));
    } catch (err) {
      replyError(
        err instanceof RpcError ? err : new RpcError(-32603, `Internal error: ${(err as Error).message}`),
      );
    }
  }

  private handle(ws: WebSocket, method: string, params: unknown[]): unknown {
    const f = this.runtime.fixture;
    switch (method) {
      case "rpc_methods":
        return { version: 1, methods: [...SUPPORTED] };
      case "system_chain":
        return f.chainName;
      case "system_name":
        return "fake-subtensor";
      case "system_version":
        return "0.0.0-fake";
      case "system_properties":
        return { ss58Format: 42, tokenDecimals: 9, tokenSymbol: "TAO" };
      case "system_health":
        return { peers: 1, isSyncing: false, shouldHavePeers: true };
      case "system_accountNextIndex": {
        const pk = u8aToHex(decodeAddress(String(params[0])));
        return (this.nonces.get(pk) ?? 0) + this.pool.filter((t) => t.parsed.signerPublicKey === pk).length;
      }
      case "chain_getBlockHash": {
        const n = params[0];
        if (n === undefined || n === null) return this.head.hash;
        return this.blockHash(Number(n)) ?? null;
      }
      case "chain_getHeader":
        return params[0] ? (this.byHash.get(String(params[0]))?.header ?? null) : this.blocks.at(-1)!.header;
      case "chain_getFinalizedHead":
      case "chain_getFinalisedHead":
        return this.head.hash;
      case "chain_getBlock": {
        const b = params[0] ? this.byHash.get(String(params[0])) : this.blocks.at(-1);
        return b ? { block: { header: b.header, extrinsics: b.extrinsics }, justifications: null } : null;
      }
      case "chain_subscribeNewHeads":
      case "chain_subscribeNewHead":
      case "chain_subscribeAllHeads":
      case "chain_subscribeFinalizedHeads":
      case "chain_subscribeFinalisedHeads": {
        const kind = method.includes("All")
          ? "allHead"
          : /Finali[sz]ed/.test(method)
            ? "finalizedHead"
            : "newHead";
        const sid = this.subscribe(ws, kind);
        setImmediate(() =>
          this.notify(this.subs.get(sid) ?? ({ ws, id: sid, kind } as Sub), this.blocks.at(-1)!.header),
        );
        return sid;
      }
      case "state_subscribeRuntimeVersion":
      case "chain_subscribeRuntimeVersion": {
        const sid = this.subscribe(ws, "runtimeVersion");
        setImmediate(() =>
          this.notify(
            this.subs.get(sid) ?? ({ ws, id: sid, kind: "runtimeVersion" } as Sub),
            this.runtimeVersion(),
          ),
        );
        return sid;
      }
      case "state_subscribeStorage": {
        const keys = (params[0] as string[] | undefined) ?? [];
        const sid = this.subscribe(ws, "storage", { keys });
        setImmediate(() => {
          const s = this.subs.get(sid);
          if (s) this.notify(s, this.storageChange(this.blocks.at(-1)!, keys));
        });
        return sid;
      }
      case "chain_unsubscribeNewHeads":
      case "chain_unsubscribeNewHead":
      case "chain_unsubscribeAllHeads":
      case "chain_unsubscribeFinalizedHeads":
      case "chain_unsubscribeFinalisedHeads":
      case "state_unsubscribeRuntimeVersion":
      case "chain_unsubscribeRuntimeVersion":
      case "state_unsubscribeStorage":
      case "author_unwatchExtrinsic":
        return this.subs.delete(String(params[0]));
      case "state_getRuntimeVersion":
      case "chain_getRuntimeVersion":
        return this.runtimeVersion();
      case "state_getMetadata":
        return f.metadata;
      case "state_call": {
        const fn = String(params[0]);
        // Metadata_metadata_versions → Vec<u32>: this runtime serves v14 only.
        if (fn === "Metadata_metadata_versions") return "0x040e000000";
        // Metadata_metadata_at_version(u32) → Option<OpaqueMetadata>: Some for 14, None otherwise.
        if (fn === "Metadata_metadata_at_version") {
          const version = Buffer.from(String(params[1]).slice(2), "hex").readUInt32LE(0);
          if (version !== 14) return "0x00";
          const bytes = Buffer.from(f.metadata.slice(2), "hex");
          return u8aToHex(u8aConcat(Uint8Array.of(1), compactToU8a(bytes.length), bytes));
        }
        throw new RpcError(-32000, "Client error: Execution failed", `Exported method ${fn} is not found`);
      }
      case "state_getStorage":
      case "state_getStorageAt":
        return this.blockAt(params[1]).storage.get(String(params[0])) ?? null;
      case "state_queryStorageAt": {
        const b = this.blockAt(params[1]);
        return [this.storageChange(b, params[0] as string[])];
      }
      case "state_getKeysPaged":
      case "state_getKeysPagedAt": {
        const [prefix, count, start, at] = params as [string, number, string | undefined, string | undefined];
        const keys = [...this.blockAt(at).storage.keys()]
          .filter((k) => k.startsWith(prefix) && (!start || k > start))
          .sort();
        return keys.slice(0, Number(count));
      }
      case "author_submitExtrinsic":
        return this.submit(String(params[0])).parsed.hash;
      case "author_pendingExtrinsics":
        return this.pool.map((t) => t.parsed.hex);
      case "payment_queryInfo":
        return { weight: { ref_time: 100_000, proof_size: 0 }, class: "normal", partialFee: "0" };
      default:
        throw new RpcError(-32601, `Method not found: ${method}`);
    }
  }
}

const SUPPORTED = [
  "author_pendingExtrinsics",
  "author_submitAndWatchExtrinsic",
  "author_submitExtrinsic",
  "author_unwatchExtrinsic",
  "chain_getBlock",
  "chain_getBlockHash",
  "chain_getFinalizedHead",
  "chain_getHeader",
  "chain_subscribeAllHeads",
  "chain_subscribeFinalizedHeads",
  "chain_subscribeNewHeads",
  "chain_unsubscribeAllHeads",
  "chain_unsubscribeFinalizedHeads",
  "chain_unsubscribeNewHeads",
  "payment_queryInfo",
  "rpc_methods",
  "state_call",
  "state_getKeysPaged",
  "state_getMetadata",
  "state_getRuntimeVersion",
  "state_getStorage",
  "state_queryStorageAt",
  "state_subscribeRuntimeVersion",
  "state_subscribeStorage",
  "state_unsubscribeRuntimeVersion",
  "state_unsubscribeStorage",
  "system_accountNextIndex",
  "system_chain",
  "system_health",
  "system_name",
  "system_properties",
  "system_version",
];

/** Convenience for tests: an ss58 address of a fresh random account (no key material kept). */
export function randomAccount(): string {
  return encodeAddress(randomBytes(32), 42);
}
