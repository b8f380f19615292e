/**
 * The policy log: one JSON line per event on the sidecar's stdout (see sidecar/README.md "Policy
 * log"). Parsed here, once, at the boundary; anything else on stdout (a raw policy's own prints)
 * is not an event.
 */
import { z } from "zod";

const callSchema = z.object({
  model: z.string(),
  kind: z.enum(["upstream", "call"]),
  status: z.union([z.number().int(), z.string()]),
  ms: z.number(),
  prompt_tokens: z.number().int().optional(),
  completion_tokens: z.number().int().optional(),
});

const turnSchema = z.looseObject({
  event: z.literal("turn"),
  ts: z.string(),
  session: z.string().optional(),
  sid: z.number().int().optional(),
  turn: z.number().int().optional(),
  model: z.string().nullable().optional(),
  models: z.array(z.string()).optional(),
  calls: z.array(callSchema).optional(),
  prompt_tokens: z.number().int().nullable().optional(),
  completion_tokens: z.number().int().nullable().optional(),
  latency_ms: z.number(),
  ttfb_ms: z.number().optional(),
  stream: z.boolean().optional(),
  status: z.enum(["ok", "policy_error", "upstream_error", "client_closed", "bad_request"]),
  http_status: z.number().int(),
  remaining_usd: z.number().nullable().optional(),
  signals: z.array(z.string()).optional(),
  policy: z.record(z.string(), z.unknown()).optional(),
  error: z.string().optional(),
  traceback: z.string().optional(),
});

const listeningSchema = z.looseObject({
  event: z.literal("listening"),
  ts: z.string(),
  policy: z.string(),
  host: z.string(),
  port: z.number().int(),
  upstream: z.string(),
  default_model: z.string(),
});

export const policyLogEventSchema = z.discriminatedUnion("event", [turnSchema, listeningSchema]);
export type PolicyLogEvent = z.infer<typeof policyLogEventSchema>;
export type PolicyTurn = z.infer<typeof turnSchema>;

/** One stdout line → an event, or undefined when the line is not one of ours. */
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
  /** Turns by status. */
  statuses: Record<string, number>;
  /** Model calls by model (upstream and extra calls). */
  callsByModel: Record<string, number>;
  promptTokens: number;
  completionTokens: number;
  /** Turns whose handle() raised. */
  policyErrors: number;
}

/** Totals over a policy log, for an episode's evaluation.json. */
export function summarisePolicyLog(lines: readonly string[]): PolicyLogSummary {
  const s: PolicyLogSummary = {
    turns: 0,
    statuses: {},
    callsByModel: {},
    promptTokens: 0,
    completionTokens: 0,
    policyErrors: 0,
  };
  for (const line of lines) {
    const e = parsePolicyLogLine(line);
    if (e?.event !== "turn") continue;
    s.turns++;
    s.statuses[e.status] = (s.statuses[e.status] ?? 0) + 1;
    if (e.status === "policy_error") s.policyErrors++;
    for (const c of e.calls ?? []) s.callsByModel[c.model] = (s.callsByModel[c.model] ?? 0) + 1;
    s.promptTokens += e.prompt_tokens ?? 0;
    s.completionTokens += e.completion_tokens ?? 0;
  }
  return s;
}
