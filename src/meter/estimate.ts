/**
 * The worst-case prompt estimate a call is reserved at (FUSION_POLICY.md, "Allowlist and prices"):
 * every billed input field of the request (messages, tools, response_format, …: the body minus the
 * generation knobs) as compact JSON without ASCII escaping, ASCII at 3 characters per token and every
 * non-ASCII character at one token, times a 1.25 safety factor, rounded up. No cache hits assumed.
 *
 * The count is what JSON.stringify would print for those members. The meter gets it from the raw
 * request text in one pass (rawjson.ts) so a large conversation is never re-serialised; the
 * functions here are the definition that pass is tested against, and the fallback.
 */

/** Request fields that are not model input (generation knobs and routing). */
export const UNBILLED_KEYS: ReadonlySet<string> = new Set([
  "stream",
  "stream_options",
  "max_tokens",
  "max_completion_tokens",
  "temperature",
  "top_p",
  "n",
  "seed",
  "user",
  "model",
  "logprobs",
  "top_logprobs",
  "presence_penalty",
  "frequency_penalty",
  "stop",
  "parallel_tool_calls",
  "tool_choice",
  "reasoning_effort",
]);

export interface CharCount {
  ascii: number;
  nonAscii: number;
}

const NON_ASCII_UNIT = /[^\x00-\x7f]/g;
const NON_ASCII_CODE_POINT = /[^\x00-\x7f]/gu;
const SURROGATE = /[\ud800-\udfff]/;

function countMatches(s: string, re: RegExp): number {
  return s.match(re)?.length ?? 0;
}

/** ASCII characters and non-ASCII code points of a string (a surrogate pair is one character, as in Python). */
export function countText(s: string): CharCount {
  // UTF-8 length equals the UTF-16 length only when every character is ASCII: a native check.
  if (Buffer.byteLength(s, "utf8") === s.length) return { ascii: s.length, nonAscii: 0 };
  const units = countMatches(s, NON_ASCII_UNIT);
  const points = SURROGATE.test(s) ? countMatches(s, NON_ASCII_CODE_POINT) : units;
  return { ascii: s.length - units, nonAscii: points };
}

/** Characters of the compact, non-escaped JSON of a value. */
export function countJsonChars(value: unknown): CharCount {
  return countText(JSON.stringify(value) ?? "null");
}

/**
 * Characters of the billed part of a request, given `json` = JSON.stringify(body): the whole, minus
 * each unbilled member and its comma.
 */
export function countBilledChars(
  body: Record<string, unknown>,
  json: string = JSON.stringify(body),
): CharCount {
  const c = countText(json);
  let billed = 0;
  for (const key in body) {
    if (!Object.hasOwn(body, key) || body[key] === undefined) continue;
    if (!UNBILLED_KEYS.has(key)) {
      billed++;
      continue;
    }
    const m = countText(`${JSON.stringify(key)}:${JSON.stringify(body[key])}`);
    c.ascii -= m.ascii + 1;
    c.nonAscii -= m.nonAscii;
  }
  return billed === 0 ? { ascii: 2, nonAscii: 0 } : c;
}

/** ⌈(ascii/3 + nonAscii) × 1.25⌉ = ⌈(ascii + 3·nonAscii) · 5 / 12⌉, in integers. */
export function tokensFromChars(c: CharCount): number {
  return Math.ceil(((c.ascii + 3 * c.nonAscii) * 5) / 12);
}

/** Worst-case prompt tokens of a chat request (`json`: its JSON.stringify, when already at hand). */
export function estimatePromptTokens(body: Record<string, unknown>, json?: string): number {
  return tokensFromChars(countBilledChars(body, json));
}

/** Tokens of generated text when the provider reported no usage: same rule, no safety factor. */
export function estimateTextTokens(ascii: number, nonAscii: number): number {
  return Math.ceil((ascii + 3 * nonAscii) / 3);
}
