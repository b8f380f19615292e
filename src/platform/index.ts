/**
 * The platform module's public face: the TrajectoryRL API client, message signing, pack fetching,
 * verdict delivery (its rules and shell) and the outbox's storage port (OutboxPort, implemented by
 * src/store's VerdictOutboxRepo). Endpoints and their sources: ./README.md. Signature verification (verify.ts, for
 * the fake platform, tests and tooling) loads @polkadot/util-crypto, which chain/keys loads anyway; its
 * WASM backend initialises only on the first verifierReady().
 */

export { isPublicAddress, publicOnlyLookup } from "./address.js";
export {
  buildScoreBody,
  type CallOptions,
  type CycleLogUpload,
  classifyConflict,
  DEFAULT_TIMEOUTS,
  type EvalLogUpload,
  MAX_LOG_ARCHIVE_BYTES,
  PlatformClient,
  type PlatformClientOptions,
  type PlatformTimeouts,
  type PostResult,
  type ScoreOutcome,
  scoreOutcomeOf,
} from "./client.js";
export { type DeliveryDeps, type DeliveryReport, deliverDueVerdicts } from "./delivery.js";
export {
  type BackoffPolicy,
  backoffDelayMs,
  DEFAULT_BACKOFF,
  type DeliveryTransition,
  isDue,
  isExpired,
  type OutboxEntry,
  type OutboxOutcome,
  type OutboxPort,
  type OutboxState,
  transitionAfter,
} from "./delivery-rules.js";
export { assessEpoch, type EpochDecision, LATEST_START_RATIO, stillCurrent } from "./epoch.js";
export {
  type FetchPackOptions,
  fetchPack,
  MAX_PACK_REDIRECTS,
  type ObtainedPack,
  obtainPack,
  PACK_FETCH_TIMEOUT_MS,
  PackCache,
} from "./pack-fetch.js";
export {
  budgetLengthBlocks,
  type ChallengeEpoch,
  type ChallengerVerdict,
  COLD_START,
  type EpochCurrent,
  epochCurrentSchema,
  type FinalizedEpoch,
  type HeartbeatInfo,
  type LogReceipt,
  SCENARIO_STATES,
  type ScenarioProgressEvent,
  type ScenarioState,
  type ScoreBody,
  type ScoreReceipt,
  type ScoreVerdict,
  type SeatedWinner,
  scoreBodySchema,
  scoreVerdictSchema,
  type Vote,
  type WinnerCurrent,
  winnerCurrentSchema,
} from "./schemas.js";
export {
  challengeScoreMessage,
  epochCurrentMessage,
  heartbeatMessage,
  logsMessage,
  PREFIX,
  type SignedFields,
  type Signer,
  type SigningPair,
  type SignPrefix,
  scenarioProgressMessage,
  signedMessage,
  signerFromPair,
  signFields,
  unixSeconds,
} from "./signing.js";
export { verifierReady, verifyMessage } from "./verify.js";
