/** The Engy simulator: a deterministic OpenAI-compatible stand-in for the eight Engy models. */
export {
  ATTEMPT_DELIMITER,
  attemptCommand,
  classifyAttempt,
  hintLine,
  INSPECT_COMMAND,
  isAdviceRequest,
  type Plan,
  planTurn,
  type Step,
  successProbability,
  type TurnInput,
  VERIFY_COMMAND,
} from "./brain.js";
export { PrefixCache, sessionKey } from "./cache.js";
export type { BilledTokens } from "./chat.js";
export { type ChatMessage, chatRequestSchema, normaliseMessages } from "./conversation.js";
export { type Fault, type FaultKind, type FaultPlan, type FaultRule, parseFaultHeader } from "./faults.js";
export {
  DEFAULT_PROFILE,
  loadProfileFile,
  type ModelProfile,
  resolveProfile,
  SIM_MODELS,
  type SimProfile,
  type SimProfileOverride,
} from "./profile.js";
export { draw } from "./rng.js";
export { loadScenarios, makeScenario, recogniseScenario, type SimScenario } from "./scenarios.js";
export { type EngySim, type EngySimOptions, type EngySimStats, startEngySim } from "./server.js";
export {
  ADVERSARIAL,
  countTokens,
  messageTokens,
  PLAIN,
  promptTokens,
  type Tokenizer,
  type TokenizerName,
} from "./tokens.js";
