/**
 * The agent loop: the whole conversation is sent every turn; each answer's tool calls run in
 * order and their results are appended; the session ends when the model answers without tool
 * calls, when the turns run out, when the budget is spent or the model endpoint keeps failing.
 * Every finished turn is appended to turns.jsonl at once; `interrupt()` (a signal handler's
 * synchronous path) records the turn in flight as partial and writes the summary.
 */
import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import {
  AGENT_EXIT,
  AGENT_VERSION,
  type ChatMessage,
  type ChatToolCall,
  type EndReason,
  type SummaryRecord,
  type ToolCallRecord,
  type TurnRecord,
  type Usage,
} from "../contract.js";
import type { AgentConfig } from "./env.js";
import { ChatClient } from "./llm.js";
import { SYSTEM_PROMPT, taskPrompt } from "./prompts.js";
import { parseToolArguments } from "./repair.js";
import { executeToolCall, TOOL_NAMES, type ToolContext, type ToolUser, toolSchemas } from "./tools.js";
import type { SessionLog } from "./turns.js";

export interface SessionDeps {
  log: SessionLog;
  /** Environment of terminal commands. */
  commandEnv: NodeJS.ProcessEnv;
  signal: AbortSignal;
  client?: ChatClient;
  killGraceMs?: number;
  /** Run the tools as this user (the agent is root): see ToolContext.user. */
  toolUser?: ToolUser;
  /** One human-readable line per finished turn (stderr in the CLI). */
  progress?: (line: string) => void;
  /** The opening user message instead of the fixed task prompt (`hermes chat -q PROMPT`). */
  userPrompt?: string;
}

interface TurnInFlight {
  turn: number;
  startedAt: string;
  t0: number;
  messages: ChatMessage[];
  toolCalls: ToolCallRecord[];
  llm?: {
    finishReason: string | null;
    usage: Usage | null;
    model: string | null;
    id: string | null;
    reasoning: string;
    retries: number;
    errors: string[];
    llmMs: number;
    ttfbMs: number | null;
    toolCallCount: number;
  };
  toolsMs: number;
}

const SIGNAL_EXIT: Record<string, number> = {
  SIGHUP: AGENT_EXIT.SIGHUP,
  SIGINT: AGENT_EXIT.SIGINT,
  SIGTERM: AGENT_EXIT.SIGTERM,
};

export class AgentSession {
  readonly sessionId = randomUUID();
  private readonly t0 = performance.now();
  private readonly client: ChatClient;
  private readonly tools: object[];
  private readonly toolCtx: ToolContext;
  private turnsDone = 0;
  private toolCallCount = 0;
  private llmRetries = 0;
  private readonly finishReasons: (string | null)[] = [];
  private readonly usage: Usage = {
    prompt_tokens: 0,
    completion_tokens: 0,
    total_tokens: 0,
    cached_tokens: 0,
  };
  private finalMessage: string | null = null;
  private current: TurnInFlight | null = null;
  private summary: SummaryRecord | null = null;

  constructor(
    private readonly cfg: AgentConfig,
    private readonly deps: SessionDeps,
  ) {
    this.client =
      deps.client ??
      new ChatClient({
        baseUrl: cfg.baseUrl,
        model: cfg.model,
        apiKey: cfg.apiKey,
        timeoutMs: cfg.llmTimeoutMs,
        retries: cfg.llmRetries,
        retryBaseMs: cfg.retryBaseMs,
        userAgent: `trajrl-agent/${AGENT_VERSION}`,
      });
    this.tools = toolSchemas(cfg.toolTimeoutS);
    this.toolCtx = {
      workdir: cfg.workdir,
      toolTimeoutS: cfg.toolTimeoutS,
      outputCap: cfg.outputCap,
      env: deps.commandEnv,
      killGraceMs: deps.killGraceMs,
      ...(deps.toolUser ? { user: deps.toolUser } : {}),
    };
  }

  async run(): Promise<SummaryRecord> {
    const messages: ChatMessage[] = [
      { role: "system", content: SYSTEM_PROMPT },
      { role: "user", content: this.deps.userPrompt ?? taskPrompt(this.cfg.workspace) },
    ];
    this.deps.log.session({
      type: "session",
      version: AGENT_VERSION,
      session_id: this.sessionId,
      started_at: new Date().toISOString(),
      model: this.cfg.model,
      base_url: this.cfg.baseUrl,
      max_turns: this.cfg.maxTurns,
      workdir: this.cfg.workdir,
      workspace: this.cfg.workspace,
      tools: [...TOOL_NAMES],
      messages: messages.map((m) => ({ ...m })),
    });
    try {
      for (let turn = 1; turn <= this.cfg.maxTurns; turn++) {
        const end = await this.turn(turn, messages);
        if (this.summary) return this.summary;
        if (end) return this.end(end.reason, end.code, end.detail);
      }
      return this.end("max_turns", "max_turns", `stopped after ${this.cfg.maxTurns} turns`);
    } catch (e) {
      // An abort means interrupt() has already written the summary.
      if (this.summary) return this.summary;
      return this.end("internal_error", "internal_error", (e as Error)?.stack ?? String(e));
    }
  }

  /** One model call and its tool calls. Returns a reason when the session must end. */
  private async turn(
    turn: number,
    messages: ChatMessage[],
  ): Promise<{ reason: EndReason; code: string; detail?: string } | null> {
    const cur: TurnInFlight = {
      turn,
      startedAt: new Date().toISOString(),
      t0: performance.now(),
      messages: [],
      toolCalls: [],
      toolsMs: 0,
    };
    this.current = cur;
    const outcome = await this.client.complete(messages, this.tools, turn, this.deps.signal);
    this.llmRetries += outcome.retries;
    if (outcome.kind === "fatal") {
      this.current = null;
      return { reason: outcome.reason, code: outcome.code, detail: outcome.detail };
    }
    const a = outcome.answer;
    cur.llm = {
      finishReason: a.finishReason,
      usage: a.usage,
      model: a.model,
      id: a.id,
      reasoning: a.reasoning,
      retries: outcome.retries,
      errors: outcome.errors,
      llmMs: outcome.llmMs,
      ttfbMs: outcome.ttfbMs,
      toolCallCount: a.toolCalls.length,
    };
    if (a.usage) {
      this.usage.prompt_tokens += a.usage.prompt_tokens;
      this.usage.completion_tokens += a.usage.completion_tokens;
      this.usage.total_tokens += a.usage.total_tokens;
      this.usage.cached_tokens += a.usage.cached_tokens;
    }
    // What is resent must be valid JSON: repaired arguments replace the originals, and arguments
    // beyond repair are resent as {} (the tool result quotes what the model actually sent).
    const historyCalls: ChatToolCall[] = a.toolCalls.map((c) => {
      const p = parseToolArguments(c.function.arguments);
      const args = !p.ok ? "{}" : p.repaired ? JSON.stringify(p.args) : c.function.arguments;
      return { id: c.id, type: "function", function: { name: c.function.name, arguments: args } };
    });
    const assistant: ChatMessage = { role: "assistant", content: a.content === "" ? null : a.content };
    if (historyCalls.length > 0) assistant.tool_calls = historyCalls;
    messages.push(assistant);
    cur.messages.push(assistant);
    if (a.content !== "") this.finalMessage = a.content;

    const toolsStart = performance.now();
    for (const call of a.toolCalls) {
      const r = await executeToolCall(call.function.name, call.function.arguments, this.toolCtx);
      if (this.summary) return null;
      const toolMsg: ChatMessage = { role: "tool", tool_call_id: call.id, content: r.content };
      messages.push(toolMsg);
      cur.messages.push(toolMsg);
      cur.toolCalls.push({
        id: call.id,
        name: call.function.name,
        arguments_raw: call.function.arguments,
        ...r.record,
      });
      this.toolCallCount++;
    }
    cur.toolsMs = performance.now() - toolsStart;
    const rec = this.turnRecord(cur, false);
    this.deps.log.turn(rec);
    this.deps.progress?.(
      `turn ${turn}: finish=${a.finishReason ?? "none"} tools=[${a.toolCalls.map((c) => c.function.name).join(",")}]` +
        ` llm=${rec.timing.llm_ms}ms tools=${rec.timing.tools_ms}ms` +
        (a.usage ? ` tokens=${a.usage.prompt_tokens}+${a.usage.completion_tokens}` : ""),
    );
    this.turnsDone++;
    this.finishReasons.push(a.finishReason);
    this.current = null;
    if (a.toolCalls.length === 0) return { reason: "completed", code: a.finishReason ?? "stop" };
    return null;
  }

  private turnRecord(cur: TurnInFlight, partial: boolean): TurnRecord {
    const llm = cur.llm;
    const rec: TurnRecord = {
      type: "turn",
      turn: cur.turn,
      started_at: cur.startedAt,
      messages: cur.messages,
      tool_call_count: llm?.toolCallCount ?? 0,
      finish_reason: llm?.finishReason ?? null,
      usage: llm?.usage ?? null,
      model: llm?.model ?? null,
      response_id: llm?.id ?? null,
      retries: llm?.retries ?? 0,
      tool_calls: cur.toolCalls,
      timing: {
        llm_ms: Math.round(llm?.llmMs ?? performance.now() - cur.t0),
        ttfb_ms: llm?.ttfbMs == null ? null : Math.round(llm.ttfbMs),
        tools_ms: Math.round(cur.toolsMs),
        total_ms: Math.round(performance.now() - cur.t0),
      },
    };
    if (llm?.reasoning) rec.reasoning = llm.reasoning;
    if (llm?.errors.length) rec.llm_errors = llm.errors;
    if (partial) rec.partial = true;
    return rec;
  }

  /**
   * The synchronous end for a signal: the turn in flight (if the model had answered) is written
   * as partial, then the summary. Returns the summary; the caller exits with its exit_code.
   */
  interrupt(signalName: string): SummaryRecord {
    if (this.summary) return this.summary;
    const cur = this.current;
    if (cur?.llm) {
      this.deps.log.turn(this.turnRecord(cur, true));
      this.turnsDone++;
      this.finishReasons.push(cur.llm.finishReason);
    }
    this.current = null;
    return this.end("signal", signalName, `received ${signalName}`);
  }

  /** The end for an unexpected exception outside the loop (uncaughtException). */
  crash(err: unknown): SummaryRecord {
    return this.end("internal_error", "internal_error", (err as Error)?.stack ?? String(err));
  }

  private end(reason: EndReason, code?: string, detail?: string): SummaryRecord {
    if (this.summary) return this.summary;
    const exitCode =
      reason === "completed" || reason === "max_turns"
        ? AGENT_EXIT.completed
        : reason === "budget_exhausted"
          ? AGENT_EXIT.budget_exhausted
          : reason === "llm_error"
            ? AGENT_EXIT.llm_error
            : reason === "config_error"
              ? AGENT_EXIT.config_error
              : reason === "signal"
                ? (SIGNAL_EXIT[code ?? ""] ?? AGENT_EXIT.SIGTERM)
                : AGENT_EXIT.internal_error;
    const rec: SummaryRecord = {
      type: "summary",
      reason,
      ...(code ? { code } : {}),
      ...(detail ? { detail } : {}),
      exit_code: exitCode,
      turns: this.turnsDone,
      tool_call_count: this.toolCallCount,
      finish_reasons: [...this.finishReasons],
      usage: { ...this.usage },
      llm_retries: this.llmRetries,
      duration_ms: Math.round(performance.now() - this.t0),
      ended_at: new Date().toISOString(),
      final_message: this.finalMessage,
    };
    this.summary = rec;
    this.deps.log.summary(rec);
    return rec;
  }
}
