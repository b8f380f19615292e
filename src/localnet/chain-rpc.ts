/**
 * The JSON-RPC surface of the local test node that does not depend on its state: the methods it
 * lists, its subscription kinds and their notification names, its errors, the runtime version it
 * reports and the runtime calls it answers (metadata versions).
 */
import { compactToU8a, u8aConcat, u8aToHex } from "@polkadot/util";
import type { WebSocket } from "ws";
import type { RuntimeFixture } from "./subtensor-runtime.js";

export interface Sub {
  ws: WebSocket;
  id: string;
  kind: "newHead" | "finalizedHead" | "allHead" | "runtimeVersion" | "storage" | "extrinsic";
  keys?: string[];
  txHash?: string;
}

export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: string,
  ) {
    super(message);
  }
}

export const NOTIFY: Record<Sub["kind"], string> = {
  newHead: "chain_newHead",
  finalizedHead: "chain_finalizedHead",
  allHead: "chain_allHead",
  runtimeVersion: "state_runtimeVersion",
  storage: "state_storage",
  extrinsic: "author_extrinsicUpdate",
};

export function runtimeVersionOf(f: RuntimeFixture) {
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

/** `state_call` of a runtime API: this runtime serves metadata v14 only. */
export function stateCall(f: RuntimeFixture, fn: string, arg: unknown): string {
  // Metadata_metadata_versions → Vec<u32>: this runtime serves v14 only.
  if (fn === "Metadata_metadata_versions") return "0x040e000000";
  // Metadata_metadata_at_version(u32) → Option<OpaqueMetadata>: Some for 14, None otherwise.
  if (fn === "Metadata_metadata_at_version") {
    const version = Buffer.from(String(arg).slice(2), "hex").readUInt32LE(0);
    if (version !== 14) return "0x00";
    const bytes = Buffer.from(f.metadata.slice(2), "hex");
    return u8aToHex(u8aConcat(Uint8Array.of(1), compactToU8a(bytes.length), bytes));
  }
  throw new RpcError(-32000, "Client error: Execution failed", `Exported method ${fn} is not found`);
}

export const SUPPORTED = [
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

/** The methods that open a subscription (its id now, a first notification next turn). */
export const SUBSCRIBE_METHODS = new Set([
  "chain_subscribeNewHeads",
  "chain_subscribeNewHead",
  "chain_subscribeAllHeads",
  "chain_subscribeFinalizedHeads",
  "chain_subscribeFinalisedHeads",
  "state_subscribeRuntimeVersion",
  "chain_subscribeRuntimeVersion",
  "state_subscribeStorage",
]);

/** The methods that close one (they answer whether it existed). */
export const UNSUBSCRIBE_METHODS = new Set([
  "chain_unsubscribeNewHeads",
  "chain_unsubscribeNewHead",
  "chain_unsubscribeAllHeads",
  "chain_unsubscribeFinalizedHeads",
  "chain_unsubscribeFinalisedHeads",
  "state_unsubscribeRuntimeVersion",
  "chain_unsubscribeRuntimeVersion",
  "state_unsubscribeStorage",
  "author_unwatchExtrinsic",
]);

export const methodNotFound = (method: string) => new RpcError(-32601, `Method not found: ${method}`);

/** The calls whose answer depends on nothing the node holds. */
export const FIXED_ANSWERS = new Map<string, () => unknown>([
  ["rpc_methods", () => ({ version: 1, methods: [...SUPPORTED] })],
  ["system_name", () => "fake-subtensor"],
  ["system_version", () => "0.0.0-fake"],
  ["system_properties", () => ({ ss58Format: 42, tokenDecimals: 9, tokenSymbol: "TAO" })],
  ["system_health", () => ({ peers: 1, isSyncing: false, shouldHavePeers: true })],
  [
    "payment_queryInfo",
    () => ({ weight: { ref_time: 100_000, proof_size: 0 }, class: "normal", partialFee: "0" }),
  ],
]);
