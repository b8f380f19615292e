/**
 * An extrinsic's inclusion as the node reports it: the pool's status updates, where the extrinsic
 * sits in a block and what its events say, and a dispatch error's name through the runtime's metadata.
 */
import type { ApiPromise } from "@polkadot/api";
import type { Codec } from "@polkadot/types/types";

/** The extrinsic found in a block, and how it went. */
export interface InBlock {
  blockHash: string;
  blockNumber: number;
  success: boolean;
  errorName: string | undefined;
  events: string[];
}

/** Where the extrinsic sits in this block and what its events say; undefined if it is not there. */
export async function readInBlock(
  api: ApiPromise,
  blockHash: string,
  txHash: string,
): Promise<InBlock | undefined> {
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
