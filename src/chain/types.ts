/**
 * The chain as the daemon sees it: plain TS types, no polkadot-js types leak out of src/chain.
 */
import type { WeightsErrorKind } from "./errors.js";

export type Network = "finney" | "test" | "local";

export interface ChainInfo {
  network: Network;
  endpoint: string;
  genesisHash: string;
  chain: string;
  specName: string;
  specVersion: number;
  txVersion: number;
  /** SubtensorModule calls this runtime offers for weights (by name, from metadata). */
  weightCalls: { setWeights: boolean; commitTimelockedWeights: boolean; commitCrv3Weights: boolean };
}

export interface Neuron {
  uid: number;
  hotkey: string;
  /** Stake on this subnet in rao (alpha under dTAO, TAO before). */
  stakeRao: bigint;
  /** stakeRao / 1e9, for display and consensus weighting. */
  stake: number;
  validatorPermit: boolean;
  /** Block of this uid's last weights (LastUpdate); 0 when never set. */
  lastUpdate: number;
}

export interface SubnetSnapshot {
  netuid: number;
  /** The block the snapshot was read at. */
  block: number;
  blockHash: string;
  neurons: Neuron[];
  /** Where stake came from: TotalHotkeyAlpha (dTAO) or TotalHotkeyStake (older runtimes). */
  stakeSource: "TotalHotkeyAlpha" | "TotalHotkeyStake";
  ownerColdkey: string | undefined;
  ownerHotkey: string | undefined;
  /** The owner hotkey's uid: where burned weight goes. Undefined when the owner holds no uid. */
  ownerUid: number | undefined;
  tempo: number;
  weightsSetRateLimit: number;
  weightsVersionKey: number;
  commitRevealEnabled: boolean;
  revealPeriodEpochs: number | undefined;
  /** CommitRevealWeightsVersion when the runtime stores it. */
  commitRevealVersion: number | undefined;
  minAllowedWeights: number;
  maxWeightsLimit: number;
}

export type PreflightProblemCode =
  | "not_registered"
  | "no_validator_permit"
  | "rate_limited"
  | "version_key_too_low"
  | "weights_invalid"
  | "weight_vec_too_short";

export interface PreflightProblem {
  code: PreflightProblemCode;
  kind: WeightsErrorKind;
  message: string;
}

export interface Preflight {
  ok: boolean;
  uid: number | undefined;
  block: number;
  /** Blocks until the rate limit allows weights again (0 when it does now). */
  blocksUntilAllowed: number;
  problems: PreflightProblem[];
}

/** A neuron's weights as the chain stores them: (destination uid, u16 value). */
export type StoredWeights = Array<[number, number]>;

export type WeightsMode = "set_weights" | "commit_timelocked_weights" | "commit_crv3_weights";

/**
 * included: in a block and dispatched successfully (WeightsSet / commit event).
 * failed:   in a block, dispatch failed (errorName from the runtime's metadata).
 * rejected: the pool refused it (errorName from the rejection), or it cannot be built.
 * timeout:  no inclusion seen before the deadline; it may still land (txHash identifies it).
 * aborted:  the caller's signal fired first; it may still land.
 */
export type WeightsOutcome = "included" | "failed" | "rejected" | "timeout" | "aborted";

export interface SetWeightsResult {
  outcome: WeightsOutcome;
  mode: WeightsMode;
  txHash: string | undefined;
  blockHash: string | undefined;
  blockNumber: number | undefined;
  errorName: string | undefined;
  errorKind: WeightsErrorKind | undefined;
  message: string | undefined;
  nonce: number | undefined;
  /** How often the same signed bytes were sent again after a lost connection. */
  resubmissions: number;
  /** Commit-reveal only: the drand round that reveals the commit. */
  revealRound: number | undefined;
}

export interface SetWeightsOptions {
  signal?: AbortSignal;
  /** Wall budget from submission to inclusion; default 120 s. */
  timeoutMs?: number;
}

export interface ChainClient {
  /** Connect (reconnects on its own afterwards) and run the startup checks. */
  connect(opts?: { signal?: AbortSignal }): Promise<ChainInfo>;
  /**
   * Be told each time the endpoint is lost or fails to connect (false, with the reason) and each
   * time it answers again (true): health's outage clock starts at the first loss.
   */
  watchReachability?(cb: (ok: boolean, reason: string) => void): void;
  disconnect(): Promise<void>;
  readonly isConnected: boolean;
  /** The hotkey that signs, when one is loaded. */
  readonly hotkeySs58: string | undefined;
  headBlock(): Promise<{ number: number; hash: string }>;
  snapshot(netuid: number, opts?: { at?: string; signal?: AbortSignal }): Promise<SubnetSnapshot>;
  /**
   * A neuron's stored weights (`SubtensorModule.Weights[netuid][uid]`): (destination uid, u16 value)
   * pairs, empty when it set none. At the block `at` (a hash), else at the head.
   */
  weightsRow(
    netuid: number,
    uid: number,
    opts?: { at?: string; signal?: AbortSignal },
  ): Promise<StoredWeights>;
  /** Fresh snapshot + the pure checks; nothing is signed. */
  preflight(netuid: number, uids: number[], weights: number[], versionKey: number): Promise<Preflight>;
  /** u16 weights (see convertWeightsForEmit). Resolves on inclusion, rejection or the deadline. */
  setWeights(
    netuid: number,
    uids: number[],
    weights: number[],
    versionKey: number,
    opts?: SetWeightsOptions,
  ): Promise<SetWeightsResult>;
}
