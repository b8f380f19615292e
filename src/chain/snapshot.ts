/**
 * What the weight loop reads from the chain, over a connected @polkadot/api: the subnet snapshot
 * (neurons, stake, owner, rate limit, version key, commit-reveal) and a neuron's stored weight row.
 * Values are decoded through the runtime's metadata and checked before anyone trusts them; bytes
 * the types cannot decode are `chain_data_malformed`. The client adds the deadline.
 */
import type { ApiPromise } from "@polkadot/api";
import { z } from "zod";
import { InfraError, ValidatorError } from "../errors.js";
import type { Logger } from "../log.js";
import { toBig, toBool, toList, toNum } from "./codec.js";
import { EMPTY_ACCOUNT, snapshotProblems } from "./snapshot-check.js";
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
    const header = opts.at ? await api.rpc.chain.getHeader(opts.at) : await api.rpc.chain.getHeader();
    const blockHash = header.hash.toHex();
    const at = await api.at(blockHash);
    const q = at.query.subtensorModule!;
    const has = (name: string) => typeof q[name] === "function";
    const [n, permits, lastUpdate, tempo, rate, versionKey, cr, minW, maxW, ownerColdkey] = await Promise.all(
      [
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
      ],
    );
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
      log.warn({ netuid, block: snap.block, reasons: problems }, "chain.malformed_snapshot");
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
  return read().catch((err: unknown) => {
    // Bytes the runtime's types cannot decode: the node served corrupt storage.
    if (!(err instanceof ValidatorError) && /decode|createType|Unable to/i.test(String(err))) {
      log.warn({ netuid, reason: String(err).slice(0, 500) }, "chain.malformed_snapshot");
      throw new InfraError("chain_data_malformed", `subnet ${netuid}: the node's storage does not decode`, {
        cause: err,
        detail: { netuid },
      });
    }
    throw err;
  });
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
