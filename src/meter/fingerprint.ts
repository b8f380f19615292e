/**
 * Provenance fingerprints of an answer, byte-compatible with the Python validator's meter so the two
 * can be compared call by call: sha256 (first 16 hex) of the stripped assistant text, and of the list
 * of [name, canonical arguments] pairs of its tool calls (Python `json.dumps(calls, sort_keys=True)`,
 * arguments re-serialised compactly with sorted keys when they parse as JSON).
 */
import { hash } from "node:crypto";
import {
  compareCodePoints,
  fromJs,
  PyFloat,
  type PyValue,
  pyDumpString,
  pyFloatRepr,
  pyJsonParse,
} from "../pack/index.js";

export interface ToolCallText {
  name: string;
  arguments: unknown;
}

export interface Fingerprint {
  contentSha: string | null;
  /** Characters (code points, Python's len) of the stripped text. */
  contentLen: number;
  toolSha: string | null;
  toolCalls: number;
}

/** Python's len() of a str: code points (a surrogate pair is one). */
export function pyLen(s: string): number {
  let n = s.length;
  for (let k = 0; k < s.length - 1; k++) {
    const c = s.charCodeAt(k);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(k + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        k++;
      }
    }
  }
  return n;
}

/** Python's str.isspace() characters, stripped at both ends as `str.strip()` does. */
const PY_STRIP =
  /^[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+|[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+$/g;

/** A code unit in Python's whitespace set (str.isspace). */
function isPySpace(c: number): boolean {
  return (
    (c >= 0x09 && c <= 0x0d) ||
    (c >= 0x1c && c <= 0x20) ||
    c === 0x85 ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000
  );
}

export function pyStrip(s: string): string {
  // Most answers have nothing to strip: skip the regular expression then.
  if (s.length === 0 || (!isPySpace(s.charCodeAt(0)) && !isPySpace(s.charCodeAt(s.length - 1)))) return s;
  return s.replace(PY_STRIP, "");
}

function sha16(s: string): string {
  return hash("sha256", s, "hex").slice(0, 16);
}

/** `json.dumps(v, sort_keys=True, separators=(",", ":"))`. */
export function pyJsonDumpsCompact(value: PyValue): string {
  if (value === null) return "null";
  if (value === true) return "true";
  if (value === false) return "false";
  if (typeof value === "string") return pyDumpString(value);
  if (typeof value === "bigint") return value.toString();
  if (value instanceof PyFloat) return pyFloatRepr(value.value);
  if (Array.isArray(value)) return `[${value.map(pyJsonDumpsCompact).join(",")}]`;
  const keys = [...value.keys()].sort(compareCodePoints);
  return `{${keys.map((k) => `${pyDumpString(k)}:${pyJsonDumpsCompact(value.get(k)!)}`).join(",")}}`;
}

/**
 * The common case of normArgs, without the Python-faithful parser: a text JSON.parse accepts whose
 * numbers are all integers (no digit followed by '.', 'e' or 'E' anywhere, no NaN or Infinity) reads
 * the same in JSON.parse and in Python's json.loads (a repeated key keeps its last value in both, and
 * the keys are sorted anyway). Undefined when the exact path must decide.
 */
function fastCanonical(text: string): string | undefined {
  if (/\d[.eE]|NaN|Infinity/.test(text)) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  return dumpSorted(v);
}

/** `json.dumps(v, sort_keys=True, separators=(",", ":"))` of a JSON.parse value with integer numbers. */
function dumpSorted(v: unknown): string | undefined {
  if (v === null) return "null";
  if (v === true) return "true";
  if (v === false) return "false";
  if (typeof v === "string") return pyDumpString(v);
  if (typeof v === "number") return Number.isSafeInteger(v) ? String(v === 0 ? 0 : v) : undefined;
  if (Array.isArray(v)) {
    const parts: string[] = [];
    for (const x of v) {
      const d = dumpSorted(x);
      if (d === undefined) return undefined;
      parts.push(d);
    }
    return `[${parts.join(",")}]`;
  }
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o).sort(compareCodePoints);
  const parts: string[] = [];
  for (const k of keys) {
    const d = dumpSorted(o[k]);
    if (d === undefined) return undefined;
    parts.push(`${pyDumpString(k)}:${d}`);
  }
  return `{${parts.join(",")}}`;
}

/** Tool-call arguments as canonical JSON when they parse, else the raw text stripped. */
export function normArgs(args: unknown): string {
  if (args !== null && typeof args === "object") {
    try {
      return pyJsonDumpsCompact(fromJs(args));
    } catch {
      return "";
    }
  }
  const text = typeof args === "string" ? args : args === undefined || args === null ? "" : String(args);
  const fast = fastCanonical(text);
  if (fast !== undefined) return fast;
  try {
    return pyJsonDumpsCompact(pyJsonParse(text));
  } catch {
    return pyStrip(text);
  }
}

/** `json.dumps([[name, args], …], sort_keys=True)` for pairs of strings (default separators). */
function dumpCalls(calls: readonly (readonly [string, string])[]): string {
  return `[${calls.map(([n, a]) => `[${pyDumpString(n)}, ${pyDumpString(a)}]`).join(", ")}]`;
}

export function fingerprint(content: string, toolCalls: readonly ToolCallText[]): Fingerprint {
  const text = pyStrip(content);
  const calls = toolCalls.map((tc) => [tc.name, normArgs(tc.arguments)] as const);
  return {
    contentSha: text ? sha16(text) : null,
    contentLen: pyLen(text),
    toolSha: calls.length > 0 ? sha16(dumpCalls(calls)) : null,
    toolCalls: calls.length,
  };
}
