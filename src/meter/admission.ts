/**
 * Upstream's admission rule, as its meter computes it (`reserve_for`, `cost_of`, the budget header):
 * in IEEE doubles, the same operations in the same order, so a call is refused or clamped at exactly
 * the point where upstream's validators refuse or clamp it. The episode keeps this "upstream view"
 * ({cap, spent, reserved} in USD doubles) beside its exact pico-dollar ledger (ledger.ts): the view
 * decides what is refused and clamped and what the budget header and /v1/budget say; the ledger is
 * what the receipts and the cost report add up to. Pure.
 */
import type { PriceTable } from "./prices.js";

/** A request without max_tokens is reserved (and capped) at this completion length. */
export const DEFAULT_MAX_TOKENS = 8192;
/** Fewer completion tokens than this fit → the call is refused (402) instead of clamped to uselessness. */
export const MIN_MAX_TOKENS = 64;

/** USD per token, as upstream's MODEL_PRICES holds them (the decimal `x.xxe-6` read as a double). */
export interface FloatPrice {
  prompt: number;
  completion: number;
  cacheRead: number;
}

export function floatPrices(table: PriceTable): Map<string, FloatPrice> {
  const perToken = (usdPerMillion: number) => Number(`${usdPerMillion}e-6`);
  const out = new Map<string, FloatPrice>();
  for (const [model, p] of Object.entries(table.models))
    out.set(model, {
      prompt: perToken(p.prompt),
      completion: perToken(p.completion),
      cacheRead: perToken(p.cache_read),
    });
  return out;
}

/** An episode as upstream's meter sees it: USD doubles. */
export interface UpstreamView {
  cap: number;
  spent: number;
  reserved: number;
  overshoot: number;
}

export const newView = (cap: number): UpstreamView => ({ cap, spent: 0, reserved: 0, overshoot: 0 });

/** What is left for new reservations: cap − spent − reserved (negative after an overshoot). */
export const viewRoom = (v: UpstreamView): number => v.cap - v.spent - v.reserved;

export type Admission =
  | { ok: true; reserved: number; maxTokens: number; clamped: boolean }
  | { ok: false; room: number };

/**
 * `reserve_for`: the prompt at list price must be below the room; max_tokens (`want`) is lowered to
 * what fits; fewer than 64 completion tokens is a refusal. Two deliberate differences: `n`
 * completions are reserved (upstream reserves one whatever `n`; with n = 1 the arithmetic is
 * upstream's to the bit), and a negative `want` (which the provider refuses anyway) reserves the
 * prompt alone, where upstream's arithmetic would book a negative reservation and enlarge every
 * other call's room.
 */
export function reserveFor(
  price: FloatPrice,
  promptTokens: number,
  want: number,
  room: number,
  n = 1,
): Admission {
  const promptUsd = promptTokens * price.prompt;
  if (promptUsd >= room) return { ok: false, room };
  const c = price.completion;
  const fits = c > 0 ? Math.trunc((room - promptUsd) / c / n) : want;
  if (fits < MIN_MAX_TOKENS) return { ok: false, room };
  const clamped = fits < want;
  const maxTokens = Math.min(want, fits);
  return { ok: true, reserved: promptUsd + Math.max(maxTokens, 0) * c * n, maxTokens, clamped };
}

/** `cost_of`: (prompt − cached)·p + cached·c_read + completion·c, as upstream computes it (cached not bounded). */
export function floatCost(price: FloatPrice, prompt: number, cached: number, completion: number): number {
  return (prompt - cached) * price.prompt + cached * price.cacheRead + completion * price.completion;
}

/** Book a call's reservation (upstream: `reserved_usd += reserved`). */
export function viewReserve(v: UpstreamView, reserved: number): void {
  v.reserved += reserved;
}

/** Settle a call that returned (upstream: release, then book the cost; excess is overshoot). */
export function viewSettle(v: UpstreamView, reserved: number, usd: number): void {
  v.reserved = Math.max(0, v.reserved - reserved);
  if (usd > reserved) v.overshoot += usd - reserved;
  v.spent += usd;
}

/** The budget header's value before a call (stream, refusals, errors) … */
export const remainingBefore = (v: UpstreamView): number => Math.max(0, v.cap - v.spent - v.reserved);
/** … and after a non-stream call was booked (upstream leaves other calls' reservations out of it). */
export const remainingAfter = (v: UpstreamView): number => Math.max(0, v.cap - v.spent);

/** Python's `f"{x:.6f}"` and `round(x, 6)`: one home for the rounding of every number (src/precision.ts). */
export { pyFixed6, pyRound6 } from "../precision.js";
