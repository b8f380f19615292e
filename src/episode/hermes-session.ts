/**
 * Hermes' session export (`hermes sessions export PATH`): one JSON object per line, the last one
 * the episode's session — `messages` (role, content, tool_calls as a list or a JSON string,
 * finish_reason), `tool_call_count`, cost fields. Read as upstream's validator reads it
 * (sandbox_harness.py `_last_session_obj`, `_provenance`, `_episode_incomplete_no_progress`):
 * leniently, at the boundary, never throwing — what cannot be read is counted as unreadable.
 * Pure.
 */
import { z } from "zod";
import { fingerprint } from "../meter/index.js";
import { round4 } from "../precision.js";

export interface HermesAnswer {
  /** Index of the message in the session's `messages`. */
  index: number;
  content: string;
  toolCalls: Array<{ name: string; arguments: string }>;
  finishReason: string | null;
}

export interface HermesSession {
  answers: HermesAnswer[];
  toolCallCount: number;
  /** Lines that were not JSON objects (skipped). */
  unreadableLines: number;
  costUsd: number | null;
}

const ToolCall = z
  .object({
    function: z.object({ name: z.unknown(), arguments: z.unknown() }).partial().optional(),
    name: z.unknown().optional(),
    arguments: z.unknown().optional(),
  })
  .passthrough();

function toolCallsOf(v: unknown): Array<{ name: string; arguments: string }> {
  let list = v;
  if (typeof list === "string") {
    try {
      list = JSON.parse(list);
    } catch {
      return [];
    }
  }
  if (!Array.isArray(list)) return [];
  const out: Array<{ name: string; arguments: string }> = [];
  for (const item of list) {
    const tc = ToolCall.safeParse(item);
    if (!tc.success) continue;
    const name = tc.data.function?.name ?? tc.data.name;
    const args = tc.data.function?.arguments ?? tc.data.arguments;
    out.push({
      name: typeof name === "string" ? name : "",
      arguments: typeof args === "string" ? args : args === undefined ? "" : JSON.stringify(args),
    });
  }
  return out;
}

/** The last JSON object of a turns.jsonl blob (the validator wipes the store: one session per file). */
export function lastSessionObject(text: string): {
  session: Record<string, unknown> | null;
  unreadable: number;
} {
  let last: Record<string, unknown> | null = null;
  let unreadable = 0;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line) continue;
    try {
      const v = JSON.parse(line) as unknown;
      if (v && typeof v === "object" && !Array.isArray(v)) last = v as Record<string, unknown>;
      else unreadable++;
    } catch {
      unreadable++;
    }
  }
  return { session: last, unreadable };
}

export function parseHermesSession(text: string): HermesSession {
  const { session, unreadable } = lastSessionObject(text);
  const answers: HermesAnswer[] = [];
  const messages = Array.isArray(session?.messages) ? (session.messages as unknown[]) : [];
  messages.forEach((m, index) => {
    if (!m || typeof m !== "object") return;
    const msg = m as Record<string, unknown>;
    if (msg.role !== "assistant") return;
    answers.push({
      index,
      content: typeof msg.content === "string" ? msg.content : "",
      toolCalls: toolCallsOf(msg.tool_calls),
      finishReason: typeof msg.finish_reason === "string" ? msg.finish_reason : null,
    });
  });
  const count = Number(session?.tool_call_count ?? 0);
  const cost = session?.actual_cost_usd ?? session?.estimated_cost_usd;
  const costUsd = typeof cost === "number" && Number.isFinite(cost) && cost >= 0 ? cost : null;
  return {
    answers,
    toolCallCount: Number.isFinite(count) ? Math.trunc(count) : 0,
    unreadableLines: unreadable,
    costUsd,
  };
}

/** Upstream's shadow provenance (`_provenance`): reported with the score, never scored. */
export interface UpstreamProvenance {
  total: number;
  matched: number;
  /** Message indexes of answers no metered call produced (first 50). */
  unmatched: number[];
  coverage: number | null;
}

export function upstreamProvenance(
  answers: readonly HermesAnswer[],
  receipts: ReadonlyArray<{ content_sha: string | null; tool_sha: string | null }>,
): UpstreamProvenance {
  const seenC = new Set(receipts.map((r) => r.content_sha).filter((x): x is string => !!x));
  const seenT = new Set(receipts.map((r) => r.tool_sha).filter((x): x is string => !!x));
  let total = 0;
  let matched = 0;
  const unmatched: number[] = [];
  for (const a of answers) {
    const fp = fingerprint(a.content, a.toolCalls);
    if (fp.contentSha === null && fp.toolSha === null) continue;
    total++;
    const okC = fp.contentSha === null || seenC.has(fp.contentSha);
    const okT = fp.toolSha === null || seenT.has(fp.toolSha);
    if (okC && okT) matched++;
    else unmatched.push(a.index);
  }
  return {
    total,
    matched,
    unmatched: unmatched.slice(0, 50),
    coverage: total ? round4(matched / total) : null,
  };
}

/**
 * Upstream's infra-incomplete signature (`_episode_incomplete_no_progress`): the agent exited
 * cleanly without one tool call while an answer was cut off (`finish_reason: incomplete`) — a
 * provider truncation, re-run rather than scored.
 */
export function incompleteNoProgress(s: HermesSession, chatExit: number | null, timedOut: boolean): boolean {
  if (chatExit !== null && chatExit !== 0) return false;
  if (timedOut) return false;
  if (s.toolCallCount > 0) return false;
  return s.answers.some((a) => a.finishReason === "incomplete");
}
