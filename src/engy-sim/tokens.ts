/**
 * The simulator's token rule. It is not a real tokenizer; it is stable, cheap and documented, so
 * that every component (meter estimates, tests, benchmarks) can predict it:
 *
 * - text: ceil(ASCII characters / 4) + 1 per non-ASCII code point;
 * - a message: 4 tokens of overhead + its role-independent text (content, name, and for each tool
 *   call 4 + tokens(function name) + tokens(arguments));
 * - a prompt: the sum over its messages + 3 (reply priming) + tokens(JSON.stringify(tools)) when
 *   tools are offered (the tool schema is part of the prompt, as with real providers);
 * - a completion: tokens(content) + Σ (tokens(name) + tokens(arguments)) over its tool calls.
 */
export const MESSAGE_OVERHEAD = 4;
export const REPLY_PRIMING = 3;
export const TOOL_CALL_OVERHEAD = 4;

export function countTokens(text: string): number {
  let ascii = 0;
  let other = 0;
  for (const ch of text) {
    if (ch.charCodeAt(0) < 0x80) ascii++;
    else other++;
  }
  return Math.ceil(ascii / 4) + other;
}

export interface TokenMessage {
  content: string;
  name?: string | undefined;
  toolCalls: readonly { name: string; arguments: string }[];
}

export function messageTokens(m: TokenMessage): number {
  let n = MESSAGE_OVERHEAD + countTokens(m.content);
  if (m.name) n += countTokens(m.name);
  for (const tc of m.toolCalls) n += TOOL_CALL_OVERHEAD + countTokens(tc.name) + countTokens(tc.arguments);
  return n;
}

export function toolsTokens(tools: unknown): number {
  return tools === undefined || tools === null ? 0 : countTokens(JSON.stringify(tools));
}

export function promptTokens(messages: readonly TokenMessage[], tools: unknown): number {
  let n = REPLY_PRIMING + toolsTokens(tools);
  for (const m of messages) n += messageTokens(m);
  return n;
}

/** The longest prefix of `text` whose token count is ≤ `limit` (used to honour max_tokens). */
export function truncateToTokens(text: string, limit: number): string {
  if (limit <= 0) return "";
  if (countTokens(text) <= limit) return text;
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
}
