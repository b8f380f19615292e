/**
 * The cap arithmetic, pure: what a call may cost before it is forwarded, and what it did cost after.
 * All amounts are pico-dollars (bigint). The caller applies a decision synchronously, before any
 * await, so concurrent calls of one episode can never reserve the same room twice.
 *
 * Invariant (property-tested): spent ≤ cap + overshoot at every step, reserved ≥ 0, and
 * spent + reserved ≤ cap while no call has overshot.
 */
import type { Pico } from "./money.js";
import type { ModelPrice } from "./prices.js";

/** A request without max_tokens is reserved (and capped) at this completion length. */
export const DEFAULT_MAX_TOKENS = 8192;
/** Fewer completion tokens than this fit → the call is refused (402) instead of clamped to uselessness. */
export const MIN_MAX_TOKENS = 64;

export interface Budget {
  readonly cap: Pico;
  readonly spent: Pico;
  readonly reserved: Pico;
  readonly overshoot: Pico;
  /** Set by the first overshoot: every later call is refused. */
  readonly closed: boolean;
}

export function newBudget(cap: Pico): Budget {
  if (cap < 0n) throw new RangeError("negative cap");
  return { cap, spent: 0n, reserved: 0n, overshoot: 0n, closed: false };
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

export interface ReservationRequest {
  price: ModelPrice;
  /** Worst-case prompt tokens (estimate.ts). */
  promptTokens: number;
  /** max_tokens asked for (DEFAULT_MAX_TOKENS when absent); ≥ 1. */
  wantMaxTokens: number;
  /** Completions asked for (`n`); ≥ 1. Each may run to max_tokens. */
  choices: number;
}

export type Reservation =
  | { ok: true; reserved: Pico; promptCost: Pico; maxTokens: number; clamped: boolean }
  | { ok: false; reason: "closed" | "cap"; room: Pico; fits: number };

/**
 * The reservation for one call against `room`: prompt at list price plus max_tokens × choices at the
 * completion price. max_tokens is lowered to the largest value that fits; under MIN_MAX_TOKENS the
 * call is refused.
 */
export function planReservation(b: Budget, req: ReservationRequest): Reservation {
  const r = room(b);
  if (b.closed) return { ok: false, reason: "closed", room: r, fits: 0 };
  const promptCost = BigInt(req.promptTokens) * req.price.prompt;
  if (promptCost >= r) return { ok: false, reason: "cap", room: r, fits: 0 };
  const perToken = req.price.completion * BigInt(req.choices);
  const want = req.wantMaxTokens;
  // How many completion tokens the room pays for, independent of what was asked: a small
  // max_tokens on a nearly empty budget is refused like a large one.
  const fitsBig = perToken === 0n ? BigInt(Number.MAX_SAFE_INTEGER) : (r - promptCost) / perToken;
  const fits = fitsBig > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(fitsBig);
  if (fits < MIN_MAX_TOKENS) return { ok: false, reason: "cap", room: r, fits };
  const maxTokens = Math.min(want, fits);
  return {
    ok: true,
    reserved: promptCost + BigInt(maxTokens) * perToken,
    promptCost,
    maxTokens,
    clamped: maxTokens < want,
  };
}

/** Book an accepted reservation. */
export function reserve(b: Budget, amount: Pico): Budget {
  if (amount < 0n) throw new RangeError("negative reservation");
  return {
    cap: b.cap,
    spent: b.spent,
    reserved: b.reserved + amount,
    overshoot: b.overshoot,
    closed: b.closed,
  };
}

export interface Settlement {
  budget: Budget;
  /** Cost above the reservation (0 when the call stayed within it). */
  overshoot: Pico;
}

/** Release a call's reservation and book what it actually cost; excess is overshoot and closes the budget. */
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
      closed: b.closed || over > 0n,
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
