/**
 * The boundary of a chat request. The body's bytes go through scan.ts (scanChatBody: the heavy,
 * linear part, which scan-pool.ts may run off the event loop), which accepts exactly what Python's
 * `json.loads` accepts (so a request upstream's meter takes is taken here, but for the content parts
 * and tools it checks); the knobs the meter reads are then interpreted as upstream's meter
 * interprets them (interpretRequest):
 *  - `model`: must be a string on the allowlist;
 *  - `stream`: Python truthiness (`bool(body.get("stream"))`);
 *  - the completion length: `max_tokens or max_completion_tokens or 8192`, through Python's `int()`
 *    (a string of digits counts, anything it cannot convert means 8192);
 *  - `stream_options` (stream only): an object or absent, `include_usage` forced on;
 *  - `n`: absent, null, or an integer from 1 to 128 (upstream does not read it).
 * Every field that decides the answer's mode or its bill is forwarded as the meter read it — a JSON
 * boolean `stream`, integers `max_tokens` and `n`, `include_usage: true` — so no provider can read
 * it otherwise (a lax validator takes "no" for false, JavaScript takes [] for true). Every other
 * field is forwarded byte for byte, except those that could make the provider bill more than the
 * reservation assumes (DROPPED_FIELDS, CLAMPED_FIELDS; README "Fields the meter rewrites"). zod
 * checks the shape of the knob objects the meter rewrites.
 */
import { z } from "zod";
import { type PyValue, pyJsonParse } from "../pack/index.js";
import { DEFAULT_MAX_TOKENS } from "./admission.js";
import { type CharClasses, tokensFromClasses, UNBILLED_KEYS } from "./estimate.js";
import { promptBound } from "./exposure.js";
import { type Member, type RequestScan, ScanError, scanRequest } from "./scan.js";

/**
 * Fields never forwarded: they make a provider generate (and bill) more than one completion of
 * max_tokens, stand for max_tokens under another name, render the prompt by a template of the
 * client's own, cut an image into more tokens, or search the web (billed per search, and out of
 * the episode).
 */
export const DROPPED_FIELDS: ReadonlySet<string> = new Set([
  "best_of",
  "use_beam_search",
  "beam_width",
  "num_beams",
  "num_return_sequences",
  "thinking_budget",
  "max_thinking_tokens",
  "max_reasoning_tokens",
  "max_new_tokens",
  "max_output_tokens",
  "chat_template",
  "mm_processor_kwargs",
  "web_search_options",
  "enable_search",
  "search_parameters",
]);
/** Fields forwarded with their token budgets clamped to the forwarded max_tokens. */
export const CLAMPED_FIELDS: ReadonlySet<string> = new Set(["min_tokens", "reasoning", "thinking"]);
/** Fields forwarded as the meter read them (written at the head of the forwarded body). */
const REWRITTEN: ReadonlySet<string> = new Set(["max_tokens", "max_completion_tokens", "stream", "n"]);
/** Fields the meter parses: each at most MAX_KNOB_BYTES of JSON, so no parse of them holds the loop. */
const READ: ReadonlySet<string> = new Set([
  "model",
  "stream",
  "stream_options",
  "max_tokens",
  "max_completion_tokens",
  "n",
  ...CLAMPED_FIELDS,
]);
export const MAX_KNOB_BYTES = 64 * 1024;
/** The most completions one call may ask for (OpenAI's own limit). */
export const MAX_N = 128;

export class InvalidRequest extends Error {}

const streamOptionsSchema = z.looseObject({}).nullish();
const budgetObjectSchema = z.looseObject({
  max_tokens: z.unknown().optional(),
  budget_tokens: z.unknown().optional(),
});

/** A parsed chat request: what the meter needs to decide, and the bytes to forward. */
export interface ChatRequest {
  raw: Buffer;
  /** The last occurrence of each top-level key, in order of first appearance. */
  members: Member[];
  model: unknown;
  /** Stream or not, by Python's truthiness of `stream` (forwarded as this boolean when given). */
  stream: boolean;
  streamGiven: boolean;
  streamOptions: Record<string, unknown> | null;
  /** Upstream's `want`: the completion length asked for, through Python's int(). */
  want: number;
  /** Completions asked for (1 unless `n` says otherwise; forwarded as this integer when given). */
  n: number;
  nGiven: boolean;
  classes: CharClasses;
  promptEstimate: number;
  /** A true upper bound of the prompt tokens (exposure.ts). */
  promptBound: number;
}

/** Python's truthiness of a JSON value. */
export function pyTruthy(v: unknown): boolean {
  if (v === null || v === undefined || v === false || v === "" || v === 0) return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === "object") return Object.keys(v as object).length > 0;
  return true; // NaN is truthy in Python
}

/** Python's str.strip() whitespace. */
const PY_WS = /^[\s\x1c-\x1f\x85]+|[\s\x1c-\x1f\x85]+$/gu;
const PY_INT = /^[+-]?\p{Nd}(?:_?\p{Nd})*$/u;
const ND = /\p{Nd}/u;

/** The value of a decimal digit (any script): its offset in its run of ten. */
function digitValue(cp: number): number {
  if (cp >= 0x30 && cp <= 0x39) return cp - 0x30;
  let start = cp;
  while (start > 0 && ND.test(String.fromCodePoint(start - 1))) start--;
  return (cp - start) % 10;
}

/** Python's `int(v)`: a number, or "value_error" (TypeError/ValueError), or "overflow" (int(inf)). */
export function pyInt(v: unknown): number | "value_error" | "overflow" {
  if (typeof v === "boolean") return v ? 1 : 0;
  if (typeof v === "number") {
    if (Number.isNaN(v)) return "value_error";
    if (!Number.isFinite(v)) return "overflow";
    return Math.trunc(v);
  }
  if (typeof v === "string") {
    const s = v.replace(PY_WS, "");
    if (!PY_INT.test(s)) return "value_error";
    let n = 0;
    for (const ch of s) {
      if (ch === "+" || ch === "-" || ch === "_") continue;
      n = n * 10 + digitValue(ch.codePointAt(0)!);
    }
    return s.startsWith("-") ? -n : n;
  }
  return "value_error";
}

function toJs(v: PyValue): unknown {
  if (v === null || typeof v === "boolean" || typeof v === "string") return v;
  if (typeof v === "bigint") return Number(v);
  if (Array.isArray(v)) return v.map(toJs);
  if (v instanceof Map) return Object.fromEntries([...v].map(([k, x]) => [k, toJs(x)]));
  return v.value;
}

/** A member's value as JS (NaN/Infinity, which JSON.parse refuses, through the Python parser). */
function memberValue(raw: Buffer, m: Member): unknown {
  const text = raw.toString("utf8", m.valueStart, m.end);
  try {
    return JSON.parse(text);
  } catch {
    return toJs(pyJsonParse(text));
  }
}

/** The heavy part of parsing: one linear pass over the bytes (scan.ts). Throws InvalidRequest. */
export function scanChatBody(raw: Buffer): RequestScan {
  try {
    return scanRequest(raw, (k) => !UNBILLED_KEYS.has(k));
  } catch (err) {
    if (err instanceof ScanError) throw new InvalidRequest(`body: ${err.message}`);
    throw err;
  }
}

/** `n`: absent or null is one completion (not forwarded); else an integer from 1 to MAX_N. */
function completions(v: unknown): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > MAX_N)
    throw new InvalidRequest(`n: expected an integer from 1 to ${MAX_N}`);
  return v;
}

/** The knobs of a scanned body, as upstream's meter reads them. Throws InvalidRequest. */
export function interpretRequest(raw: Buffer, scan: RequestScan): ChatRequest {
  const read = new Map<string, Member>();
  for (const m of scan.members) {
    if (!READ.has(m.key)) continue;
    if (m.end - m.valueStart > MAX_KNOB_BYTES)
      throw new InvalidRequest(`${m.key}: more than ${MAX_KNOB_BYTES} bytes`);
    read.set(m.key, m);
  }
  const knob = (k: string) => {
    const m = read.get(k);
    return m === undefined ? undefined : memberValue(raw, m);
  };

  const stream = pyTruthy(knob("stream"));
  let streamOptions: Record<string, unknown> | null = null;
  if (stream) {
    const so = streamOptionsSchema.safeParse(knob("stream_options"));
    if (!so.success) throw new InvalidRequest("stream_options: expected an object");
    streamOptions = so.data ?? null;
  }
  const mt = knob("max_tokens");
  const mct = knob("max_completion_tokens");
  const asked = pyTruthy(mt) ? mt : pyTruthy(mct) ? mct : DEFAULT_MAX_TOKENS;
  const wantInt = pyInt(asked);
  if (wantInt === "overflow") throw new InvalidRequest("max_tokens: cannot convert infinity to an integer");
  const n = completions(knob("n"));
  const classes = scan.classes;
  return {
    raw,
    members: scan.members,
    model: knob("model"),
    stream,
    streamGiven: read.has("stream"),
    streamOptions,
    want: wantInt === "value_error" ? DEFAULT_MAX_TOKENS : wantInt,
    n: n ?? 1,
    nGiven: n !== undefined,
    classes,
    promptEstimate: tokensFromClasses(classes),
    promptBound: promptBound(classes.bytes, scan.toolsBytes, scan.messages, scan.images),
  };
}

/** Parse a chat request body in one go (scan, then interpret). Throws InvalidRequest. */
export function parseChatRequest(raw: Buffer): ChatRequest {
  return interpretRequest(raw, scanChatBody(raw));
}

/** An integer as JSON (exact for the huge ones Python would print in full). */
const intJson = (x: number) => (Number.isSafeInteger(x) ? String(x) : BigInt(x).toString());

/** A budget clamped to max_tokens, when it is a number above it. */
function clampBudget(v: unknown, maxTokens: number): unknown {
  return typeof v === "number" && v > maxTokens ? maxTokens : v;
}

/**
 * The bytes to forward: `max_tokens` set to what the meter granted (max_completion_tokens dropped),
 * `stream` and `n` as the meter read them, `stream_options.include_usage` forced for a stream, the
 * fields of DROPPED_FIELDS left out, budgets of CLAMPED_FIELDS clamped; every other member byte for
 * byte as the client wrote it.
 */
export function forwardBody(req: ChatRequest, maxTokens: number): Buffer {
  const raw = req.raw;
  let head = `{"max_tokens":${intJson(maxTokens)}`;
  if (req.streamGiven) head += `,"stream":${req.stream}`;
  if (req.nGiven) head += `,"n":${req.n}`;
  if (req.stream)
    head += `,"stream_options":${JSON.stringify({ ...req.streamOptions, include_usage: true })}`;
  // Member spans [start − 1, end): the byte before each (a '{', ',' or space) becomes its comma.
  const spans: number[] = [];
  let size = 0;
  for (const m of req.members) {
    const k = m.key;
    if (REWRITTEN.has(k) || DROPPED_FIELDS.has(k) || (req.stream && k === "stream_options")) continue;
    if (CLAMPED_FIELDS.has(k)) {
      const v = memberValue(raw, m);
      let out: unknown = v;
      if (k === "min_tokens") out = clampBudget(v, maxTokens);
      else {
        const o = budgetObjectSchema.safeParse(v);
        if (o.success) {
          out = { ...o.data };
          const obj = out as Record<string, unknown>;
          if ("max_tokens" in obj) obj.max_tokens = clampBudget(obj.max_tokens, maxTokens);
          if ("budget_tokens" in obj) obj.budget_tokens = clampBudget(obj.budget_tokens, maxTokens);
        }
      }
      if (out !== v) {
        head += `,${JSON.stringify(k)}:${JSON.stringify(out)}`;
        continue;
      }
    }
    spans.push(m.start - 1, m.end);
    size += m.end - m.start + 1;
  }
  const headLen = Buffer.byteLength(head);
  const out = Buffer.allocUnsafe(headLen + size + 1);
  out.write(head, 0, headLen, "utf8");
  let at = headLen;
  for (let k = 0; k < spans.length; k += 2) {
    raw.copy(out, at, spans[k]!, spans[k + 1]!);
    out[at] = 0x2c;
    at += spans[k + 1]! - spans[k]!;
  }
  out[at] = 0x7d;
  return out;
}
