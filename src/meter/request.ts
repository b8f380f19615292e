/**
 * The boundary of a chat request: the fields the meter reads or rewrites, defined by a zod schema.
 * Every other field passes through to the provider untouched (the provider validates those).
 *
 * `parseChatKnobs` tries a hand-written check first and falls back to zod: the check accepts exactly
 * what the schema accepts (property-tested in test/unit/meter-request.test.ts), so zod stays the
 * definition and its messages are what a caller sees, while a well-formed request does not pay for
 * zod's generic machinery on every call.
 */
import { z } from "zod";

const tokens = z.number().int().positive().max(100_000_000);

export const chatKnobsSchema = z.object({
  model: z.string().min(1).max(200),
  messages: z.custom<unknown[]>((v) => Array.isArray(v), { message: "expected an array" }),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  max_tokens: tokens.nullish(),
  max_completion_tokens: tokens.nullish(),
  n: z.number().int().min(1).max(128).nullish(),
});

export type ChatKnobs = z.infer<typeof chatKnobsSchema>;

export type KnobsResult = { ok: true; knobs: ChatKnobs } | { ok: false; message: string };

const isNullish = (v: unknown): v is null | undefined => v === null || v === undefined;
const optInt = (v: unknown, min: number, max: number) =>
  isNullish(v) || (typeof v === "number" && Number.isInteger(v) && v >= min && v <= max);
const optBool = (v: unknown) => isNullish(v) || typeof v === "boolean";

/** The fast check: true only for input the schema accepts. */
export function knobsLookValid(b: Record<string, unknown>): boolean {
  const m = b.model;
  const so = b.stream_options;
  return (
    typeof m === "string" &&
    m.length >= 1 &&
    m.length <= 200 &&
    Array.isArray(b.messages) &&
    optBool(b.stream) &&
    (isNullish(so) ||
      (typeof so === "object" &&
        !Array.isArray(so) &&
        optBool((so as Record<string, unknown>).include_usage))) &&
    optInt(b.max_tokens, 1, 100_000_000) &&
    optInt(b.max_completion_tokens, 1, 100_000_000) &&
    optInt(b.n, 1, 128)
  );
}

/** The knobs of a parsed JSON body (an object). */
export function parseChatKnobs(b: Record<string, unknown>): KnobsResult {
  if (knobsLookValid(b)) {
    const knobs: ChatKnobs = { model: b.model as string, messages: b.messages as unknown[] };
    if (b.stream !== undefined) knobs.stream = b.stream as boolean | null;
    if (b.stream_options !== undefined)
      knobs.stream_options = b.stream_options as ChatKnobs["stream_options"];
    if (b.max_tokens !== undefined) knobs.max_tokens = b.max_tokens as number | null;
    if (b.max_completion_tokens !== undefined)
      knobs.max_completion_tokens = b.max_completion_tokens as number | null;
    if (b.n !== undefined) knobs.n = b.n as number | null;
    return { ok: true, knobs };
  }
  const r = chatKnobsSchema.safeParse(b);
  if (r.success) return { ok: true, knobs: r.data };
  const first = r.error.issues[0];
  return { ok: false, message: `${first?.path.join(".") || "body"}: ${first?.message ?? "invalid"}` };
}
