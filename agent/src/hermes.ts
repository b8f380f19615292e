/**
 * `hermes`: this project's agent behind Hermes Agent's command line, for the offline trajrl-bench
 * images (docker/images/sandbox-agent). Upstream's validator drives Hermes as
 *
 *   hermes chat -q PROMPT -m MODEL -t TOOLSETS --quiet --yolo     (as hermes, HOME=/opt/data)
 *   hermes sessions export /workspace/turns.jsonl                  (after the chat, or post mortem)
 *   hermes --version                                               (the harness identity probe)
 *
 * and this file answers the same way: `chat` runs the agent loop of agent/src in this process (the
 * process is named "hermes", so upstream's `pkill -KILL hermes` at the deadline ends the chat and
 * spares the shell around it), keeps the session in a store under $HERMES_HOME written as the
 * session goes (a SIGKILL loses at most the turn in flight), prints the transcript on stdout;
 * `sessions export` writes the store in Hermes' session-export format: one JSON object per session
 * (`json.dumps(ensure_ascii=False)` of the `sessions` row plus `messages`, as Hermes' SessionDB
 * `export_session` builds it). Bundled by scripts/build-agent.mjs as agent/dist/hermes.
 */
import { randomBytes } from "node:crypto";
import {
  closeSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import {
  AGENT_EXIT,
  AGENT_VERSION,
  type ChatMessage,
  type SessionRecord,
  type SummaryRecord,
  type TurnRecord,
} from "../contract.js";
import { AgentConfigError, commandEnv, readAgentEnv } from "./env.js";
import { AgentSession } from "./loop.js";
import { killAllCommandGroups } from "./shell.js";
import { SessionLog } from "./turns.js";

// ---- the command line ------------------------------------------------------------------------

export const HERMES_NAME = "trajrl-agent";

/** First line of `hermes --version`: upstream's probe takes the leading word and the first x.y.z. */
export function versionLine(): string {
  return `${HERMES_NAME} v${AGENT_VERSION} (hermes-compatible; node ${process.version})`;
}

export const USAGE = `usage: hermes chat -q PROMPT [-m MODEL] [-t TOOLSETS] [--max-turns N] [--quiet] [--yolo]
       hermes sessions export OUTPUT [--session-id ID] [--source SOURCE]   (OUTPUT "-" = stdout)
       hermes --version
${HERMES_NAME}, behind Hermes Agent's command line. The model endpoint: LLM_BASE_URL, else
$HERMES_HOME/config.yaml (model.base_url); the key: LLM_API_KEY, else config.yaml's api_key, else
OPENAI_API_KEY; the model: -m, else LLM_MODEL, else config.yaml's model.default. Sessions are kept
under $HERMES_HOME/sessions (HERMES_HOME defaults to $HOME/.hermes).`;

export type HermesCommand =
  | { kind: "version" }
  | { kind: "help" }
  | {
      kind: "chat";
      query: string;
      model?: string;
      toolsets: string[];
      maxTurns?: number;
      quiet: boolean;
      yolo: boolean;
      provider?: string;
    }
  | { kind: "export"; output: string; sessionId?: string; source?: string }
  | { kind: "usage_error"; message: string };

type FlagSpec = Record<string, { key: string; value: boolean }>;

const CHAT_FLAGS: FlagSpec = {
  "-q": { key: "query", value: true },
  "--query": { key: "query", value: true },
  "-m": { key: "model", value: true },
  "--model": { key: "model", value: true },
  "-t": { key: "toolsets", value: true },
  "--toolsets": { key: "toolsets", value: true },
  "--provider": { key: "provider", value: true },
  "--max-turns": { key: "maxTurns", value: true },
  "-Q": { key: "quiet", value: false },
  "--quiet": { key: "quiet", value: false },
  "--yolo": { key: "yolo", value: false },
  "-v": { key: "verbose", value: false },
  "--verbose": { key: "verbose", value: false },
};

const EXPORT_FLAGS: FlagSpec = {
  "--session-id": { key: "sessionId", value: true },
  "--source": { key: "source", value: true },
};

/** Flags (`-x V`, `--xx V`, `--xx=V`) and positionals, argparse-style; the first problem wins. */
function parseFlags(
  args: readonly string[],
  spec: FlagSpec,
): { flags: Record<string, string | true>; positionals: string[] } | { error: string } {
  const flags: Record<string, string | true> = {};
  const positionals: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--") {
      positionals.push(...args.slice(i + 1));
      break;
    }
    if (a.startsWith("-") && a !== "-") {
      const eq = a.indexOf("=");
      const name = a.startsWith("--") && eq > 0 ? a.slice(0, eq) : a;
      const f = spec[name];
      if (!f) return { error: `unrecognized argument: ${a}` };
      if (!f.value) {
        if (name !== a) return { error: `argument ${name}: ignored explicit argument` };
        flags[f.key] = true;
        continue;
      }
      const v = name !== a ? a.slice(eq + 1) : args[++i];
      if (v === undefined) return { error: `argument ${name}: expected one argument` };
      flags[f.key] = v;
      continue;
    }
    positionals.push(a);
  }
  return { flags, positionals };
}

export function parseHermesArgs(argv: readonly string[]): HermesCommand {
  const [cmd, ...rest] = argv;
  if (cmd === undefined)
    return { kind: "usage_error", message: "a command is required (non-interactive only)" };
  if (cmd === "--version" || cmd === "-V" || cmd === "version") return { kind: "version" };
  if (cmd === "--help" || cmd === "-h" || cmd === "help") return { kind: "help" };
  if (cmd === "chat") {
    const p = parseFlags(rest, CHAT_FLAGS);
    if ("error" in p) return { kind: "usage_error", message: p.error };
    if (p.positionals.length > 0)
      return { kind: "usage_error", message: `unrecognized argument: ${p.positionals[0]}` };
    const f = p.flags;
    if (typeof f.query !== "string" || f.query.trim() === "")
      return { kind: "usage_error", message: "chat needs -q PROMPT (this hermes is non-interactive)" };
    let maxTurns: number | undefined;
    if (typeof f.maxTurns === "string") {
      maxTurns = Number(f.maxTurns);
      if (!Number.isInteger(maxTurns) || maxTurns < 1)
        return { kind: "usage_error", message: `argument --max-turns: invalid int value: '${f.maxTurns}'` };
    }
    return {
      kind: "chat",
      query: f.query,
      ...(typeof f.model === "string" && f.model !== "" ? { model: f.model } : {}),
      toolsets:
        typeof f.toolsets === "string"
          ? f.toolsets
              .split(",")
              .map((s) => s.trim())
              .filter(Boolean)
          : [],
      ...(maxTurns !== undefined ? { maxTurns } : {}),
      quiet: f.quiet === true,
      yolo: f.yolo === true,
      ...(typeof f.provider === "string" ? { provider: f.provider } : {}),
    };
  }
  if (cmd === "sessions") {
    const [action, ...more] = rest;
    if (action !== "export")
      return {
        kind: "usage_error",
        message: `sessions: ${action === undefined ? "an action is required" : `unsupported action '${action}'`} (export)`,
      };
    const p = parseFlags(more, EXPORT_FLAGS);
    if ("error" in p) return { kind: "usage_error", message: p.error };
    if (p.positionals.length !== 1)
      return { kind: "usage_error", message: "sessions export needs exactly one OUTPUT path (- for stdout)" };
    const f = p.flags;
    return {
      kind: "export",
      output: p.positionals[0]!,
      ...(typeof f.sessionId === "string" ? { sessionId: f.sessionId } : {}),
      ...(typeof f.source === "string" ? { source: f.source } : {}),
    };
  }
  return { kind: "usage_error", message: `unknown command '${cmd}'` };
}

// ---- where the model is and where sessions live ----------------------------------------------

export interface HermesConfigFile {
  model?: string;
  baseUrl?: string;
  apiKey?: string;
}

/** The `model:` block of the config.yaml the image's entrypoint writes (flat quoted scalars). */
export function parseHermesConfig(text: string): HermesConfigFile {
  const out: HermesConfigFile = {};
  let inModel = false;
  for (const raw of text.split(/\r?\n/)) {
    if (/^\S/.test(raw)) {
      inModel = /^model:\s*$/.test(raw);
      continue;
    }
    if (!inModel) continue;
    const m = /^\s+(default|base_url|api_key):\s*(.*?)\s*$/.exec(raw);
    if (!m) continue;
    let v = m[2]!;
    if (v.length >= 2 && ((v.startsWith('"') && v.endsWith('"')) || (v.startsWith("'") && v.endsWith("'"))))
      v = v.slice(1, -1);
    if (v === "") continue;
    if (m[1] === "default") out.model = v;
    else if (m[1] === "base_url") out.baseUrl = v;
    else out.apiKey = v;
  }
  return out;
}

export interface Endpoint {
  baseUrl: string | undefined;
  model: string | undefined;
  apiKey: string | undefined;
}

/** The container's environment wins over the config file; `-m` wins for the model. */
export function resolveEndpoint(
  env: Record<string, string | undefined>,
  file: HermesConfigFile,
  modelFlag?: string,
): Endpoint {
  const get = (k: string) => {
    const v = env[k]?.trim();
    return v ? v : undefined;
  };
  return {
    baseUrl: get("LLM_BASE_URL") ?? file.baseUrl,
    model: modelFlag ?? get("LLM_MODEL") ?? file.model,
    apiKey: get("LLM_API_KEY") ?? file.apiKey ?? get("OPENAI_API_KEY"),
  };
}

export function hermesHome(env: Record<string, string | undefined>): string {
  const h = env.HERMES_HOME?.trim();
  if (h) return h;
  const home = env.HOME?.trim();
  return home ? join(home, ".hermes") : "/opt/data";
}

export function sessionsDir(home: string): string {
  return join(home, "sessions");
}

/** Hermes' session ids: local start time and a random suffix, e.g. 20260507_142233_1a2b3c. */
export function newSessionId(now: Date, suffix = randomBytes(3).toString("hex")): string {
  const p = (n: number) => String(n).padStart(2, "0");
  return `${now.getFullYear()}${p(now.getMonth() + 1)}${p(now.getDate())}_${p(now.getHours())}${p(now.getMinutes())}${p(now.getSeconds())}_${suffix}`;
}

/** Terminal commands never see a credential: ours (LLM_API_KEY) nor the ones upstream sets for Hermes. */
export function hermesCommandEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out = commandEnv(env);
  for (const k of ["OPENAI_API_KEY", "OPENROUTER_API_KEY", "ANTHROPIC_API_KEY"]) delete out[k];
  return out;
}

// ---- Python's json.dumps, for export lines ---------------------------------------------------

/** A REAL column: printed as Python prints a float (`1.0`, `1e-05`), not as JS prints a number. */
export class PyFloat {
  constructor(readonly value: number) {}
}

export type PyJson = null | boolean | number | string | PyFloat | PyJson[] | { [key: string]: PyJson };

/** `repr(float)`: shortest round-trip digits, scientific when the exponent is < -4 or >= 16. */
export function pyFloat(x: number): string {
  if (Number.isNaN(x)) return "NaN";
  if (!Number.isFinite(x)) return x > 0 ? "Infinity" : "-Infinity";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const sign = x < 0 ? "-" : "";
  const [mant, expText] = Math.abs(x).toExponential().split("e") as [string, string];
  const digits = mant.replace(".", "");
  const exp = Number(expText);
  if (exp >= -4 && exp < 16) {
    const point = exp + 1;
    if (point <= 0) return `${sign}0.${"0".repeat(-point)}${digits}`;
    if (point >= digits.length) return `${sign}${digits}${"0".repeat(point - digits.length)}.0`;
    return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
  }
  const frac = digits.length > 1 ? `.${digits.slice(1)}` : "";
  return `${sign}${digits[0]}${frac}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
}

/** `json.dumps(v, ensure_ascii=False)`: separators ", " and ": ", keys in insertion order. */
export function pyJson(v: PyJson): string {
  if (v === null) return "null";
  if (v instanceof PyFloat) return pyFloat(v.value);
  if (typeof v === "boolean") return v ? "true" : "false";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : pyFloat(v);
  // JSON.stringify escapes exactly Python's set: " \ \b \f \n \r \t, other controls as \u00xx.
  if (typeof v === "string") return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(pyJson).join(", ")}]`;
  return `{${Object.entries(v)
    .map(([k, x]) => `${JSON.stringify(k)}: ${pyJson(x)}`)
    .join(", ")}}`;
}

// ---- the session store -----------------------------------------------------------------------

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

/** Replay one session file (a torn or foreign line is skipped); undefined without a session line. */
export function replaySession(text: string): ExportedSession | undefined {
  let start: StoredSessionStart | undefined;
  const messages: StoredMessage[] = [];
  const usage = { input: 0, output: 0, cacheRead: 0, apiCalls: 0 };
  let end: { ended_at: number; end_reason: string } | undefined;
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
      start ??= rec.session as unknown as StoredSessionStart;
    else if (rec.kind === "message" && isObject(rec.message) && typeof rec.message.role === "string")
      messages.push(rec.message as unknown as StoredMessage);
    else if (rec.kind === "usage") {
      usage.input += num(rec.input_tokens);
      usage.output += num(rec.output_tokens);
      usage.cacheRead += num(rec.cache_read_tokens);
      usage.apiCalls += num(rec.api_calls);
    } else if (rec.kind === "end" && typeof rec.end_reason === "string")
      end = { ended_at: num(rec.ended_at), end_reason: rec.end_reason };
  }
  if (!start) return undefined;
  const toolCallCount = messages.reduce((n, m) => n + (m.tool_calls?.length ?? 0), 0);
  // Hermes' `sessions` columns, in its schema's order.
  const row: { [key: string]: PyJson } = {
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
  return { row, messages, startedAt: start.started_at };
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

// ---- the agent's records, kept as Hermes keeps a session -------------------------------------

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

// ---- the commands ----------------------------------------------------------------------------

const say = (text: string) => {
  try {
    writeSync(1, text);
  } catch {
    // stdout gone (EPIPE): the session store is what counts
  }
};
const err = (line: string) => {
  try {
    writeSync(2, `[hermes] ${line}\n`);
  } catch {
    // stderr gone
  }
};

function readText(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

async function chat(cmd: Extract<HermesCommand, { kind: "chat" }>): Promise<never> {
  const env = process.env;
  const home = hermesHome(env);
  const ep = resolveEndpoint(env, parseHermesConfig(readText(join(home, "config.yaml"))), cmd.model);
  let cfg: ReturnType<typeof readAgentEnv>;
  try {
    if (!ep.baseUrl)
      throw new AgentConfigError(
        `no model endpoint: set LLM_BASE_URL or model.base_url in ${home}/config.yaml`,
      );
    cfg = readAgentEnv({
      ...env,
      LLM_BASE_URL: ep.baseUrl,
      LLM_MODEL: ep.model ?? "",
      LLM_API_KEY: ep.apiKey ?? "",
      ...(cmd.maxTurns !== undefined ? { AGENT_MAX_TURNS: String(cmd.maxTurns) } : {}),
    });
    mkdirSync(cfg.workdir, { recursive: true });
  } catch (e) {
    err((e as Error).message);
    process.exit(AGENT_EXIT.config_error);
  }
  const store = new HermesSessionStore(sessionsDir(home), newSessionId(new Date()));
  const log = new HermesSessionLog(store, say, { toolsets: cmd.toolsets, maxTurns: cfg.maxTurns });
  const ac = new AbortController();
  const session = new AgentSession(cfg, {
    log,
    commandEnv: hermesCommandEnv(env),
    signal: ac.signal,
    progress: err,
    userPrompt: cmd.query,
  });
  const finish = (summary: SummaryRecord): never => {
    log.close();
    process.exit(summary.exit_code);
  };
  const onSignal = (sig: NodeJS.Signals) => {
    killAllCommandGroups("SIGKILL");
    const summary = session.interrupt(sig);
    ac.abort(new Error(sig));
    err(`${sig}: session ${store.sessionId} ended after ${summary.turns} turns`);
    finish(summary);
  };
  for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"] as const) process.on(sig, onSignal);
  process.on("uncaughtException", (e) => {
    killAllCommandGroups("SIGKILL");
    err(`internal error: ${e.stack ?? e.message}`);
    finish(session.crash(e));
  });
  err(
    `${versionLine()}: session ${store.sessionId}, model ${cfg.model} at ${cfg.baseUrl}, workdir ${cfg.workdir}`,
  );
  return finish(await session.run());
}

function exportSessions(cmd: Extract<HermesCommand, { kind: "export" }>): number {
  let sessions = loadStore(sessionsDir(hermesHome(process.env)));
  if (cmd.source !== undefined) sessions = sessions.filter((s) => s.row.source === cmd.source);
  if (cmd.sessionId !== undefined) {
    const want = cmd.sessionId;
    const exact = sessions.filter((s) => s.row.id === want);
    const byPrefix = sessions.filter((s) => String(s.row.id).startsWith(want));
    const hit = exact.length === 1 ? exact : byPrefix.length === 1 ? byPrefix : [];
    if (hit.length === 0) {
      say(`Session '${want}' not found.\n`);
      return 0;
    }
    sessions = hit;
  }
  const text = exportText(sessions);
  if (cmd.output === "-") {
    say(text);
    return 0;
  }
  try {
    writeFileSync(cmd.output, text);
  } catch (e) {
    err(`cannot write ${cmd.output}: ${(e as Error).message}`);
    return 1;
  }
  say(
    cmd.sessionId !== undefined
      ? `Exported 1 session to ${cmd.output}\n`
      : `Exported ${sessions.length} sessions to ${cmd.output}\n`,
  );
  return 0;
}

/** The bundle's entry (scripts/build-agent.mjs): one command, then exit. */
export async function runHermesCli(argv: readonly string[]): Promise<never> {
  const cmd = parseHermesArgs(argv);
  switch (cmd.kind) {
    case "version":
      say(`${versionLine()}\n`);
      process.exit(0);
      break;
    case "help":
      say(`${USAGE}\n`);
      process.exit(0);
      break;
    case "usage_error":
      process.stderr.write(`${USAGE}\nhermes: error: ${cmd.message}\n`);
      process.exit(2);
      break;
    case "export":
      process.exit(exportSessions(cmd));
      break;
    case "chat":
      await chat(cmd);
  }
  process.exit(AGENT_EXIT.internal_error);
}
