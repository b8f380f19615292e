/**
 * The chain: wallet keys and signing, float → u16 weights, pre-flight checks, error names, the
 * commit-reveal payload, and the @polkadot/api client (PolkadotChainClient: connect and startup
 * checks in polkadot.ts, reads in snapshot.ts, set_weights in extrinsic.ts, its inclusion read in
 * inclusion.ts). Import this module lazily (dynamic import) from CLI handlers: it loads @polkadot/api.
 */
export { maskUrls, polkadotOrigin, routePolkadotLogs } from "./console-bridge.js";
export {
  type PoolRejection,
  parsePoolRejection,
  SUBTENSOR_CUSTOM_ERRORS,
  type WeightsErrorKind,
  weightsErrorKind,
} from "./errors.js";
export {
  canonicalToEd25519Secret,
  ed25519ToCanonicalSecret,
  Hotkey,
  hotkeyFromKeyfile,
  hotkeyPath,
  type KeySource,
  loadHotkey,
  type Signer,
  SS58_FORMAT,
  verifySignature,
  type WalletLocation,
} from "./keys.js";
export { GENESIS_HASHES, REQUIRED_CALLS, REQUIRED_STORAGE, STAKE_STORAGE } from "./networks.js";
export {
  dispatchErrorName,
  extrinsicStatus,
  type MetadataInventory,
  metadataInventory,
  PolkadotChainClient,
  type PolkadotChainClientOptions,
} from "./polkadot.js";
export { type PreflightInput, preflightCheck } from "./preflight.js";
export {
  buildTimelockedCommit,
  DRAND_QUICKNET,
  drandIdentity,
  encodeWeightsPayload,
  type RevealRoundInput,
  revealRound,
  SECURITY_BLOCK_OFFSET,
  type TimelockedCommit,
  timelockDecrypt,
  timelockEncrypt,
  timelockOpenWithEphemeral,
} from "./timelock.js";
export type {
  ChainClient,
  ChainInfo,
  Network,
  Neuron,
  Preflight,
  PreflightProblem,
  PreflightProblemCode,
  SetWeightsOptions,
  SetWeightsResult,
  StoredWeights,
  SubnetSnapshot,
  WeightsMode,
  WeightsOutcome,
} from "./types.js";
export { convertWeightsForEmit, type EmitWeights, roundHalfEven, U16_MAX } from "./weights.js";
