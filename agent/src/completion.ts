/**
 * Assembling one model answer from OpenAI-shaped chat completion chunks (or a whole non-stream
 * response): content and reasoning deltas concatenated, tool_calls fragments merged by `index`,
 * the last finish_reason and the usage chunk kept. Pure.
 */
import type { ChatToolCall, Usage } from "../contract.js";

export interface AssembledAnswer {
  content: string;
  reasoning: string;
  toolCalls: ChatToolCall[];
  finishReason: string | null;
  usage: Usage | null;
  model: string | null;
  id: string | null;
}

/** A chunk that carried an `error` object instead of a delta (mid-stream failure). */
export class StreamErrorChunk extends Error {
  readonly code = "llm_stream_error";
  constructor(
    message: string,
    /** The error says the episode budget is spent (the meter's `cap` type, or a 402 code). */
    readonly budget: boolean,
  ) {
    super(message);
    this.name = "StreamErrorChunk";
  }
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) ? v : 0);

export function parseUsage(u: unknown): Usage | null {
  if (!isObj(u)) return null;
  const details = isObj(u.prompt_tokens_details) ? u.prompt_tokens_details : {};
  const prompt = num(u.prompt_tokens);
  const completion = num(u.completion_tokens);
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: num(u.total_tokens) || prompt + completion,
    cached_tokens: num(details.cached_tokens),
  };
}

interface PartialCall {
  id: string;
  name: string;
  args: string;
}

export class ChatStreamAccumulator {
  private content = "";
  private reasoning = "";
  private calls = new Map<number, PartialCall>();
  private finishReason: string | null = null;
  private usage: Usage | null = null;
  private model: string | null = null;
  private id: string | null = null;
  /** Whether any chunk arrived at all (an empty 200 stream is a truncated stream). */
  chunks = 0;

  add(chunk: unknown): void {
    if (!isObj(chunk)) return;
    if (chunk.error !== undefined) {
      const e = chunk.error;
      const message = isObj(e) ? (str(e.message) ?? JSON.stringify(e)) : String(e);
      const budget = isObj(e) && (e.type === "cap" || e.code === 402 || e.code === "402" || e.status === 402);
      throw new StreamErrorChunk(message, budget);
    }
    this.chunks++;
    this.id ??= str(chunk.id) ?? null;
    this.model ??= str(chunk.model) ?? null;
    const usage = parseUsage(chunk.usage);
    if (usage) this.usage = usage;
    const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
    for (const choice of choices) {
      if (!isObj(choice) || num(choice.index) !== 0) continue;
      const delta = isObj(choice.delta) ? choice.delta : isObj(choice.message) ? choice.message : {};
      const text = str(delta.content);
      if (text) this.content += text;
      const reasoning = str(delta.reasoning_content) ?? str(delta.reasoning);
      if (reasoning) this.reasoning += reasoning;
      if (Array.isArray(delta.tool_calls)) this.addToolCalls(delta.tool_calls);
      const fr = str(choice.finish_reason);
      if (fr) this.finishReason = fr;
    }
  }

  private addToolCalls(fragments: unknown[]): void {
    fragments.forEach((frag, pos) => {
      if (!isObj(frag)) return;
      // Streams index fragments; a whole non-stream message may omit the index: use its position.
      const index = typeof frag.index === "number" ? frag.index : pos;
      let call = this.calls.get(index);
      if (!call) {
        call = { id: "", name: "", args: "" };
        this.calls.set(index, call);
      }
      const id = str(frag.id);
      if (id && !call.id) call.id = id;
      const fn = isObj(frag.function) ? frag.function : {};
      const name = str(fn.name);
      // Some servers repeat the full name in every fragment; others never split it. Take it once.
      if (name && !call.name) call.name = name;
      const args = fn.arguments;
      if (typeof args === "string") call.args += args;
      else if (isObj(args)) call.args += JSON.stringify(args);
    });
  }

  result(turn: number): AssembledAnswer {
    const toolCalls: ChatToolCall[] = [...this.calls.entries()]
      .sort((a, b) => a[0] - b[0])
      .map(([index, c]) => ({
        // A missing id would make the tool result unattributable: give it a stable one.
        id: c.id || `call_t${turn}_${index}`,
        type: "function" as const,
        function: { name: c.name, arguments: c.args },
      }));
    return {
      content: this.content,
      reasoning: this.reasoning,
      toolCalls,
      finishReason: this.finishReason,
      usage: this.usage,
      model: this.model,
      id: this.id,
    };
  }
}

/** A non-stream chat completion body, through the same accumulator. */
export function assembleResponse(body: unknown, turn: number): AssembledAnswer {
  const acc = new ChatStreamAccumulator();
  acc.add(body);
  return acc.result(turn);
}
