/** The agent loop's records (agent/src/turns.ts) kept as Hermes keeps a session, plus a transcript. */
import type { ChatMessage, SessionRecord, SummaryRecord, TurnRecord } from "../contract.js";
import { HERMES_NAME } from "./hermes-args.js";
import { epochSeconds, type HermesSessionStore, type StoredMessage } from "./hermes-store.js";
import { pyJson } from "./py-dumps.js";
import { SessionLog } from "./turns.js";

/**
 * The loop's session log (agent/src/turns.ts) redirected: every finished turn goes to the session
 * store as Hermes' message rows, and to stdout as a readable transcript. The tool calls kept are
 * the ones the model sent (verbatim arguments), so upstream's provenance check can match them
 * against the meter's fingerprints.
 */
export class HermesSessionLog extends SessionLog {
  private ended = false;

  constructor(
    private readonly store: HermesSessionStore,
    private readonly out: (text: string) => void,
    private readonly meta: { toolsets: string[]; maxTurns: number },
  ) {
    super("/dev/null", "/dev/null");
  }

  override session(rec: SessionRecord): void {
    const system = rec.messages.find((m) => m.role === "system")?.content ?? "";
    this.store.append({
      kind: "session",
      session: {
        id: this.store.sessionId,
        source: "cli",
        model: rec.model,
        // Hermes keeps json.dumps(model_config) here.
        model_config: pyJson({
          max_iterations: this.meta.maxTurns,
          toolsets: this.meta.toolsets,
          tools: rec.tools,
        }),
        system_prompt: system,
        started_at: epochSeconds(),
        billing_base_url: rec.base_url,
      },
    });
    for (const m of rec.messages)
      if (m.role === "user") this.store.append({ kind: "message", message: row("user", m) });
    const user = rec.messages.find((m) => m.role === "user")?.content ?? "";
    this.out(
      `# ${HERMES_NAME} ${rec.version} (hermes-compatible) session ${this.store.sessionId}\n` +
        `model ${rec.model} at ${rec.base_url}, max ${rec.max_turns} turns\n\n[user]\n${user}\n\n`,
    );
  }

  override turn(rec: TurnRecord): void {
    let toolIndex = 0;
    for (const m of rec.messages) {
      if (m.role === "assistant") {
        const calls = (m.tool_calls ?? []).map((c, i) => ({
          id: c.id,
          type: "function" as const,
          function: {
            name: c.function.name,
            arguments: rec.tool_calls[i]?.arguments_raw ?? c.function.arguments,
          },
        }));
        this.store.append({
          kind: "message",
          message: {
            ...row("assistant", m),
            tool_calls: calls.length ? calls : null,
            finish_reason: rec.finish_reason,
            reasoning: rec.reasoning ?? null,
          },
        });
      } else if (m.role === "tool") {
        const call = rec.tool_calls[toolIndex++];
        this.store.append({ kind: "message", message: { ...row("tool", m), tool_name: call?.name ?? null } });
      }
    }
    const u = rec.usage;
    this.store.append({
      kind: "usage",
      input_tokens: u ? Math.max(0, u.prompt_tokens - u.cached_tokens) : 0,
      output_tokens: u?.completion_tokens ?? 0,
      cache_read_tokens: u?.cached_tokens ?? 0,
      api_calls: 1 + rec.retries,
    });
    this.out(renderTurn(rec));
  }

  override summary(rec: SummaryRecord): void {
    if (this.ended) return;
    this.ended = true;
    this.store.append({ kind: "end", ended_at: epochSeconds(), end_reason: rec.reason });
    this.out(
      `== end: ${rec.reason}${rec.code ? ` (${rec.code})` : ""}; ${rec.turns} turns, ${rec.tool_call_count} tool calls\n` +
        (rec.final_message ? `\n${rec.final_message}\n` : ""),
    );
  }

  override close(): void {
    this.store.close();
  }
}

function row(role: StoredMessage["role"], m: ChatMessage): StoredMessage {
  return {
    role,
    content: m.content,
    tool_call_id: m.tool_call_id ?? null,
    tool_calls: null,
    tool_name: null,
    timestamp: epochSeconds(),
    finish_reason: null,
    reasoning: null,
  };
}

const TRANSCRIPT_TOOL_CHARS = 4000;

function renderTurn(rec: TurnRecord): string {
  const lines = [
    `## turn ${rec.turn}${rec.partial ? " (interrupted)" : ""} — finish ${rec.finish_reason ?? "none"}`,
  ];
  const results = rec.messages.filter((m) => m.role === "tool");
  let k = 0;
  for (const m of rec.messages) {
    if (m.role !== "assistant") continue;
    if (m.content) lines.push(`[assistant]\n${m.content}`);
    for (const c of m.tool_calls ?? []) {
      lines.push(`→ ${c.function.name} ${c.function.arguments}`);
      const r = results[k++]?.content;
      if (r != null)
        lines.push(`← ${r.length > TRANSCRIPT_TOOL_CHARS ? `${r.slice(0, TRANSCRIPT_TOOL_CHARS)} […]` : r}`);
    }
  }
  return `${lines.join("\n")}\n\n`;
}
