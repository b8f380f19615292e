/**
 * `hermes`'s session store: one append-only JSON-lines file per session under
 * $HERMES_HOME/sessions, replayed by `sessions export` into Hermes' export format (its `sessions`
 * row plus `messages`, as Hermes' SessionDB `export_session` builds it).
 */
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, statSync, writeSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { PyFloat, type PyJson, pyJson } from "./py-dumps.js";

/** An OpenAI tool call as Hermes keeps it on an assistant message. */
export interface StoredToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** One row of Hermes' `messages` table (what the agent said, what the tools answered). */
export interface StoredMessage {
  role: "user" | "assistant" | "tool";
  content: string | null;
  tool_call_id: string | null;
  tool_calls: StoredToolCall[] | null;
  tool_name: string | null;
  timestamp: number;
  finish_reason: string | null;
  reasoning: string | null;
}

export interface StoredSessionStart {
  id: string;
  source: string;
  model: string;
  model_config: string;
  system_prompt: string;
  started_at: number;
  billing_base_url: string;
}

/** One line of a session file: an append-only log replayed by `sessions export`. */
export type StoreRecord =
  | { kind: "session"; session: StoredSessionStart }
  | { kind: "message"; message: StoredMessage }
  | {
      kind: "usage";
      input_tokens: number;
      output_tokens: number;
      cache_read_tokens: number;
      api_calls: number;
    }
  | { kind: "end"; ended_at: number; end_reason: string };

/** Seconds since the epoch with sub-millisecond digits, like Python's time.time(). */
export function epochSeconds(): number {
  return (performance.timeOrigin + performance.now()) / 1000;
}

/**
 * The session's file, `<dir>/<id>.jsonl`, appended one whole line per write (synchronous: a signal
 * handler must be able to record the end). A store that cannot be written never stops the agent.
 */
export class HermesSessionStore {
  private fd: number | null = null;
  private broken = false;
  readonly path: string;

  constructor(
    readonly dir: string,
    readonly sessionId: string,
  ) {
    this.path = join(dir, `${sessionId}.jsonl`);
  }

  append(rec: StoreRecord): void {
    if (this.broken) return;
    try {
      if (this.fd === null) {
        mkdirSync(this.dir, { recursive: true, mode: 0o700 });
        this.fd = openSync(this.path, "a", 0o600);
      }
      writeSync(this.fd, `${JSON.stringify(rec)}\n`);
    } catch (e) {
      this.broken = true;
      process.stderr.write(`[hermes] cannot write the session store ${this.path}: ${(e as Error).message}\n`);
    }
  }

  close(): void {
    if (this.fd === null) return;
    try {
      closeSync(this.fd);
    } catch {
      // best effort at exit
    }
    this.fd = null;
  }
}

/** A session as `hermes sessions export` writes it: the `sessions` row, then its `messages`. */
export interface ExportedSession {
  row: { [key: string]: PyJson };
  messages: StoredMessage[];
  startedAt: number;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null;
const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) ? v : 0);

/** What a session file's lines add up to (a torn or foreign line is skipped). */
interface Replayed {
  start: StoredSessionStart | undefined;
  messages: StoredMessage[];
  usage: { input: number; output: number; cacheRead: number; apiCalls: number };
  end: { ended_at: number; end_reason: string } | undefined;
}

/** Replay one session file (a torn or foreign line is skipped); undefined without a session line. */
export function replaySession(text: string): ExportedSession | undefined {
  const replayed = replayRecords(text);
  if (!replayed.start) return undefined;
  return {
    row: sessionRow(replayed.start, replayed),
    messages: replayed.messages,
    startedAt: replayed.start.started_at,
  };
}

function replayRecords(text: string): Replayed {
  const r: Replayed = {
    start: undefined,
    messages: [],
    usage: { input: 0, output: 0, cacheRead: 0, apiCalls: 0 },
    end: undefined,
  };
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    let rec: unknown;
    try {
      rec = JSON.parse(line);
    } catch {
      continue;
    }
    if (!isObject(rec)) continue;
    if (rec.kind === "session" && isObject(rec.session) && typeof rec.session.id === "string")
      r.start ??= rec.session as unknown as StoredSessionStart;
    else if (rec.kind === "message" && isObject(rec.message) && typeof rec.message.role === "string")
      r.messages.push(rec.message as unknown as StoredMessage);
    else if (rec.kind === "usage") {
      r.usage.input += num(rec.input_tokens);
      r.usage.output += num(rec.output_tokens);
      r.usage.cacheRead += num(rec.cache_read_tokens);
      r.usage.apiCalls += num(rec.api_calls);
    } else if (rec.kind === "end" && typeof rec.end_reason === "string")
      r.end = { ended_at: num(rec.ended_at), end_reason: rec.end_reason };
  }
  return r;
}

/** Hermes' `sessions` columns, in its schema's order. */
function sessionRow(
  start: StoredSessionStart,
  { messages, usage, end }: Replayed,
): { [key: string]: PyJson } {
  const toolCallCount = messages.reduce((n, m) => n + (m.tool_calls?.length ?? 0), 0);
  return {
    id: start.id,
    source: start.source,
    user_id: null,
    model: start.model,
    model_config: start.model_config,
    system_prompt: start.system_prompt,
    parent_session_id: null,
    started_at: new PyFloat(start.started_at),
    ended_at: end ? new PyFloat(end.ended_at) : null,
    end_reason: end ? end.end_reason : null,
    message_count: messages.length,
    tool_call_count: toolCallCount,
    input_tokens: usage.input,
    output_tokens: usage.output,
    cache_read_tokens: usage.cacheRead,
    cache_write_tokens: 0,
    reasoning_tokens: 0,
    billing_provider: "custom",
    billing_base_url: start.billing_base_url,
    billing_mode: null,
    // The agent knows no prices: cost is the meter's business (upstream reads these, never scores them).
    estimated_cost_usd: null,
    actual_cost_usd: null,
    cost_status: "unknown",
    cost_source: "none",
    pricing_version: null,
    title: null,
    api_call_count: usage.apiCalls,
  };
}

/** Every session of the store, newest first (Hermes' `search_sessions` order), message ids numbered. */
export function loadStore(dir: string): ExportedSession[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith(".jsonl"));
  } catch {
    return [];
  }
  const sessions: ExportedSession[] = [];
  for (const n of names) {
    let text: string;
    try {
      if (!statSync(join(dir, n)).isFile()) continue;
      text = readFileSync(join(dir, n), "utf8");
    } catch {
      continue;
    }
    const s = replaySession(text);
    if (s) sessions.push(s);
  }
  sessions.sort((a, b) => a.startedAt - b.startedAt || String(a.row.id).localeCompare(String(b.row.id)));
  return sessions.reverse();
}

/** One export line: `json.dumps({**session_row, "messages": messages}, ensure_ascii=False)`. */
export function exportLine(s: ExportedSession, firstMessageId: number): string {
  const messages: PyJson[] = s.messages.map((m, i) => ({
    id: firstMessageId + i,
    session_id: s.row.id ?? null,
    role: m.role,
    content: m.content,
    tool_call_id: m.tool_call_id,
    tool_calls: m.tool_calls?.length
      ? m.tool_calls.map((c) => ({
          id: c.id,
          type: c.type,
          function: { name: c.function.name, arguments: c.function.arguments },
        }))
      : null,
    tool_name: m.tool_name,
    timestamp: new PyFloat(m.timestamp),
    token_count: null,
    finish_reason: m.finish_reason,
    reasoning: m.reasoning,
    reasoning_content: null,
    reasoning_details: null,
    codex_reasoning_items: null,
    codex_message_items: null,
  }));
  return `${pyJson({ ...s.row, messages })}\n`;
}

/** The export of `sessions` (newest first); message ids count up from the oldest session, as rows do. */
export function exportText(sessions: readonly ExportedSession[]): string {
  const firstIds = new Map<ExportedSession, number>();
  let next = 1;
  for (const s of [...sessions].sort((a, b) => a.startedAt - b.startedAt)) {
    firstIds.set(s, next);
    next += s.messages.length;
  }
  return sessions.map((s) => exportLine(s, firstIds.get(s) ?? 1)).join("");
}
