import type { Network } from "./types.js";

/** Genesis hashes the startup check holds the endpoint to. `local` has none: any dev chain goes. */
export const GENESIS_HASHES: Readonly<Partial<Record<Network, string>>> = {
  finney: "0x2f0555cc76fc2840a25a6ea3b9637146806f1f44b090c175ffde2a7e5ab36c03",
  test: "0x8f9cf856bf558a14440e75569c9e58594757048d7b3a84b5d25f6bd978263105",
};

/** Storage the client reads, by metadata name. One of each STAKE_STORAGE pair suffices. */
export const REQUIRED_STORAGE = [
  "System.Events",
  "SubtensorModule.SubnetworkN",
  "SubtensorModule.Keys",
  "SubtensorModule.ValidatorPermit",
  "SubtensorModule.LastUpdate",
  "SubtensorModule.SubnetOwner",
  "SubtensorModule.Tempo",
  "SubtensorModule.WeightsSetRateLimit",
  "SubtensorModule.WeightsVersionKey",
  "SubtensorModule.CommitRevealWeightsEnabled",
  "SubtensorModule.MinAllowedWeights",
  "SubtensorModule.MaxWeightsLimit",
] as const;

export const STAKE_STORAGE = [
  "SubtensorModule.TotalHotkeyAlpha",
  "SubtensorModule.TotalHotkeyStake",
] as const;

export const REQUIRED_CALLS = ["SubtensorModule.set_weights"] as const;
