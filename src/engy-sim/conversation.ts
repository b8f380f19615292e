/**
 * The request boundary: an OpenAI chat-completions body parsed once with zod, then normalised
 * into the plain messages the simulator reasons about.
 */
import { z } from "zod";

const contentPart = z.looseObject({ type: z.string(), text: z.string().optional() });
const content = z.union([z.string(), z.array(contentPart), z.null()]).optional();
const toolCall = z.looseObject({
  id: z.string().optional(),
  type: z.string().optional(),
  function: z.looseObject({ name: z.string(), arguments: z.string().nullish() }),
});
const message = z.looseObject({
  role: z.string().min(1),
  content,
  name: z.string().nullish(),
  tool_calls: z.array(toolCall).nullish(),
  tool_call_id: z.string().nullish(),
});
const tool = z.looseObject({
  type: z.string().optional(),
  function: z.looseObject({ name: z.string().min(1) }),
});

export const chatRequestSchema = z.looseObject({
  model: z.string().min(1),
  messages: z.array(message).min(1),
  tools: z.array(tool).nullish(),
  tool_choice: z.unknown().optional(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  max_tokens: z.number().int().min(1).nullish(),
  max_completion_tokens: z.number().int().min(1).nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  n: z.literal(1).nullish(),
});
export type ChatRequest = z.infer<typeof chatRequestSchema>;

export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

export interface ChatMessage {
  role: string;
  content: string;
  name?: string | undefined;
  toolCalls: ToolCall[];
  toolCallId?: string | undefined;
}

function contentText(c: z.infer<typeof content>): string {
  if (c === undefined || c === null) return "";
  if (typeof c === "string") return c;
  return c.map((p) => p.text ?? "").join("");
}

export function normaliseMessages(req: ChatRequest): ChatMessage[] {
  return req.messages.map((m) => ({
    role: m.role,
    content: contentText(m.content),
    name: m.name ?? undefined,
    toolCalls: (m.tool_calls ?? []).map((tc) => ({
      id: tc.id ?? "",
      name: tc.function.name,
      arguments: tc.function.arguments ?? "",
    })),
    toolCallId: m.tool_call_id ?? undefined,
  }));
}

/** The offered tool names; undefined when none are offered or tool_choice is "none" (no calls allowed). */
export function toolNamesOf(req: ChatRequest): string[] | undefined {
  if (!req.tools || req.tools.length === 0 || req.tool_choice === "none") return undefined;
  return req.tools.map((t) => t.function.name);
}

/** max_completion_tokens wins over max_tokens, as in OpenAI's API. */
export function maxTokensOf(req: ChatRequest): number | undefined {
  return req.max_completion_tokens ?? req.max_tokens ?? undefined;
}
