/**
 * A subnet snapshot read from a chain node is data from outside the machine: before the weight
 * loop trusts it, it must be self-consistent. Pure: the reasons a snapshot is unusable, or none.
 */
import type { SubnetSnapshot } from "./types.js";

/** The all-zero AccountId: what a missing `Keys` entry decodes to. */
export const EMPTY_ACCOUNT = "5C4hrfjw9DjXZTzV3MwzrrAr9P1MJhSrvWGWqi1eSuyUpnhM";

export interface RawSubnetLists {
  /** SubnetworkN. */
  count: number;
  /** Lengths of the per-uid vectors as stored (ValidatorPermit, LastUpdate). */
  permits: number;
  lastUpdates: number;
}

export function snapshotProblems(snap: SubnetSnapshot, raw: RawSubnetLists): string[] {
  const out: string[] = [];
  const u16 = (n: number) => Number.isInteger(n) && n >= 0 && n <= 0xffff;
  if (!u16(raw.count)) out.push(`SubnetworkN is ${raw.count}`);
  if (snap.neurons.length !== raw.count)
    out.push(`SubnetworkN is ${raw.count} but ${snap.neurons.length} neurons were read`);
  // Vectors may lag behind a registration by a block; longer than the subnet is corrupt.
  if (raw.permits > raw.count) out.push(`ValidatorPermit has ${raw.permits} entries for ${raw.count} uids`);
  if (raw.lastUpdates > raw.count)
    out.push(`LastUpdate has ${raw.lastUpdates} entries for ${raw.count} uids`);
  const seen = new Map<string, number>();
  for (const n of snap.neurons) {
    if (n.hotkey === EMPTY_ACCOUNT || /^0x0+$/.test(n.hotkey)) out.push(`uid ${n.uid} has no hotkey`);
    const dup = seen.get(n.hotkey);
    if (dup !== undefined && n.hotkey !== EMPTY_ACCOUNT) out.push(`uids ${dup} and ${n.uid} share a hotkey`);
    seen.set(n.hotkey, n.uid);
    if (n.stakeRao < 0n || !Number.isFinite(n.stake)) out.push(`uid ${n.uid} has stake ${n.stakeRao}`);
    if (!Number.isInteger(n.lastUpdate) || n.lastUpdate < 0 || n.lastUpdate > snap.block)
      out.push(`uid ${n.uid} last updated at block ${n.lastUpdate} (snapshot block ${snap.block})`);
  }
  if (snap.ownerUid !== undefined && snap.ownerUid >= snap.neurons.length)
    out.push(`owner uid ${snap.ownerUid} out of range`);
  for (const [name, v] of [
    ["Tempo", snap.tempo],
    ["WeightsSetRateLimit", snap.weightsSetRateLimit],
    ["WeightsVersionKey", snap.weightsVersionKey],
    ["MinAllowedWeights", snap.minAllowedWeights],
    ["MaxWeightsLimit", snap.maxWeightsLimit],
  ] as const)
    if (!Number.isSafeInteger(v) || v < 0) out.push(`${name} is ${v}`);
  return out.slice(0, 5);
}
