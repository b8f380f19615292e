/**
 * The session log: /workspace/turns.jsonl (one JSON record per line, each written with a single
 * synchronous append so a kill can tear at most the line being written) and a human-readable
 * transcript beside it. Synchronous on purpose: a signal handler must be able to write the
 * summary line before the process exits. A log that cannot be written never stops the agent.
 */
import { closeSync, mkdirSync, openSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import type { ChatMessage, SessionRecord, SummaryRecord, TurnRecord } from "../contract.js";

class AppendFile {
  private fd: number | null = null;
  private broken = false;

  constructor(private readonly path: string) {}

  append(text: string): void {
    if (this.broken) return;
    try {
      if (this.fd === null) {
        mkdirSync(dirname(this.path), { recursive: true });
        this.fd = openSync(this.path, "a");
      }
      writeSync(this.fd, text);
    } catch (e) {
      this.broken = true;
      process.stderr.write(`[agent] cannot write ${this.path}: ${(e as Error).message}\n`);
    }
  }

  close(): void {
    if (this.fd !== null) {
      try {
        closeSync(this.fd);
      } catch {
        // Closing is best effort at exit.
      }
      this.fd = null;
    }
  }
}

const TRANSCRIPT_TOOL_CHARS = 4000;

export class SessionLog {
  private readonly turns: AppendFile;
  private readonly transcript: AppendFile;
  private summaryWritten = false;

  constructor(turnsFile: string, transcriptFile: string) {
    this.turns = new AppendFile(turnsFile);
    this.transcript = new AppendFile(transcriptFile);
  }

  session(rec: SessionRecord): void {
    this.turns.append(`${JSON.stringify(rec)}\n`);
    const [system, user] = rec.messages;
    this.transcript.append(
      `# trajrl-agent ${rec.version} session ${rec.session_id}\n` +
        `started ${rec.started_at}, model ${rec.model} at ${rec.base_url}, max ${rec.max_turns} turns\n\n` +
        `[system]\n${system?.content ?? ""}\n\n[user]\n${user?.content ?? ""}\n\n`,
    );
  }

  turn(rec: TurnRecord): void {
    this.turns.append(`${JSON.stringify(rec)}\n`);
    this.transcript.append(renderTurn(rec));
  }

  /** Written once; later calls (a signal racing the normal end) are ignored. */
  summary(rec: SummaryRecord): void {
    if (this.summaryWritten) return;
    this.summaryWritten = true;
    this.turns.append(`${JSON.stringify(rec)}\n`);
    this.transcript.append(
      `== end: ${rec.reason}${rec.code ? ` (${rec.code})` : ""}${rec.detail ? `: ${rec.detail}` : ""}; ` +
        `${rec.turns} turns, ${rec.tool_call_count} tool calls, ${rec.usage.total_tokens} tokens, ` +
        `${(rec.duration_ms / 1000).toFixed(1)} s, exit ${rec.exit_code}\n`,
    );
  }

  get hasSummary(): boolean {
    return this.summaryWritten;
  }

  close(): void {
    this.turns.close();
    this.transcript.close();
  }
}

function clip(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n)}\n[… ${s.length - n} more characters in turns.jsonl]` : s;
}

function renderTurn(rec: TurnRecord): string {
  const lines: string[] = [];
  const secs = (rec.timing.total_ms / 1000).toFixed(1);
  const usage = rec.usage ? `, ${rec.usage.prompt_tokens}+${rec.usage.completion_tokens} tokens` : "";
  lines.push(
    `## turn ${rec.turn}${rec.partial ? " (interrupted)" : ""} — ${rec.model ?? "?"}, finish ${rec.finish_reason ?? "none"}${usage}, ${secs} s${rec.retries ? `, ${rec.retries} retries` : ""}`,
  );
  const byId = new Map<string, ChatMessage>();
  for (const m of rec.messages) if (m.role === "tool" && m.tool_call_id) byId.set(m.tool_call_id, m);
  for (const m of rec.messages) {
    if (m.role !== "assistant") continue;
    if (m.content) lines.push(`[assistant]\n${m.content}`);
    for (const call of m.tool_calls ?? []) {
      lines.push(`→ ${call.function.name} ${call.function.arguments}`);
      const result = byId.get(call.id);
      if (result) lines.push(`← ${clip(result.content ?? "", TRANSCRIPT_TOOL_CHARS)}`);
    }
  }
  return `${lines.join("\n")}\n\n`;
}
