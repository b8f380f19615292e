/** Types of agent/contract.js (see there). Keep the two in step. */

export declare const AGENT_VERSION: string;
export declare const AGENT_PATH_IN_IMAGE: string;
/** `node /opt/trajrl/agent.js`: what AGENT_COMMAND means when unset. */
export declare const DEFAULT_AGENT_COMMAND: string;
/** `trajrl/agent-base:latest`: the base image tag before content-hash tags exist. */
export declare const DEFAULT_AGENT_IMAGE: string;
export declare const AGENT_UID: number;
export declare const AGENT_GID: number;
export declare const TURNS_FILE_NAME: string;
export declare const TRANSCRIPT_FILE_NAME: string;

export declare const AGENT_ENV_DEFAULTS: Readonly<{
  LLM_BASE_URL: string;
  LLM_MODEL: string;
  AGENT_MAX_TURNS: number;
  AGENT_WORKDIR: string;
  AGENT_WORKSPACE: string;
  AGENT_TOOL_TIMEOUT_S: number;
  AGENT_OUTPUT_CAP: number;
  AGENT_LLM_TIMEOUT_S: number;
  AGENT_LLM_RETRIES: number;
  AGENT_RETRY_BASE_MS: number;
}>;

export declare const AGENT_EXIT: Readonly<{
  completed: 0;
  internal_error: 1;
  config_error: 2;
  budget_exhausted: 3;
  llm_error: 4;
  SIGHUP: 129;
  SIGINT: 130;
  SIGTERM: 143;
}>;

export declare const AGENT_BASE_CONTEXT: Readonly<{
  dockerfileDir: string;
  dockerfile: string;
  extra: ReadonlyArray<Readonly<{ from: string; to: string }>>;
}>;

/** The container argv for an agent command template (plain words split; otherwise `/bin/sh -c`). */
export declare function agentCommandArgv(command?: string): string[];

export interface AgentEnvOptions {
  llmBaseUrl?: string;
  llmModel?: string;
  llmApiKey?: string;
  maxTurns?: number;
  workdir?: string;
  workspace?: string;
  toolTimeoutS?: number;
  outputCap?: number;
  turnsFile?: string;
  transcriptFile?: string;
  /**
   * Run every tool as this user (AGENT_TOOL_UID/GID/HOME): the agent itself runs as root with
   * CAP_SETUID/SETGID/KILL, so no tool command can write its record or touch its process.
   */
  toolUser?: { uid: number; gid: number; home?: string };
}
/** `KEY=value` entries for the agent's container (dockerode `Env`). */
export declare function agentEnv(opts?: AgentEnvOptions): string[];

// ---- turns.jsonl records ---------------------------------------------------------------

export interface ChatToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string | null;
  tool_calls?: ChatToolCall[];
  tool_call_id?: string;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  cached_tokens: number;
}

/** First line: how the session was started, with the fixed system prompt and the task prompt. */
export interface SessionRecord {
  type: "session";
  version: string;
  session_id: string;
  started_at: string;
  model: string;
  base_url: string;
  max_turns: number;
  workdir: string;
  workspace: string;
  tools: string[];
  messages: ChatMessage[];
}

export interface ToolCallRecord {
  id: string;
  name: string;
  /** What the model sent, verbatim. */
  arguments_raw: string;
  /** Set when the arguments had to be repaired: what was done. */
  repaired?: string;
  ok: boolean;
  /** Stable code of a failed call, e.g. `bad_json`, `not_found`, `timeout`, `exit_nonzero`. */
  error_code?: string;
  duration_ms: number;
  exit_code?: number | null;
  timed_out?: boolean;
  output_bytes: number;
  truncated_bytes?: number;
}

/** One model answer and the tool results it produced, appended as soon as the turn ends. */
export interface TurnRecord {
  type: "turn";
  turn: number;
  started_at: string;
  /** The assistant message, then one tool message per tool call, exactly as resent to the model. */
  messages: ChatMessage[];
  tool_call_count: number;
  finish_reason: string | null;
  usage: Usage | null;
  model: string | null;
  response_id: string | null;
  reasoning?: string;
  retries: number;
  /** `code: message` of each failed model request retried before this answer. */
  llm_errors?: string[];
  tool_calls: ToolCallRecord[];
  /** Written by a signal handler while the turn was still running. */
  partial?: true;
  timing: { llm_ms: number; ttfb_ms: number | null; tools_ms: number; total_ms: number };
}

export type EndReason =
  | "completed"
  | "max_turns"
  | "budget_exhausted"
  | "llm_error"
  | "signal"
  | "internal_error"
  | "config_error";

/** Last line: why and how the session ended. Missing only after SIGKILL. */
export interface SummaryRecord {
  type: "summary";
  reason: EndReason;
  /** A stable code for the reason, e.g. `llm_http_400`, `llm_unreachable`, `SIGTERM`. */
  code?: string;
  detail?: string;
  exit_code: number;
  turns: number;
  tool_call_count: number;
  finish_reasons: (string | null)[];
  usage: Usage;
  llm_retries: number;
  duration_ms: number;
  ended_at: string;
  final_message: string | null;
}

export type TurnsRecord = SessionRecord | TurnRecord | SummaryRecord;

export interface ParsedTurns {
  session: SessionRecord | undefined;
  turns: TurnRecord[];
  summary: SummaryRecord | undefined;
  invalidLines: number;
}
export declare function parseTurnsJsonl(text: string): ParsedTurns;
