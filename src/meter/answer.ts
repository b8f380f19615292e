/**
 * What the meter learns from an upstream answer (non-stream body or stream chunks): provider usage,
 * the upstream request id, the finish reason, mid-stream errors and the provenance fingerprint of
 * choice 0. Upstream JSON is outside input: shapes are checked where they are used, usage with zod.
 */
import { z } from "zod";
import { type Fingerprint, fingerprint, type ToolCallText } from "./fingerprint.js";
import type { Usage } from "./ledger.js";

const tokenCount = z.number().int().nonnegative().max(1_000_000_000);
export const usageSchema = z.object({
  prompt_tokens: tokenCount,
  completion_tokens: tokenCount,
  prompt_tokens_details: z.object({ cached_tokens: tokenCount.nullish() }).nullish(),
});

export type UsageParse = { ok: true; usage: Usage } | { ok: false };

const isCount = (v: unknown): v is number =>
  typeof v === "number" && Number.isInteger(v) && v >= 0 && v <= 1_000_000_000;

/**
 * Provider usage, validated by `usageSchema`; a hand check that accepts exactly the same shapes
 * (property-tested against the schema) answers the common case without zod's generic path.
 */
export function parseUsage(u: unknown): UsageParse {
  if (typeof u === "object" && u !== null && !Array.isArray(u)) {
    const o = u as Record<string, unknown>;
    const d = o.prompt_tokens_details;
    if (isCount(o.prompt_tokens) && isCount(o.completion_tokens)) {
      if (d === null || d === undefined)
        return {
          ok: true,
          usage: { promptTokens: o.prompt_tokens, cachedTokens: 0, completionTokens: o.completion_tokens },
        };
      if (typeof d === "object" && !Array.isArray(d)) {
        const c = (d as Record<string, unknown>).cached_tokens;
        if (c === null || c === undefined || isCount(c))
          return {
            ok: true,
            usage: {
              promptTokens: o.prompt_tokens,
              cachedTokens: c ?? 0,
              completionTokens: o.completion_tokens,
            },
          };
      }
    }
  }
  const r = usageSchema.safeParse(u);
  if (!r.success) return { ok: false };
  return {
    ok: true,
    usage: {
      promptTokens: r.data.prompt_tokens,
      cachedTokens: r.data.prompt_tokens_details?.cached_tokens ?? 0,
      completionTokens: r.data.completion_tokens,
    },
  };
}

export interface UpstreamErrorInfo {
  code: string;
  message: string;
  retryable: boolean;
}

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** An OpenAI-style error object (`{"error": …}`) found in a body or a stream event. */
export function errorInfo(obj: Json): UpstreamErrorInfo | null {
  const e = obj.error;
  if (e === undefined || e === null) return null;
  const o = isObj(e) ? e : { message: String(e) };
  const code = o.code ?? o.type ?? o.status;
  const message = typeof o.message === "string" ? o.message.slice(0, 300) : "";
  const hay = `${String(code ?? "")} ${String(o.type ?? "")} ${message}`.toLowerCase();
  // Gateways report overload inside a 200 stream; those are the same as a 429/503 before any byte.
  const retryable =
    code === 429 ||
    code === 503 ||
    /\b(429|503)\b|rate.?limit|overloaded|concurrency|capacity|unavailable/.test(hay);
  return { code: code === undefined ? "error" : String(code), message, retryable };
}

/**
 * The common stream event, a text delta of choice 0 and nothing else (OpenAI's and vLLM's key order):
 * recognised without JSON.parse. Its only effects are the text (and the response id when not yet
 * known), so taking the text from the captured string literal is the same as the full parse; any
 * other event — finish, usage, tool calls, errors, another order — takes the full path.
 */
const TEXT_DELTA =
  /^\{"id":"([^"\\\x00-\x1f]*)","object":"chat\.completion\.chunk","created":(?:0|[1-9]\d*),"model":"[^"\\\x00-\x1f]*",(?:"system_fingerprint":(?:"[^"\\\x00-\x1f]*"|null),)?"choices":\[\{"index":0,"delta":\{(?:"role":"assistant",)?"content":("(?:[^"\\]|\\.)*")\},"logprobs":null,"finish_reason":null\}\]\}$/;

export class AnswerAccumulator {
  usage: Usage | undefined;
  /** Usage was present but not of the documented shape. */
  badUsage = false;
  /** x_engy.request_id seen in the body / the last chunk that carried one. */
  engyRequestId: string | undefined;
  /** The response's (or first chunk's) `id`. */
  responseId: string | undefined;
  finishReason: string | undefined;
  error: UpstreamErrorInfo | undefined;
  sawDone = false;
  events = 0;
  unparsable = 0;
  private readonly text: string[] = [];
  private readonly tools = new Map<number, { name: string; arguments: string }>();
  private readonly toolList: ToolCallText[] = [];

  /** `fast`: recognise the common text delta without JSON.parse (tests compare with `false`). */
  constructor(private readonly fast = true) {}

  /** One SSE data payload. */
  onEvent(data: string): void {
    if (data === "[DONE]") {
      this.sawDone = true;
      return;
    }
    this.events++;
    if (this.fast) {
      const m = TEXT_DELTA.exec(data);
      if (m !== null) {
        let text: unknown;
        try {
          text = JSON.parse(m[2]!);
        } catch {
          text = undefined; // not a valid literal: the full path decides
        }
        if (typeof text === "string") {
          if (this.responseId === undefined && m[1]) this.responseId = m[1];
          this.text.push(text);
          return;
        }
      }
    }
    let obj: unknown;
    try {
      obj = JSON.parse(data);
    } catch {
      this.unparsable++;
      return;
    }
    if (!isObj(obj)) return;
    this.common(obj);
    const choices = obj.choices;
    if (Array.isArray(choices)) {
      for (const ch of choices) {
        if (!isObj(ch) || (ch.index !== undefined && ch.index !== 0)) continue;
        if (typeof ch.finish_reason === "string") this.finishReason = ch.finish_reason;
        const delta = ch.delta;
        if (!isObj(delta)) continue;
        if (typeof delta.content === "string") this.text.push(delta.content);
        if (Array.isArray(delta.tool_calls)) {
          for (const tc of delta.tool_calls) {
            if (!isObj(tc)) continue;
            const idx = typeof tc.index === "number" ? tc.index : 0;
            let slot = this.tools.get(idx);
            if (slot === undefined) {
              slot = { name: "", arguments: "" };
              this.tools.set(idx, slot);
            }
            const fn = isObj(tc.function) ? tc.function : {};
            if (typeof fn.name === "string" && fn.name) slot.name = fn.name;
            if (typeof fn.arguments === "string") slot.arguments += fn.arguments;
          }
        }
      }
    }
  }

  /** A whole non-stream response body. */
  onBody(obj: unknown): void {
    if (!isObj(obj)) {
      this.unparsable++;
      return;
    }
    this.common(obj);
    const ch0 = Array.isArray(obj.choices) ? obj.choices[0] : undefined;
    if (!isObj(ch0)) return;
    if (typeof ch0.finish_reason === "string") this.finishReason = ch0.finish_reason;
    const msg = ch0.message;
    if (!isObj(msg)) return;
    if (typeof msg.content === "string") this.text.push(msg.content);
    if (Array.isArray(msg.tool_calls)) {
      for (const tc of msg.tool_calls) {
        if (!isObj(tc)) continue;
        const fn = isObj(tc.function) ? tc.function : {};
        const name = typeof tc.name === "string" ? tc.name : typeof fn.name === "string" ? fn.name : "";
        const args = "arguments" in tc ? tc.arguments : fn.arguments;
        this.toolList.push({ name, arguments: args });
      }
    }
  }

  private common(obj: Json): void {
    if (obj.usage !== undefined && obj.usage !== null) {
      const u = parseUsage(obj.usage);
      if (u.ok) this.usage = u.usage;
      else this.badUsage = true;
    }
    const x = obj.x_engy;
    if (isObj(x) && typeof x.request_id === "string" && x.request_id) this.engyRequestId = x.request_id;
    if (this.responseId === undefined && typeof obj.id === "string" && obj.id) this.responseId = obj.id;
    const err = errorInfo(obj);
    if (err !== null) this.error = err;
  }

  private toolCalls(): ToolCallText[] {
    if (this.toolList.length > 0) return this.toolList;
    return [...this.tools.entries()].sort((a, b) => a[0] - b[0]).map(([, t]) => t);
  }

  fingerprint(): Fingerprint {
    return fingerprint(this.text.join(""), this.toolCalls());
  }
}
