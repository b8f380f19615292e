/**
 * The real-spend bound, pure. Upstream's rule reserves a call at an estimate (admission.ts), which a
 * tokenizer can beat: digits, symbols and non-ASCII can cost a token each where the estimate counts
 * a third, so every call in flight could overshoot at once. On top of that rule the meter tracks
 * each call's true worst case — its prompt at a true upper bound of tokens plus `n` completions of
 * its max_tokens — and lets a call run beside others only while the worst cases of all calls in
 * flight fit in what is left of the cap. A call whose worst case does not fit waits until the calls
 * in flight have settled (then upstream's rule decides again, with the new spend), and runs alone
 * if it still does not fit. Hence (README, "The cap"):
 *
 *   spent ≤ cap + max over calls of (worst case − reservation)
 *
 * where only a call that ran alone can contribute, and only while the provider honours max_tokens
 * and reports usage.
 */
import type { Pico } from "./money.js";
import type { ModelPrice } from "./prices.js";

/** Chat-template tokens a provider may add per message (role markers, special tokens, separators). */
export const TEMPLATE_TOKENS_PER_MESSAGE = 16;
/** Template tokens per request (system preamble, reply priming). */
export const TEMPLATE_TOKENS_BASE = 64;
/**
 * Tokens an inline image may cost whatever its bytes (a tiny file can describe a large picture):
 * the most a vision processor cuts one image into by default (Qwen-VL's 12.8 Mpx ÷ 28² px a token).
 */
export const IMAGE_TOKENS = 16_384;

/**
 * A true upper bound of the prompt tokens a provider can bill for a request: a token covers at
 * least one byte of the text it tokenizes, and the text is at most the billed JSON (its strings
 * carry the content, escaped at least as long as raw), tools rendered as JSON with spaces (at most
 * twice their compact size), plus the template's tokens per message, plus IMAGE_TOKENS per
 * inline image (the only media the meter forwards).
 */
export function promptBound(billedBytes: number, toolsBytes: number, messages: number, images = 0): number {
  return (
    billedBytes +
    toolsBytes +
    TEMPLATE_TOKENS_PER_MESSAGE * Math.max(0, messages) +
    TEMPLATE_TOKENS_BASE +
    IMAGE_TOKENS * images
  );
}

/** The most a call can cost: the prompt bound at the prompt price and n completions of max_tokens. */
export function worstCase(price: ModelPrice, boundTokens: number, maxTokens: number, n: number): Pico {
  return (
    BigInt(boundTokens) * price.prompt +
    BigInt(Math.max(0, maxTokens)) * BigInt(Math.max(1, n)) * price.completion
  );
}

/** Whether a call's worst case fits beside the calls in flight: exposure + worst ≤ cap − spent. */
export function fitsBeside(exposure: Pico, worst: Pico, cap: Pico, spent: Pico): boolean {
  return exposure + worst <= cap - spent;
}
