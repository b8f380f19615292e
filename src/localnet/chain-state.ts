/**
 * The subnet state of the local test node and what subtensor does with it: the storage items a
 * validator reads, encoded through the runtime's metadata for every new block (plus any storage a
 * test corrupted), and set_weights / commit_*_weights applied with subtensor's checks
 * (SettingWeightsTooFast, IncorrectWeightVersionKey, CommitRevealEnabled, …) and events.
 */
import { u8aToHex } from "@polkadot/util";
import { blake2AsHex, decodeAddress } from "@polkadot/util-crypto";
import type { FakeRuntime, ParsedExtrinsic } from "./subtensor-runtime.js";

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

export interface NeuronState {
  hotkey: string;
  coldkey: string;
  stakeRao: bigint;
  validatorPermit: boolean;
  lastUpdate: number;
}

export interface SubnetState {
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

export class ChainState {
  private readonly subnets = new Map<number, SubnetState>();
  /** Account nonces by public key (hex). */
  readonly nonces = new Map<string, number>();
  /** Raw storage served instead of the state's encoding from the next block on (hex, or null: absent). */
  private readonly corrupted = new Map<string, string | null>();

  constructor(
    private readonly runtime: FakeRuntime,
    subnets: readonly FakeSubnetSpec[],
  ) {
    for (const s of subnets)
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

  subnet(netuid: number): SubnetState {
    const s = this.subnets.get(netuid);
    if (!s) throw new Error(`fake node: no subnet ${netuid}`);
    return s;
  }

  nonceOf(ss58: string): number {
    return this.nonces.get(u8aToHex(decodeAddress(ss58))) ?? 0;
  }

  /** Store a weight row for `uid` (as a set_weights by that neuron would), served from the next block on. */
  setWeightsRow(netuid: number, uid: number, row: Array<[number, number]>): void {
    this.subnet(netuid).weights.set(uid, { uids: row.map(([u]) => u), values: row.map(([, v]) => v) });
  }

  /**
   * Serve `hex` (raw SCALE bytes, possibly garbage) for a storage item from the next block on, as a
   * broken or hostile node would; `null` removes the entry. `undefined` restores the real encoding.
   */
  corruptStorage(pallet: string, item: string, keys: unknown[], hex: string | null | undefined): void {
    const key = this.runtime.storageKey(pallet, item, ...keys);
    if (hex === undefined) this.corrupted.delete(key);
    else this.corrupted.set(key, hex);
  }

  /** The storage of a new block: the state encoded, the block's events, corrupted items applied. */
  storageFor(events: { extrinsic: number; event: Uint8Array }[]): Map<string, string> {
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

  /** Apply a signed call the way subtensor does: its events, or the name of its dispatch error. */
  dispatch(tx: ParsedExtrinsic, blockNumber: number): { error?: string; events: Uint8Array[] } {
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
}
