/** The meter's public face: the proxy, its configuration files and the pure pieces others reuse. */
export {
  DEFAULT_MAX_TOKENS,
  type FloatPrice,
  floatPrices,
  MIN_MAX_TOKENS,
  pyFixed6,
  reserveFor,
} from "./admission.js";
export { type AnswerAccumulator, parseUsage } from "./answer.js";
export { type MeterArtifact, type MeterRow, meterArtifact, meterRow } from "./artifact.js";
export { estimatePromptTokens, tokensFromClasses, UNBILLED_KEYS } from "./estimate.js";
export { promptBound, worstCase } from "./exposure.js";
export { fingerprint, normArgs } from "./fingerprint.js";
export { type Budget, costOf, newBudget, remaining, reserve, settle, type Usage } from "./ledger.js";
export {
  type Activity,
  type Budget4,
  type Listener,
  type ListenOptions,
  Meter,
  type MeterOptions,
  type ModelUsage,
  type UsageSummary,
} from "./meter.js";
export { formatUsd6, type Pico, picoToUsd, usdToPico } from "./money.js";
export {
  type Allowlist,
  compilePrices,
  loadAllowlist,
  loadPriceTable,
  type ModelPrice,
  type PriceTable,
  parseAllowlist,
  parsePriceTable,
  priceTableHash,
} from "./prices.js";
export type { Receipt, ReceiptSink } from "./receipt.js";
export { CLAMPED_FIELDS, DROPPED_FIELDS } from "./request.js";
export { DEFAULT_RETRY, type RetryPolicy } from "./retry.js";

import { Meter, type MeterOptions } from "./meter.js";

/** Same as `new Meter(opts)`. */
export function createMeter(opts: MeterOptions): Meter {
  return new Meter(opts);
}
