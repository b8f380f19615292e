/**
 * A local network to rehearse an epoch (issue 26 item 7): the subtensor stand-in with this
 * validator's hotkey registered (with a validator permit) on the subnet, and the platform stand-in
 * opening one challenge epoch with a pack. A validator pointed at them (SUBTENSOR_ENDPOINT,
 * TRAJECTORYRL_API_BASE_URL, NETWORK=local) evaluates the pack, posts its verdict and sets weights,
 * all of which the two stand-ins record and report. Nothing here is a real chain or the real platform:
 * see ./README.md for what they are.
 */
import { blake2AsHex } from "@polkadot/util-crypto";
import type { Logger } from "../log.js";
import { FakeSubtensorNode, type ReceivedExtrinsic, randomAccount } from "./chain-node.js";
import { type FakeEpoch, FakePlatform } from "./platform.js";

/**
 * The local network's genesis hash: its own, never finney's, so a validator's database keeps the
 * rehearsal's epochs, verdicts and weights apart from a real network's (src/store/networks.ts). The
 * same at every start: a restarted localnet is the same network to the validator.
 */
export const LOCALNET_GENESIS_HASH = blake2AsHex("trajrl-validator localnet", 256);

/** The challenge epoch a localnet opens unless told (`--epoch`). */
export const LOCALNET_EPOCH_ID = 1000;

export interface LocalnetOptions {
  /** The validator's hotkey (ss58): registered at uid 3 with a validator permit. */
  hotkey: string;
  netuid: number;
  /** The challenger's pack, as bytes (served by the platform stand-in, hashed Python-canonically). */
  pack: Uint8Array;
  specNumber: number;
  /** The challenge epoch's id (default LOCALNET_EPOCH_ID). */
  epochId?: number;
  /** The chain's genesis hash (default LOCALNET_GENESIS_HASH; tests start a second network with another). */
  genesisHash?: string;
  /** Where both listen (default loopback) and on which ports (default any free one). */
  host?: string;
  chainPort?: number;
  platformPort?: number;
  /** The host name the validator reaches them by (default: the address they listen on). */
  publicHost?: string;
  /** A block every this many ms (default 1000): the chain moves even when nothing is submitted. */
  blockIntervalMs?: number;
  log: Logger;
}

export interface Localnet {
  /** What a validator sets to use it. */
  env: { NETWORK: "local"; NETUID: string; SUBTENSOR_ENDPOINT: string; TRAJECTORYRL_API_BASE_URL: string };
  node: FakeSubtensorNode;
  platform: FakePlatform;
  epoch: FakeEpoch;
  uids: { owner: number; challenger: number; winner: number; validator: number };
  accounts: { owner: string; challenger: string; winner: string };
  close(): Promise<void>;
}

export async function startLocalnet(o: LocalnetOptions): Promise<Localnet> {
  const log = o.log.child({ component: "localnet" });
  const owner = randomAccount();
  const ownerCold = randomAccount();
  const challenger = randomAccount();
  const winner = randomAccount();
  const node = await FakeSubtensorNode.start({
    host: o.host ?? "127.0.0.1",
    port: o.chainPort ?? 0,
    fixture: "finney-spec219",
    genesisHash: o.genesisHash ?? LOCALNET_GENESIS_HASH,
    startBlock: 20_000,
    blockIntervalMs: o.blockIntervalMs ?? 1000,
    subnets: [
      {
        netuid: o.netuid,
        ownerColdkey: ownerCold,
        neurons: [
          { hotkey: owner, coldkey: ownerCold },
          { hotkey: challenger },
          { hotkey: winner },
          { hotkey: o.hotkey, validatorPermit: true, stakeRao: 50_000_000_000n },
        ],
        weightsSetRateLimit: 5,
        weightsVersionKey: 3,
      },
    ],
  });
  let platform: FakePlatform;
  try {
    platform = await FakePlatform.start({
      host: o.host ?? "127.0.0.1",
      port: o.platformPort ?? 0,
      validators: [o.hotkey],
      ...(o.publicHost ? { publicHost: o.publicHost } : {}),
    });
  } catch (err) {
    await node.stop();
    throw err;
  }
  const epoch = platform.openEpoch({
    epochId: o.epochId ?? LOCALNET_EPOCH_ID,
    packBytes: o.pack,
    challengerHotkey: challenger,
    challengerUid: 1,
    specNumber: o.specNumber,
  });
  const shownChain = o.publicHost ?? new URL(node.url).hostname;
  const env = {
    NETWORK: "local" as const,
    NETUID: String(o.netuid),
    SUBTENSOR_ENDPOINT: `ws://${shownChain}:${new URL(node.url).port}`,
    TRAJECTORYRL_API_BASE_URL: platform.publicUrl,
  };
  log.info(
    {
      ...env,
      validator: o.hotkey,
      genesis: node.blockHash(0),
      uid: 3,
      epoch: epoch.challenge_epoch_id,
      pack: epoch.challenger_pack_hash.slice(0, 12),
      spec: o.specNumber,
    },
    "localnet.ready",
  );
  return {
    env,
    node,
    platform,
    epoch,
    uids: { owner: 0, challenger: 1, winner: 2, validator: 3 },
    accounts: { owner, challenger, winner },
    async close() {
      await platform.close().catch(() => {});
      await node.stop().catch(() => {});
    },
  };
}

/** What the stand-ins saw, for the operator's log and for tests. */
export function weightsIncluded(node: FakeSubtensorNode): ReceivedExtrinsic[] {
  return node.received.filter((r) => r.call?.method === "setWeights" && r.outcome === "success");
}
