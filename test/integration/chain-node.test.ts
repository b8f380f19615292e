/**
 * The chain client against the local test node (test/fakes/subtensor-node.ts), which serves the
 * real subtensor metadata of spec 219 (finney) and spec 224 (testnet) over a loopback websocket.
 */
import { type AddressInfo, createServer, type Socket } from "node:net";
import { Keyring } from "@polkadot/keyring";
import { cryptoWaitReady, mnemonicGenerate } from "@polkadot/util-crypto";
import pino from "pino";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { convertWeightsForEmit, Hotkey, PolkadotChainClient } from "../../src/chain/index.js";
import { createLogger } from "../../src/log.js";
import {
  type FakeSubnetSpec,
  FakeSubtensorNode,
  type FixtureName,
  randomAccount,
} from "../fakes/subtensor-node.js";
import { poller } from "../helpers/wait.js";

const waitFor = poller({ ms: 10_000, everyMs: 10 });

let keyring: Keyring;
beforeAll(async () => {
  await cryptoWaitReady();
  keyring = new Keyring({ type: "sr25519", ss58Format: 42 });
});

function newHotkey(): Hotkey {
  return new Hotkey(keyring.addFromMnemonic(mnemonicGenerate()), "secretPhrase");
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => {});
});

interface Setup {
  node: FakeSubtensorNode;
  client: PolkadotChainClient;
  me: Hotkey;
  owner: string;
}

async function setup(fixture: FixtureName, subnet: Partial<FakeSubnetSpec> = {}): Promise<Setup> {
  const me = newHotkey();
  const owner = randomAccount();
  const ownerCold = randomAccount();
  const network = fixture === "finney-spec219" ? "finney" : "test";
  const node = await FakeSubtensorNode.start({
    fixture,
    startBlock: 10_000,
    subnets: [
      {
        netuid: 11,
        ownerColdkey: ownerCold,
        ownerHotkey: owner,
        neurons: [
          { hotkey: owner, coldkey: ownerCold, stakeRao: 5_000_000_000n },
          { hotkey: randomAccount(), stakeRao: 7n },
          { hotkey: me.ss58, stakeRao: 123_456_789_000n, validatorPermit: true },
          { hotkey: randomAccount() },
        ],
        weightsSetRateLimit: 100,
        weightsVersionKey: 5,
        ...subnet,
      },
    ],
  });
  cleanups.push(() => node.stop());
  const client = new PolkadotChainClient({
    endpoint: node.url,
    network,
    hotkey: me,
    reconnectDelayMs: 150,
    pollIntervalMs: 100,
    connectTimeoutMs: 15_000,
    ...(process.env.CHAIN_TEST_LOG !== undefined
      ? {
          log: createLogger({
            level: "debug",
            destination: pino.destination({ dest: process.env.CHAIN_TEST_LOG, sync: true }),
          }),
        }
      : {}),
  });
  cleanups.push(() => client.disconnect());
  return { node, client, me, owner };
}

function expectEveryExtrinsicVerifies(node: FakeSubtensorNode) {
  expect(node.received.length).toBeGreaterThan(0);
  for (const r of node.received) {
    expect(r.verifyError).toBeUndefined();
    expect(r.signatureValid).toBe(true);
  }
}

describe.each(["finney-spec219", "testnet-spec224"] as const)("against the test node (%s)", (fixture) => {
  it("connects with the real metadata, passes the startup checks and reads a snapshot", async () => {
    const { node, client, me, owner } = await setup(fixture);
    const info = await client.connect();
    expect(info.specVersion).toBe(fixture === "finney-spec219" ? 219 : 224);
    expect(info.genesisHash).toBe(node.runtime.fixture.genesisHash);
    expect(info.weightCalls).toEqual({
      setWeights: true,
      commitTimelockedWeights: false,
      commitCrv3Weights: true,
    });
    const snap = await client.snapshot(11);
    expect(snap.block).toBe(node.head.number);
    expect(snap.blockHash).toBe(node.head.hash);
    expect(snap.neurons.map((n) => n.hotkey)).toEqual(node.subnet(11).neurons.map((n) => n.hotkey));
    expect(snap.neurons[2]).toMatchObject({
      uid: 2,
      hotkey: me.ss58,
      stakeRao: 123_456_789_000n,
      stake: 123.456789,
      validatorPermit: true,
      lastUpdate: 0,
    });
    expect(snap.stakeSource).toBe(fixture === "finney-spec219" ? "TotalHotkeyStake" : "TotalHotkeyAlpha");
    // Spec 219 has no SubnetOwnerHotkey: the owner's hotkey is found through Owner(hotkey) = SubnetOwner.
    expect(snap.ownerHotkey).toBe(owner);
    expect(snap.ownerUid).toBe(0);
    expect(snap).toMatchObject({
      tempo: 360,
      weightsSetRateLimit: 100,
      weightsVersionKey: 5,
      commitRevealEnabled: false,
      minAllowedWeights: 1,
      maxWeightsLimit: 65535,
      revealPeriodEpochs: 1,
    });
  });

  it("sets weights: included in a block with SubtensorModule.WeightsSet, LastUpdate moves, the signature verifies", async () => {
    const { node, client, me } = await setup(fixture);
    await client.connect();
    const pre = await client.preflight(11, [1], [65535], 5);
    expect(pre).toMatchObject({ ok: true, uid: 2, problems: [] });
    const emit = convertWeightsForEmit([1, 3], [0.25, 0.75]);
    const r = await client.setWeights(11, emit.uids, emit.weights, 5, { timeoutMs: 20_000 });
    expect(r).toMatchObject({
      outcome: "included",
      mode: "set_weights",
      errorName: undefined,
      resubmissions: 0,
      nonce: 0,
    });
    expect(r.blockNumber).toBe(node.head.number);
    expect(r.blockHash).toBe(node.head.hash);
    const rec = node.received.find((x) => x.hash === r.txHash)!;
    expect(rec).toMatchObject({
      signer: me.ss58,
      nonce: 0,
      signatureValid: true,
      pool: "accepted",
      outcome: "success",
    });
    expect(rec.call).toMatchObject({ section: "subtensorModule", method: "setWeights" });
    expect(rec.call!.args).toMatchObject({
      netuid: 11,
      dests: [1, 3],
      weights: [21845, 65535],
      version_key: 5,
    });
    // The weights landed after the timestamp inherent, not at index 0.
    expect(node.blockExtrinsics(r.blockNumber!).indexOf(rec.hex)).toBe(1);
    expect(node.subnet(11).neurons[2]!.lastUpdate).toBe(r.blockNumber);
    expect(node.subnet(11).weights.get(2)).toEqual({ uids: [1, 3], values: [21845, 65535] });
    expect((await client.snapshot(11)).neurons[2]!.lastUpdate).toBe(r.blockNumber);
    expectEveryExtrinsicVerifies(node);
  });

  it("reads a neuron's stored weight row (SubtensorModule.Weights) at a block, as the chain encodes it", async () => {
    const { node, client } = await setup(fixture, {
      weights: {
        0: [
          [1, 65535],
          [3, 21845],
        ],
      },
    });
    // The node serves the runtime's own encoding: Vec<(u16, u16)>, a compact length and LE pairs.
    expect(
      node.runtime.storageValue("SubtensorModule", "Weights", [
        [1, 65535],
        [3, 21845],
      ]),
    ).toBe("0x080100ffff03005555");
    await client.connect();
    const at = node.head.hash;
    expect(await client.weightsRow(11, 0, { at })).toEqual([
      [1, 65535],
      [3, 21845],
    ]);
    // A neuron that never set weights: the storage default, an empty row.
    expect(await client.weightsRow(11, 3, { at })).toEqual([]);
    // Read at a block: a later change is not seen there, and is seen at the head.
    node.setWeightsRow(11, 0, [[2, 7]]);
    node.advance(1);
    expect(await client.weightsRow(11, 0, { at })).toEqual([
      [1, 65535],
      [3, 21845],
    ]);
    expect(await client.weightsRow(11, 0)).toEqual([[2, 7]]);
    // Bytes that are no row: refused at the boundary, never guessed at.
    node.corruptStorage("SubtensorModule", "Weights", [11, 0], "0x08ffff");
    node.advance(1);
    await expect(client.weightsRow(11, 0)).rejects.toMatchObject({ code: expect.stringMatching(/^chain_/) });
  });

  it("maps SettingWeightsTooFast by name (its index differs between spec 219 and 224)", async () => {
    const { node, client } = await setup(fixture);
    await client.connect();
    const first = await client.setWeights(11, [0], [65535], 5);
    expect(first.outcome).toBe("included");
    node.advance(3);
    const pre = await client.preflight(11, [0], [65535], 5);
    expect(pre.ok).toBe(false);
    expect(pre.problems.map((p) => p.code)).toEqual(["rate_limited"]);
    expect(pre.blocksUntilAllowed).toBe(100 - 3);
    const second = await client.setWeights(11, [0], [65535], 5);
    expect(second).toMatchObject({
      outcome: "failed",
      errorName: "SettingWeightsTooFast",
      errorKind: "rate_limited",
      nonce: 1,
    });
    const idx = node.runtime.errorIndex("SubtensorModule", "SettingWeightsTooFast");
    expect(idx).toBe(fixture === "finney-spec219" ? 30 : 29);
    node.advance(100);
    expect((await client.setWeights(11, [0], [65535], 5)).outcome).toBe("included");
    expectEveryExtrinsicVerifies(node);
  });

  it("maps IncorrectWeightVersionKey and a pool rejection's custom error by name", async () => {
    const { node, client } = await setup(fixture);
    await client.connect();
    const pre = await client.preflight(11, [0], [65535], 4);
    expect(pre.problems.map((p) => p.code)).toEqual(["version_key_too_low"]);
    const low = await client.setWeights(11, [0], [65535], 4);
    expect(low).toMatchObject({
      outcome: "failed",
      errorName: "IncorrectWeightVersionKey",
      errorKind: "permanent",
    });
    node.rejectNextWithCustom = 10;
    const rejected = await client.setWeights(11, [0], [65535], 5);
    expect(rejected).toMatchObject({
      outcome: "rejected",
      errorName: "HotKeyNotRegisteredInNetwork",
      errorKind: "permanent",
    });
    expect(rejected.message).toBe("1010: Invalid Transaction: Custom error: 10");
    expectEveryExtrinsicVerifies(node);
  });
});

describe("against the test node: edges", () => {
  it("refuses an endpoint whose genesis is not the configured network's", async () => {
    const { node } = await setup("testnet-spec224");
    const client = new PolkadotChainClient({
      endpoint: node.url,
      network: "finney",
      connectTimeoutMs: 15_000,
    });
    cleanups.push(() => client.disconnect());
    await expect(client.connect()).rejects.toMatchObject({
      code: "chain_genesis_mismatch",
      failureClass: "input",
    });
    expect(client.isConnected).toBe(false);
  });

  it("a connect to nothing fails; a connect to a silent peer fails at its deadline", async () => {
    const { node } = await setup("finney-spec219");
    const url = node.url;
    await node.stop();
    const refused = new PolkadotChainClient({
      endpoint: url,
      network: "local",
      connectTimeoutMs: 5_000,
      reconnectDelayMs: 100,
    });
    await expect(refused.connect()).rejects.toMatchObject({
      code: "chain_connect_failed",
      failureClass: "infra",
    });
    // A TCP peer that accepts and never answers the websocket handshake.
    const silentSockets: Socket[] = [];
    const silent = createServer((s) => silentSockets.push(s));
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    cleanups.push(() => new Promise((r) => silent.close(() => r())));
    const port = (silent.address() as AddressInfo).port;
    const client = new PolkadotChainClient({
      endpoint: `ws://127.0.0.1:${port}`,
      network: "local",
      connectTimeoutMs: 800,
      reconnectDelayMs: 100,
    });
    const t0 = performance.now();
    await expect(client.connect()).rejects.toMatchObject({ code: "chain_connect_timeout" });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(750);
    expect(performance.now() - t0).toBeLessThan(5_000);
    for (const s of silentSockets) s.destroy();
  });

  it("CommitRevealEnabled by name when commit-reveal switches on between signing and inclusion", async () => {
    const { node, client } = await setup("finney-spec219");
    await client.connect();
    node.holdInclusion = true;
    const pending = client.setWeights(11, [0], [65535], 5);
    await waitFor(() => node.received.length === 1);
    node.subnet(11).commitRevealEnabled = true;
    node.release();
    expect(await pending).toMatchObject({
      outcome: "failed",
      mode: "set_weights",
      errorName: "CommitRevealEnabled",
      errorKind: "permanent",
    });
  });

  it("with commit-reveal on, sends a timelocked commit (commit_crv3_weights on these runtimes) instead", async () => {
    const { node, client } = await setup("finney-spec219", { commitRevealEnabled: true });
    await client.connect();
    const r = await client.setWeights(11, [0], [65535], 5);
    expect(r).toMatchObject({ outcome: "included", mode: "commit_crv3_weights" });
    expect(r.revealRound).toBeGreaterThan(1_000_000);
    const rec = node.received.find((x) => x.hash === r.txHash)!;
    expect(rec.call?.method).toBe("commitCrv3Weights");
    expect(Number(rec.call!.args.reveal_round)).toBe(r.revealRound);
    // A compressed TLECiphertext: well above the 19-byte payload it hides.
    expect(String(rec.call!.args.commit).length).toBeGreaterThan(2 + 2 * 200);
    expect(node.subnet(11).commits).toHaveLength(1);
    expectEveryExtrinsicVerifies(node);
  });

  it("a websocket dropped after the node accepted set_weights: reconnects, finds the inclusion, no second inclusion", async () => {
    const { node, client, me } = await setup("finney-spec219");
    await client.connect();
    node.dropOnNextSubmit = "after-accept";
    const connectionsBefore = node.connections;
    const r = await client.setWeights(11, [0], [65535], 5, { timeoutMs: 20_000 });
    expect(r.outcome).toBe("included");
    expect(node.connections).toBeGreaterThan(connectionsBefore);
    const mine = node.received.filter((x) => x.signer === me.ss58);
    // Whatever was resent is the same signed bytes; the chain included them exactly once.
    expect(new Set(mine.map((x) => x.hash)).size).toBe(1);
    expect(mine.filter((x) => x.outcome === "success")).toHaveLength(1);
    expect(node.nonceOf(me.ss58)).toBe(1);
    expect(client.isConnected).toBe(true);
    expectEveryExtrinsicVerifies(node);
    // The client is usable afterwards.
    node.advance(100);
    expect((await client.setWeights(11, [0], [65535], 5)).outcome).toBe("included");
  });

  it("a websocket dropped before the node saw set_weights: reconnects and resends the same bytes once", async () => {
    const { node, client, me } = await setup("testnet-spec224");
    await client.connect();
    node.dropOnNextSubmit = "before-accept";
    const r = await client.setWeights(11, [0], [65535], 5, { timeoutMs: 20_000 });
    expect(r).toMatchObject({ outcome: "included", resubmissions: 1 });
    const mine = node.received.filter((x) => x.signer === me.ss58);
    expect(mine).toHaveLength(1);
    expect(mine[0]!.hash).toBe(r.txHash);
    expect(node.nonceOf(me.ss58)).toBe(1);
    expectEveryExtrinsicVerifies(node);
  });

  it("a submission the node accepted and then lost (socket dropped): resent once, included once", async () => {
    const { node, client, me } = await setup("finney-spec219");
    await client.connect();
    node.dropOnNextSubmit = "accept-and-lose";
    const r = await client.setWeights(11, [0], [65535], 5, { timeoutMs: 20_000 });
    expect(r).toMatchObject({ outcome: "included", resubmissions: 1 });
    const mine = node.received.filter((x) => x.signer === me.ss58);
    expect(mine.map((x) => x.pool)).toEqual(["accepted, then lost", "accepted"]);
    expect(new Set(mine.map((x) => x.hash))).toEqual(new Set([r.txHash]));
    expect(node.nonceOf(me.ss58)).toBe(1);
    expectEveryExtrinsicVerifies(node);
  });

  it("the node's verifier is real: a tampered extrinsic fails its signature check and is refused", async () => {
    const { node, client } = await setup("finney-spec219");
    await client.connect();
    node.holdInclusion = true;
    const pending = client.setWeights(11, [0], [65535], 5);
    await waitFor(() => node.received.length === 1);
    const good = node.received[0]!;
    expect(good.signatureValid).toBe(true);
    // Same length, one byte of the call changed (the version key's top byte).
    const forged = `${good.hex.slice(0, -2)}01`;
    const answer = await rawRpc(node.url, "author_submitExtrinsic", [forged]);
    expect(answer.error).toMatchObject({
      code: 1010,
      message: "Invalid Transaction",
      data: "Transaction has a bad signature",
    });
    expect(node.received[1]).toMatchObject({ signatureValid: false, verifyError: "bad signature" });
    node.release();
    expect((await pending).outcome).toBe("included");
  });

  it("a node that never includes: timeout with the tx hash, then abort is honoured", async () => {
    const { node, client } = await setup("finney-spec219");
    await client.connect();
    node.holdInclusion = true;
    const t0 = performance.now();
    const r = await client.setWeights(11, [0], [65535], 5, { timeoutMs: 600 });
    expect(r.outcome).toBe("timeout");
    expect(r.txHash).toMatch(/^0x[0-9a-f]{64}$/);
    expect(performance.now() - t0).toBeLessThan(3_000);
    const ac = new AbortController();
    const p = client.setWeights(11, [0], [65535], 5, { signal: ac.signal, timeoutMs: 20_000 });
    setTimeout(() => ac.abort(), 100);
    expect((await p).outcome).toBe("aborted");
  });
});

async function rawRpc(
  url: string,
  method: string,
  params: unknown[],
): Promise<{ result?: unknown; error?: unknown }> {
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  const answer = new Promise<{ result?: unknown; error?: unknown }>((resolve) =>
    ws.once("message", (data) => resolve(JSON.parse(data.toString()))),
  );
  ws.send(JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }));
  try {
    return await answer;
  } finally {
    ws.close();
  }
}
