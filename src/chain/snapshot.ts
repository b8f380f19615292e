/**
 * What the weight loop reads from the chain, over a connected @polkadot/api: the subnet snapshot
 * (neurons, stake, owner, rate limit, version key, commit-reveal) and a neuron's stored weight row.
 * Values are decoded through the runtime's metadata and checked before anyone trusts them; bytes
 * the types cannot decode are `chain_data_malformed`. The client adds the deadline.
 */
import type { ApiPromise } from "@polkadot/api";
import type { Codec } from "@polkadot/types/types";
import { z } from "zod";
import { InfraError, ValidatorError } from "../errors.js";
import type { Logger } from "../log.js";
import { toBig, toBool, toList, toNum } from "./codec.js";
import { EMPTY_ACCOUNT, type RawSubnetLists, snapshotProblems } from "./snapshot-check.js";
import type { Neuron, StoredWeights, SubnetSnapshot } from "./types.js";
import { U16_MAX } from "./weights.js";

const isEmptyAccount = (s: string) => /^0x0+$/.test(s) || s === EMPTY_ACCOUNT;

const u16 = z.number().int().min(0).max(U16_MAX);
/** `SubtensorModule.Weights` as polkadot-js renders Vec<(u16, u16)>. */
const storedWeightsSchema = z.array(z.tuple([u16, u16]));

/** The subnet at block `opts.at` (a hash), else at the head. */
export function readSnapshot(
  api: ApiPromise,
  netuid: number,
  opts: { at?: string | undefined },
  log: Logger,
): Promise<SubnetSnapshot> {
  const read = async (): Promise<SubnetSnapshot> => {
    const { header, blockHash, q } = await storageAtBlock(api, opts.at);
    const params = await readSubnetParams(q, netuid);
    const count = toNum(params.n);
    const hotkeys = await readHotkeys(q, netuid, count);
    const { stakeSource, stakes } = await readStakes(q, netuid, count, hotkeys);
    const permitList = toList<boolean>(params.permits);
    const lastList = toList<number | string>(params.lastUpdate).map(Number);
    const neurons = toNeurons(hotkeys, stakes, permitList, lastList);
    const coldkey = params.ownerColdkey.toString();
    const ownerHotkey = await readOwnerHotkey(q, netuid, count, hotkeys, coldkey);
    const ownerUid = ownerHotkey === undefined ? undefined : hotkeys.indexOf(ownerHotkey);
    const snap: SubnetSnapshot = {
      netuid,
      block: header.number.toNumber(),
      blockHash,
      neurons,
      stakeSource,
      ownerColdkey: isEmptyAccount(coldkey) ? undefined : coldkey,
      ownerHotkey,
      ownerUid: ownerUid === undefined || ownerUid < 0 ? undefined : ownerUid,
      tempo: toNum(params.tempo),
      weightsSetRateLimit: toNum(params.rate),
      weightsVersionKey: toNum(params.versionKey),
      commitRevealEnabled: toBool(params.cr),
      revealPeriodEpochs: await readOptionalNum(q, "revealPeriodEpochs", netuid),
      commitRevealVersion: await readOptionalNum(q, "commitRevealWeightsVersion", netuid),
      minAllowedWeights: toNum(params.minW),
      maxWeightsLimit: toNum(params.maxW),
    };
    refuseInconsistent(snap, { count, permits: permitList.length, lastUpdates: lastList.length }, log);
    return snap;
  };
  return read().catch((err: unknown) => {
    throw asMalformedStorage(err, netuid, log);
  });
}

/** `SubtensorModule`'s storage at block `at` (a hash), else at the head, with that block's header. */
async function storageAtBlock(api: ApiPromise, at: string | undefined) {
  const header = at ? await api.rpc.chain.getHeader(at) : await api.rpc.chain.getHeader();
  const blockHash = header.hash.toHex();
  const decorated = await api.at(blockHash);
  return { header, blockHash, q: decorated.query.subtensorModule! };
}

type SubtensorStorage = Awaited<ReturnType<typeof storageAtBlock>>["q"];

const hasItem = (q: SubtensorStorage, name: string) => typeof q[name] === "function";

/** The subnet's own storage items, read together. */
async function readSubnetParams(q: SubtensorStorage, netuid: number) {
  const [n, permits, lastUpdate, tempo, rate, versionKey, cr, minW, maxW, ownerColdkey] = await Promise.all([
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
  return { n, permits, lastUpdate, tempo, rate, versionKey, cr, minW, maxW, ownerColdkey };
}

/** The hotkey of every uid below `count` (`Keys[netuid][uid]`). */
async function readHotkeys(q: SubtensorStorage, netuid: number, count: number): Promise<string[]> {
  if (!count) return [];
  const uids = Array.from({ length: count }, (_, uid) => uid);
  return (await q.keys!.multi(uids.map((uid) => [netuid, uid]))).map((c) => c.toString());
}

/** Each hotkey's stake: `TotalHotkeyAlpha` on runtimes that have it, else `TotalHotkeyStake`. */
async function readStakes(q: SubtensorStorage, netuid: number, count: number, hotkeys: string[]) {
  const stakeSource: SubnetSnapshot["stakeSource"] = hasItem(q, "totalHotkeyAlpha")
    ? "TotalHotkeyAlpha"
    : "TotalHotkeyStake";
  const stakes = !count
    ? []
    : stakeSource === "TotalHotkeyAlpha"
      ? await q.totalHotkeyAlpha!.multi(hotkeys.map((h) => [h, netuid]))
      : await q.totalHotkeyStake!.multi(hotkeys);
  return { stakeSource, stakes };
}

function toNeurons(hotkeys: string[], stakes: Codec[], permits: boolean[], lastUpdates: number[]): Neuron[] {
  return hotkeys.map((hotkey, uid) => {
    const stakeRao = toBig(stakes[uid]!);
    return {
      uid,
      hotkey,
      stakeRao,
      stake: Number(stakeRao) / 1e9,
      validatorPermit: permits[uid] === true,
      lastUpdate: lastUpdates[uid] ?? 0,
    };
  });
}

/** The subnet owner's hotkey: `SubnetOwnerHotkey` where the runtime stores it, else derived from the coldkey. */
async function readOwnerHotkey(
  q: SubtensorStorage,
  netuid: number,
  count: number,
  hotkeys: string[],
  coldkey: string,
): Promise<string | undefined> {
  if (hasItem(q, "subnetOwnerHotkey")) {
    const hk = (await q.subnetOwnerHotkey!(netuid)).toString();
    return isEmptyAccount(hk) ? undefined : hk;
  }
  if (count && !isEmptyAccount(coldkey)) {
    // Older runtimes store only the owner's coldkey: the owner hotkey is the lowest uid it owns.
    const owners = (await q.owner!.multi(hotkeys)).map((c) => c.toString());
    const uid = owners.indexOf(coldkey);
    return uid >= 0 ? hotkeys[uid] : undefined;
  }
  return undefined;
}

/** A number item the runtime may not have (undefined then); a plain item is read without the key. */
async function readOptionalNum(
  q: SubtensorStorage,
  name: string,
  ...args: unknown[]
): Promise<number | undefined> {
  return hasItem(q, name)
    ? toNum(await q[name]!(...(q[name]!.creator.meta.type.isPlain ? [] : args)))
    : undefined;
}

/** Throws `chain_data_malformed` (and logs why) when the snapshot is not self-consistent. */
function refuseInconsistent(snap: SubnetSnapshot, raw: RawSubnetLists, log: Logger): void {
  const problems = snapshotProblems(snap, raw);
  if (problems.length === 0) return;
  log.warn({ netuid: snap.netuid, block: snap.block, reasons: problems }, "chain.malformed_snapshot");
  throw new InfraError(
    "chain_data_malformed",
    `subnet ${snap.netuid} at block ${snap.block}: ${problems.join("; ")}`,
    {
      detail: { netuid: snap.netuid, block: snap.block, reasons: problems },
    },
  );
}

/** Bytes the runtime's types cannot decode mean the node served corrupt storage: `chain_data_malformed`, logged. */
function asMalformedStorage(err: unknown, netuid: number, log: Logger): unknown {
  if (!(err instanceof ValidatorError) && /decode|createType|Unable to/i.test(String(err))) {
    log.warn({ netuid, reason: String(err).slice(0, 500) }, "chain.malformed_snapshot");
    return new InfraError("chain_data_malformed", `subnet ${netuid}: the node's storage does not decode`, {
      cause: err,
      detail: { netuid },
    });
  }
  return err;
}

/** A neuron's stored weights (`SubtensorModule.Weights[netuid][uid]`) at block `at`, else at the head. */
export function readWeightsRow(
  api: ApiPromise,
  netuid: number,
  uid: number,
  opts: { at?: string | undefined },
): Promise<StoredWeights> {
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
  return read().catch((err: unknown) => {
    if (!(err instanceof ValidatorError) && /decode|createType|Unable to/i.test(String(err)))
      throw new InfraError("chain_data_malformed", `subnet ${netuid} uid ${uid}: Weights does not decode`, {
        cause: err,
      });
    throw err;
  });
}
