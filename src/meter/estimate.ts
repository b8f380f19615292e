/**
 * The prompt estimate a call is reserved at, upstream's rule exactly (`trajectoryrl/policy/meter.py`,
 * `estimate_prompt_tokens`): the request minus its generation knobs, as Python's
 * `json.dumps(billed, ensure_ascii=False, separators=(",", ":"))` prints it after `json.loads`; then
 * per character: ASCII letters, digits, space, tab and newline are "plain" (3 to a token), other ASCII
 * (punctuation, symbols) and every non-ASCII character are one token each; the sum × 1.25, truncated
 * (`int`), + 16. Same floating-point operations in the same order as Python, so the same integer.
 *
 * The meter counts the classes from the raw request bytes in one pass (scan.ts); the functions here
 * are the definition that pass is property-tested against, and the path for the odd body the pass
 * declines (a repeated key inside a nested object).
 */
import { type PyValue, pyFloatRepr, pyJsonParseBytes } from "../pack/index.js";

/** Request fields that are not model input (generation knobs and routing): upstream's `_UNBILLED_KEYS`. */
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

/** Characters of the billed JSON text by upstream's classes, plus its UTF-8 size. */
export interface CharClasses {
  /** ASCII letters, digits, space, tab, newline. */
  plain: number;
  /** Other ASCII (punctuation, symbols, control). */
  dense: number;
  /** Code points above 127. */
  nonAscii: number;
  /** UTF-8 bytes of the text (for the real-spend bound). */
  bytes: number;
}

export const zeroClasses = (): CharClasses => ({ plain: 0, dense: 0, nonAscii: 0, bytes: 0 });

/** int((plain / 3.0 + (dense + non_ascii) * 1.0) * 1.25) + 16, in IEEE doubles as Python computes it. */
export function tokensFromClasses(c: CharClasses): number {
  return Math.trunc((c.plain / 3 + (c.dense + c.nonAscii) * 1) * 1.25) + 16;
}

const isPlainAscii = (c: number) =>
  (c >= 0x30 && c <= 0x39) ||
  (c >= 0x41 && c <= 0x5a) ||
  (c >= 0x61 && c <= 0x7a) ||
  c === 0x20 ||
  c === 0x09 ||
  c === 0x0a;

/** The classes of a string, per code point (a surrogate pair is one character, as in Python). */
export function classify(text: string): CharClasses {
  const out = zeroClasses();
  for (const ch of text) {
    const c = ch.codePointAt(0)!;
    if (c > 127) {
      out.nonAscii++;
      // A lone surrogate is 3 bytes in Python's "surrogatepass" sense; it only counts for the bound.
      out.bytes += c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    } else {
      if (isPlainAscii(c)) out.plain++;
      else out.dense++;
      out.bytes++;
    }
  }
  return out;
}

/** `json.dumps(s, ensure_ascii=False)` of a string: only `"`, `\` and control characters are escaped. */
export function pyDumpStringRaw(s: string): string {
  let out = '"';
  let from = 0;
  for (let k = 0; k < s.length; k++) {
    const c = s.charCodeAt(k);
    if (c >= 0x20 && c !== 0x22 && c !== 0x5c) continue;
    out += s.slice(from, k);
    out +=
      c === 0x22
        ? '\\"'
        : c === 0x5c
          ? "\\\\"
          : c === 0x0a
            ? "\\n"
            : c === 0x0d
              ? "\\r"
              : c === 0x09
                ? "\\t"
                : c === 0x08
                  ? "\\b"
                  : c === 0x0c
                    ? "\\f"
                    : `\\u${c.toString(16).padStart(4, "0")}`;
    from = k + 1;
  }
  return `${out}${s.slice(from)}"`;
}

/** `json.dumps(v, ensure_ascii=False, separators=(",", ":"))`, keys in insertion order. */
export function pyDumpsCompact(v: PyValue): string {
  if (v === null) return "null";
  if (v === true) return "true";
  if (v === false) return "false";
  if (typeof v === "string") return pyDumpStringRaw(v);
  if (typeof v === "bigint") return v.toString();
  if (Array.isArray(v)) return `[${v.map(pyDumpsCompact).join(",")}]`;
  if (v instanceof Map)
    return `{${[...v].map(([k, x]) => `${pyDumpStringRaw(k)}:${pyDumpsCompact(x)}`).join(",")}}`;
  return pyFloatRepr(v.value);
}

/** The billed part of a parsed request (a dict), as upstream serialises it. */
export function billedText(body: Map<string, PyValue>): string {
  const billed = new Map<string, PyValue>();
  for (const [k, v] of body) if (!UNBILLED_KEYS.has(k)) billed.set(k, v);
  return pyDumpsCompact(billed);
}

/**
 * The definition: classes of a request body (raw bytes) as upstream computes them, through a
 * Python-faithful parse. Throws when Python's `json.loads` would (or the body is not an object).
 */
export function billedClassesOf(body: Uint8Array): CharClasses {
  const v = pyJsonParseBytes(body);
  if (!(v instanceof Map)) throw new TypeError("the request body is not a JSON object");
  return classify(billedText(v));
}

/** Upstream's prompt estimate of a request body (raw bytes, its text, or a value to serialise). */
export function estimatePromptTokens(body: Uint8Array | string | Record<string, unknown>): number {
  const bytes =
    body instanceof Uint8Array ? body : Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
  return tokensFromClasses(billedClassesOf(bytes));
}
