/**
 * The simulator's token rules. They are not real tokenizers; they are stable, cheap and
 * documented, so that every component (meter estimates, tests, benchmarks) can predict them.
 *
 * Two text rules (the profile's `tokenizer`):
 * - "plain": ceil(ASCII characters / 4) + 1 per non-ASCII code point;
 * - "adversarial", what a miner trying to spend past the cap would hope for from a provider: runs of
 *   ASCII letters at ceil(length / 4), every other ASCII character (digit, symbol, space, newline)
 *   one token, every non-ASCII character one token per UTF-8 byte (a byte-fallback tokenizer). It
 *   counts digits three times and symbols and non-ASCII at least as high as upstream's estimate,
 *   and never more than one token per byte.
 *
 * Then, for either rule:
 * - a message: 4 tokens of overhead + its role-independent text (content, name, and for each tool
 *   call 4 + tokens(function name) + tokens(arguments));
 * - a prompt: the sum over its messages + 3 (reply priming) + tokens(JSON.stringify(tools)) when
 *   tools are offered (the tool schema is part of the prompt, as with real providers);
 * - a completion: tokens(content) + Σ (tokens(name) + tokens(arguments)) over its tool calls.
 */
export const MESSAGE_OVERHEAD = 4;
export const REPLY_PRIMING = 3;
export const TOOL_CALL_OVERHEAD = 4;

export type TokenizerName = "plain" | "adversarial";

export interface Tokenizer {
  name: TokenizerName;
  /** Tokens of a text. */
  count(text: string): number;
  /** The longest prefix of `text` whose token count is ≤ `limit`. */
  truncate(text: string, limit: number): string;
}

const isLetter = (c: number) => (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
const utf8Len = (c: number) => (c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4);

export const PLAIN: Tokenizer = {
  name: "plain",
  count(text) {
    let ascii = 0;
    let other = 0;
    for (const ch of text) {
      if (ch.charCodeAt(0) < 0x80) ascii++;
      else other++;
    }
    return Math.ceil(ascii / 4) + other;
  },
  truncate(text, limit) {
    if (limit <= 0) return "";
    if (this.count(text) <= limit) return text;
    let ascii = 0;
    let other = 0;
    let end = 0;
    for (const ch of text) {
      if (ch.charCodeAt(0) < 0x80) ascii++;
      else other++;
      if (Math.ceil(ascii / 4) + other > limit) break;
      end += ch.length;
    }
    return text.slice(0, end);
  },
};

/** Walks a text, calling `at(tokensSoFar, endOfChar)` after each character. */
function adversarialWalk(text: string, at?: (tokens: number, end: number) => boolean): number {
  let done = 0;
  let run = 0;
  let end = 0;
  for (const ch of text) {
    const c = ch.codePointAt(0)!;
    end += ch.length;
    if (isLetter(c)) run++;
    else {
      done += Math.ceil(run / 4) + utf8Len(c);
      run = 0;
    }
    if (at?.(done + Math.ceil(run / 4), end)) break;
  }
  return done + Math.ceil(run / 4);
}

export const ADVERSARIAL: Tokenizer = {
  name: "adversarial",
  count: (text) => adversarialWalk(text),
  truncate(text, limit) {
    if (limit <= 0) return "";
    let keep = 0;
    adversarialWalk(text, (tokens, end) => {
      if (tokens > limit) return true;
      keep = end;
      return false;
    });
    return text.slice(0, keep);
  },
};

export function tokenizer(name: TokenizerName): Tokenizer {
  return name === "adversarial" ? ADVERSARIAL : PLAIN;
}

export function countTokens(text: string, tk: Tokenizer = PLAIN): number {
  return tk.count(text);
}

export interface TokenMessage {
  content: string;
  name?: string | undefined;
  toolCalls: readonly { name: string; arguments: string }[];
}

export function messageTokens(m: TokenMessage, tk: Tokenizer = PLAIN): number {
  let n = MESSAGE_OVERHEAD + tk.count(m.content);
  if (m.name) n += tk.count(m.name);
  for (const tc of m.toolCalls) n += TOOL_CALL_OVERHEAD + tk.count(tc.name) + tk.count(tc.arguments);
  return n;
}

export function toolsTokens(tools: unknown, tk: Tokenizer = PLAIN): number {
  return tools === undefined || tools === null ? 0 : tk.count(JSON.stringify(tools));
}

export function promptTokens(
  messages: readonly TokenMessage[],
  tools: unknown,
  tk: Tokenizer = PLAIN,
): number {
  let n = REPLY_PRIMING + toolsTokens(tools, tk);
  for (const m of messages) n += messageTokens(m, tk);
  return n;
}

/** The longest prefix of `text` whose token count is ≤ `limit` (used to honour max_tokens). */
export function truncateToTokens(text: string, limit: number, tk: Tokenizer = PLAIN): string {
  return tk.truncate(text, limit);
}
