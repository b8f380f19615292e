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
 * Here: the WebSocket server, blocks, the pool and the JSON-RPC methods; the subnet state and
 * subtensor's semantics are chain-state.ts, admission and inclusion chain-extrinsics.ts, the
 * state-free RPC surface chain-rpc.ts, the runtime (metadata, SCALE) subtensor-runtime.ts.
 *
 * Loopback unless told otherwise (`trajrl-validator localnet` in a container listens on its network).
 * Blocks are produced when a transaction arrives (after `inclusionDelayMs`), on
 * `produceBlock()`/`advance()`, or every `blockIntervalMs` when set.
 */
import { randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import { u8aConcat, u8aToHex } from "@polkadot/util";
import { blake2AsHex, decodeAddress, encodeAddress } from "@polkadot/util-crypto";
import { type WebSocket, WebSocketServer } from "ws";
import {
  admitExtrinsic,
  includeExtrinsics,
  type PoolTx,
  type ReceivedExtrinsic,
} from "./chain-extrinsics.js";
import {
  FIXED_ANSWERS,
  methodNotFound,
  NOTIFY,
  RpcError,
  runtimeVersionOf,
  SUBSCRIBE_METHODS,
  type Sub,
  stateCall,
  UNSUBSCRIBE_METHODS,
} from "./chain-rpc.js";
import { ChainState, type FakeSubnetSpec, type SubnetState } from "./chain-state.js";
import { type ChainContext, FakeRuntime, type FixtureName, loadFixture } from "./subtensor-runtime.js";

export type { ReceivedExtrinsic } from "./chain-extrinsics.js";
export type { FakeNeuronSpec, FakeSubnetSpec } from "./chain-state.js";
export type { FixtureName } from "./subtensor-runtime.js";

export interface FakeNodeOptions {
  /** Where to listen: loopback and any free port unless told (localnet in a container: 0.0.0.0). */
  host?: string;
  port?: number;
  fixture?: FixtureName;
  /**
   * The chain's genesis hash: a network's identity to its clients (and part of what every extrinsic
   * signs). Default the fixture's (finney's, testnet's); a local network serves its own.
   */
  genesisHash?: string;
  subnets: FakeSubnetSpec[];
  startBlock?: number;
  inclusionDelayMs?: number;
  blockIntervalMs?: number;
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

  private readonly state: ChainState;
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
    this.state = new ChainState(this.runtime, opts.subnets);
    const f = this.runtime.fixture;
    this.genesis = {
      number: 0,
      hash: opts.genesisHash ?? f.genesisHash,
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
    return this.state.subnet(netuid);
  }

  nonceOf(ss58: string): number {
    return this.state.nonceOf(ss58);
  }

  /** Store a weight row for `uid` (as a set_weights by that neuron would), served from the next block on. */
  setWeightsRow(netuid: number, uid: number, row: Array<[number, number]>): void {
    this.state.setWeightsRow(netuid, uid, row);
  }

  /**
   * Serve `hex` (raw SCALE bytes, possibly garbage) for a storage item from the next block on, as a
   * broken or hostile node would; `null` removes the entry. `undefined` restores the real encoding.
   */
  corruptStorage(pallet: string, item: string, keys: unknown[], hex: string | null | undefined): void {
    this.state.corruptStorage(pallet, item, keys, hex);
  }

  /** Produce `n` blocks (including whatever is in the pool). */
  advance(n: number): void {
    for (let i = 0; i < n; i++) this.produceBlock();
  }

  private buildBlock(
    number: number,
    parentHash: string,
    extrinsics: string[],
    events: { extrinsic: number; event: Uint8Array }[],
  ): Block {
    const storage = this.state.storageFor(events);
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
    const { extrinsics, events } = includeExtrinsics(rt, this.state, txs, number);
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

  // ---------------------------------------------------------------- JSON-RPC

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
      genesisHash: this.genesis.hash,
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
    const tx = admitExtrinsic(
      this.runtime,
      hex,
      this.chainContext(),
      this.pool,
      this.state.nonces,
      this.received,
      () => {
        const n = this.rejectNextWithCustom;
        this.rejectNextWithCustom = undefined;
        return n;
      },
    );
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

  /** One JSON-RPC call: routed by family (fixed answers, system, subscriptions, chain, state, author). */
  private handle(ws: WebSocket, method: string, params: unknown[]): unknown {
    const fixed = FIXED_ANSWERS.get(method);
    if (fixed) return fixed();
    if (method.startsWith("system_")) return this.handleSystem(method, params);
    if (UNSUBSCRIBE_METHODS.has(method)) return this.subs.delete(String(params[0]));
    if (SUBSCRIBE_METHODS.has(method)) return this.handleSubscribe(ws, method, params);
    if (method.startsWith("chain_")) return this.handleChain(method, params);
    if (method.startsWith("state_")) return this.handleState(method, params);
    if (method === "author_submitExtrinsic") return this.submit(String(params[0])).parsed.hash;
    if (method === "author_pendingExtrinsics") return this.pool.map((t) => t.parsed.hex);
    throw methodNotFound(method);
  }

  private handleSystem(method: string, params: unknown[]): unknown {
    if (method === "system_chain") return this.runtime.fixture.chainName;
    if (method !== "system_accountNextIndex") throw methodNotFound(method);
    const pk = u8aToHex(decodeAddress(String(params[0])));
    return (this.state.nonces.get(pk) ?? 0) + this.pool.filter((t) => t.parsed.signerPublicKey === pk).length;
  }

  /** A subscription: its id now, its first notification on the next turn of the loop. */
  private handleSubscribe(ws: WebSocket, method: string, params: unknown[]): string {
    if (method === "state_subscribeStorage") {
      const keys = (params[0] as string[] | undefined) ?? [];
      const sid = this.subscribe(ws, "storage", { keys });
      setImmediate(() => {
        const s = this.subs.get(sid);
        if (s) this.notify(s, this.storageChange(this.blocks.at(-1)!, keys));
      });
      return sid;
    }
    if (method === "state_subscribeRuntimeVersion" || method === "chain_subscribeRuntimeVersion") {
      const sid = this.subscribe(ws, "runtimeVersion");
      setImmediate(() =>
        this.notify(
          this.subs.get(sid) ?? ({ ws, id: sid, kind: "runtimeVersion" } as Sub),
          runtimeVersionOf(this.runtime.fixture),
        ),
      );
      return sid;
    }
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

  private handleChain(method: string, params: unknown[]): unknown {
    switch (method) {
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
      case "chain_getRuntimeVersion":
        return runtimeVersionOf(this.runtime.fixture);
      default:
        throw methodNotFound(method);
    }
  }

  private handleState(method: string, params: unknown[]): unknown {
    const f = this.runtime.fixture;
    switch (method) {
      case "state_getRuntimeVersion":
        return runtimeVersionOf(f);
      case "state_getMetadata":
        return f.metadata;
      case "state_call":
        return stateCall(f, String(params[0]), params[1]);
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
      default:
        throw methodNotFound(method);
    }
  }
}

/** Convenience for tests: an ss58 address of a fresh random account (no key material kept). */
export function randomAccount(): string {
  return encodeAddress(randomBytes(32), 42);
}
