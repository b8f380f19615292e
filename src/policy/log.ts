/**
 * The policy log: the JSON lines the SDK writes (to POLICY_LOG, else stdout), the reference runtime's
 * events with its fields, so tools that read upstream's policy.log read ours:
 *   start         {policy, port, upstream}
 *   turn          {session, turn, model, status, finish, usage, s, remaining_usd}; a rendered answer
 *                 has `rendered: true` and no status
 *   policy_error  {session, turn, error}: handle() raised; the agent got a 500
 *   advisers      {n, s, status}: the advisers kind's notes (how many written, seconds, statuses)
 * `ts` is Unix seconds. Parsed here, once, at the boundary; anything else (a raw policy's own prints)
 * is not an event.
 */
import { z } from "zod";

const ts = z.number();
const usageSchema = z
  .looseObject({
    prompt_tokens: z.number().optional(),
    completion_tokens: z.number().optional(),
  })
  .nullable();

const startSchema = z.looseObject({
  event: z.literal("start"),
  ts,
  policy: z.string(),
  port: z.number().int(),
  upstream: z.string(),
});

const turnSchema = z.looseObject({
  event: z.literal("turn"),
  ts,
  session: z.string(),
  turn: z.number().int(),
  /** The request's model after handle() (what the policy routed to); the rendered answer's model. */
  model: z.unknown().optional(),
  /** The upstream's HTTP status; absent on a rendered answer. */
  status: z.number().int().optional(),
  rendered: z.boolean().optional(),
  finish: z.string().nullable().optional(),
  usage: usageSchema.optional(),
  s: z.number(),
  remaining_usd: z.number().nullable().optional(),
});

const policyErrorSchema = z.looseObject({
  event: z.literal("policy_error"),
  ts,
  session: z.string(),
  turn: z.number().int(),
  error: z.string(),
});

const advisersSchema = z.looseObject({
  event: z.literal("advisers"),
  ts,
  n: z.number().int(),
  s: z.array(z.number()),
  status: z.array(z.number().int()),
});

export const policyLogEventSchema = z.discriminatedUnion("event", [
  startSchema,
  turnSchema,
  policyErrorSchema,
  advisersSchema,
]);
export type PolicyLogEvent = z.infer<typeof policyLogEventSchema>;
export type PolicyTurn = z.infer<typeof turnSchema>;

/** One log line → an event, or undefined when the line is not one of ours. */
export function parsePolicyLogLine(line: string): PolicyLogEvent | undefined {
  const t = line.trim();
  if (!t.startsWith("{")) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(t);
  } catch {
    return undefined;
  }
  const parsed = policyLogEventSchema.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}

export interface PolicyLogSummary {
  turns: number;
  /** Turns by outcome: the upstream's HTTP status, or "rendered". */
  statuses: Record<string, number>;
  /** Turns by the model the policy routed them to. */
  turnsByModel: Record<string, number>;
  promptTokens: number;
  completionTokens: number;
  /** Turns whose handle() raised. */
  policyErrors: number;
  /** Adviser notes written, and adviser calls made. */
  adviserNotes: number;
  adviserCalls: number;
}

/** Totals over a policy log, for an episode's evaluation.json. */
export function summarisePolicyLog(lines: readonly string[]): PolicyLogSummary {
  const s: PolicyLogSummary = {
    turns: 0,
    statuses: {},
    turnsByModel: {},
    promptTokens: 0,
    completionTokens: 0,
    policyErrors: 0,
    adviserNotes: 0,
    adviserCalls: 0,
  };
  for (const line of lines) {
    const e = parsePolicyLogLine(line);
    if (e?.event === "policy_error") s.policyErrors++;
    if (e?.event === "advisers") {
      s.adviserNotes += e.n;
      s.adviserCalls += e.status.length;
    }
    if (e?.event !== "turn") continue;
    s.turns++;
    const outcome = e.rendered ? "rendered" : String(e.status ?? "unknown");
    s.statuses[outcome] = (s.statuses[outcome] ?? 0) + 1;
    if (typeof e.model === "string") s.turnsByModel[e.model] = (s.turnsByModel[e.model] ?? 0) + 1;
    s.promptTokens += e.usage?.prompt_tokens ?? 0;
    s.completionTokens += e.usage?.completion_tokens ?? 0;
  }
  return s;
}
