/**
 * Response shapes, byte for byte what the OpenAI SDK and the meter parse: non-stream bodies, SSE
 * chunks, OpenAI-shaped errors. Pure: a Completion in, strings out.
 */
import type { PlannedToolCall } from "./brain.js";
import { PLAIN, type Tokenizer } from "./tokens.js";

export type FinishReason = "stop" | "tool_calls" | "length";

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

export interface WireToolCall {
  id: string;
  name: string;
  arguments: string;
}

export interface Completion {
  id: string;
  created: number;
  model: string;
  requestId: string;
  content: string;
  toolCalls: WireToolCall[];
  finishReason: FinishReason;
  usage: Usage;
}

export const SYSTEM_FINGERPRINT = "fp_engy_sim";

export function completionTokensOf(
  content: string,
  toolCalls: readonly { name: string; arguments: string }[],
  tk: Tokenizer = PLAIN,
): number {
  let n = tk.count(content);
  for (const tc of toolCalls) n += tk.count(tc.name) + tk.count(tc.arguments);
  return n;
}

/**
 * Honour max_tokens: keep the text, then the tool calls, while they fit; the call that does not
 * fit is cut mid-arguments (as a real model's would be), the rest dropped; finish_reason "length".
 */
export function applyMaxTokens(
  content: string,
  toolCalls: readonly PlannedToolCall[],
  maxTokens: number | undefined,
  tk: Tokenizer = PLAIN,
): { content: string; toolCalls: PlannedToolCall[]; truncated: boolean } {
  if (maxTokens === undefined || completionTokensOf(content, toolCalls, tk) <= maxTokens)
    return { content, toolCalls: [...toolCalls], truncated: false };
  const keptContent = tk.truncate(content, maxTokens);
  let left = maxTokens - tk.count(keptContent);
  const kept: PlannedToolCall[] = [];
  for (const tc of toolCalls) {
    const need = tk.count(tc.name) + tk.count(tc.arguments);
    if (need <= left) {
      kept.push(tc);
      left -= need;
      continue;
    }
    const room = left - tk.count(tc.name);
    if (room > 0) kept.push({ name: tc.name, arguments: tk.truncate(tc.arguments, room) });
    break;
  }
  return { content: keptContent, toolCalls: kept, truncated: true };
}

function messageOf(c: Completion): Record<string, unknown> {
  const message: Record<string, unknown> = { role: "assistant", content: c.content, refusal: null };
  if (c.toolCalls.length > 0)
    message.tool_calls = c.toolCalls.map((tc) => ({
      id: tc.id,
      type: "function",
      function: { name: tc.name, arguments: tc.arguments },
    }));
  return message;
}

export function completionBody(c: Completion, opts: { usage: boolean }): string {
  const body: Record<string, unknown> = {
    id: c.id,
    object: "chat.completion",
    created: c.created,
    model: c.model,
    system_fingerprint: SYSTEM_FINGERPRINT,
    choices: [{ index: 0, message: messageOf(c), logprobs: null, finish_reason: c.finishReason }],
  };
  if (opts.usage) body.usage = c.usage;
  body.x_engy = { request_id: c.requestId };
  return JSON.stringify(body);
}

function pieces(text: string, size: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

export interface StreamOptions {
  /** Send the usage chunk (stream_options.include_usage, unless a fault drops it). */
  usage: boolean;
  /** Characters per content/arguments delta (≈ 4 per token). */
  chunkChars: number;
}

/** The SSE events of a streamed completion, each a complete `data: …\n\n` string, [DONE] last. */
export function streamEvents(c: Completion, opts: StreamOptions): string[] {
  const head = { id: c.id, object: "chat.completion.chunk", created: c.created, model: c.model };
  const ev = (choices: unknown[], extra: Record<string, unknown> = {}): string =>
    `data: ${JSON.stringify({ ...head, system_fingerprint: SYSTEM_FINGERPRINT, choices, ...extra })}\n\n`;
  const delta = (d: Record<string, unknown>) => [{ index: 0, delta: d, logprobs: null, finish_reason: null }];
  const out: string[] = [ev(delta({ role: "assistant", content: "", refusal: null }))];
  for (const p of pieces(c.content, opts.chunkChars)) out.push(ev(delta({ content: p })));
  c.toolCalls.forEach((tc, index) => {
    out.push(
      ev(
        delta({
          tool_calls: [{ index, id: tc.id, type: "function", function: { name: tc.name, arguments: "" } }],
        }),
      ),
    );
    for (const p of pieces(tc.arguments, opts.chunkChars))
      out.push(ev(delta({ tool_calls: [{ index, function: { arguments: p } }] })));
  });
  const xEngy = { x_engy: { request_id: c.requestId } };
  out.push(ev([{ index: 0, delta: {}, logprobs: null, finish_reason: c.finishReason }], xEngy));
  if (opts.usage) out.push(ev([], { usage: c.usage, ...xEngy }));
  out.push("data: [DONE]\n\n");
  return out;
}

export interface ErrorShape {
  status: number;
  type: string;
  code: string;
  message: string;
  param?: string | null;
}

export function errorBody(e: ErrorShape): string {
  return JSON.stringify({
    error: { message: e.message, type: e.type, param: e.param ?? null, code: e.code },
  });
}

/** The mid-stream error event (what OpenAI sends when a stream fails after it started). */
export function streamErrorEvent(requestId: string): string {
  return `data: ${JSON.stringify({
    error: {
      message: "The server had an error while processing your request. Sorry about that!",
      type: "server_error",
      param: null,
      code: "engy_stream_error",
    },
    x_engy: { request_id: requestId },
  })}\n\n`;
}
