/** The meter's public face: the proxy, its configuration files and the pure pieces others reuse. */
export { type AnswerAccumulator, parseUsage } from "./answer.js";
export { estimatePromptTokens, UNBILLED_KEYS } from "./estimate.js";
export { fingerprint, normArgs } from "./fingerprint.js";
export {
  type Budget,
  costOf,
  DEFAULT_MAX_TOKENS,
  MIN_MAX_TOKENS,
  newBudget,
  planReservation,
  type Reservation,
  remaining,
  reserve,
  settle,
  type Usage,
} from "./ledger.js";
export {
  type Activity,
  type Budget4,
  type Listener,
  Meter,
  type MeterOptions,
  type ModelUsage,
  type UsageSummary,
} from "./meter.js";
export { formatUsd6, type Pico, picoToUsd, usdToPico } from "./money.js";
export {
  type Allowlist,
  compilePrices,
  DEFAULT_ALLOWLIST_PATH,
  DEFAULT_PRICE_TABLE_PATH,
  loadAllowlist,
  loadPriceTable,
  type ModelPrice,
  type PriceTable,
  parseAllowlist,
  parsePriceTable,
  priceTableHash,
} from "./prices.js";
export type { Receipt, ReceiptSink } from "./receipt.js";
export { DEFAULT_RETRY, type RetryPolicy } from "./retry.js";

import { Meter, type MeterOptions } from "./meter.js";

/** Same as `new Meter(opts)`. */
export function createMeter(opts: MeterOptions): Meter {
  return new Meter(opts);
}
