/**
 * The exact ledger, pure: what the episode's calls cost, in pico-dollars (bigint). Which calls are
 * refused or clamped is decided by upstream's rule (admission.ts); the ledger books the
 * reservation that rule granted and, after the call, what it did cost. Its figures are the ones
 * receipts and cost reports add up to.
 *
 * Invariant (property-tested): spent = Σ booked costs, overshoot = Σ max(0, cost − reservation),
 * reserved ≥ 0 and back to 0 when no call is in flight.
 */
import type { Pico } from "./money.js";
import type { ModelPrice } from "./prices.js";

export interface Budget {
  readonly cap: Pico;
  readonly spent: Pico;
  readonly reserved: Pico;
  readonly overshoot: Pico;
}

export function newBudget(cap: Pico): Budget {
  if (cap < 0n) throw new RangeError("negative cap");
  return { cap, spent: 0n, reserved: 0n, overshoot: 0n };
}

/** What is left for new reservations (negative after an overshoot). */
export function room(b: Budget): Pico {
  return b.cap - b.spent - b.reserved;
}

/** Remaining as the API reports it: never below zero. */
export function remaining(b: Budget): Pico {
  const r = room(b);
  return r > 0n ? r : 0n;
}

/** Book an accepted reservation. */
export function reserve(b: Budget, amount: Pico): Budget {
  if (amount < 0n) throw new RangeError("negative reservation");
  return {
    cap: b.cap,
    spent: b.spent,
    reserved: b.reserved + amount,
    overshoot: b.overshoot,
  };
}

export interface Settlement {
  budget: Budget;
  /** Cost above the reservation (0 when the call stayed within it). */
  overshoot: Pico;
}

/** Release a call's reservation and book what it actually cost; the excess is overshoot (booked, visible). */
export function settle(b: Budget, reserved: Pico, actual: Pico): Settlement {
  if (actual < 0n || reserved < 0n) throw new RangeError("negative amount");
  const over = actual > reserved ? actual - reserved : 0n;
  const released = b.reserved - reserved;
  return {
    budget: {
      cap: b.cap,
      spent: b.spent + actual,
      reserved: released > 0n ? released : 0n,
      overshoot: b.overshoot + over,
    },
    overshoot: over,
  };
}

export interface Usage {
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
}

/** cost = (prompt − cached)·p + cached·c_read + completion·c; cached is bounded by prompt. */
export function costOf(price: ModelPrice, u: Usage): Pico {
  const prompt = BigInt(Math.max(0, u.promptTokens));
  let cached = BigInt(Math.max(0, u.cachedTokens));
  if (cached > prompt) cached = prompt;
  const completion = BigInt(Math.max(0, u.completionTokens));
  return (prompt - cached) * price.prompt + cached * price.cacheRead + completion * price.completion;
}
