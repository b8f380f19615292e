/**
 * `hermes`' session store and export: the real agent loop against a scripted model on loopback,
 * its records kept by HermesSessionLog, replayed by `sessions export` into Hermes' format — read
 * back the way upstream's validator reads turns.jsonl (sandbox_harness.py `_last_session_obj`,
 * `_provenance`, `_episode_incomplete_no_progress`, `_parse_session_cost`).
 */
import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { SummaryRecord, TurnRecord } from "../../agent/contract.js";
import type { AgentConfig } from "../../agent/src/env.js";
import {
  exportText,
  HermesSessionLog,
  HermesSessionStore,
  hermesCommandEnv,
  loadStore,
  replaySession,
} from "../../agent/src/hermes.js";
import { AgentSession } from "../../agent/src/loop.js";
import { SYSTEM_PROMPT } from "../../agent/src/prompts.js";
import { fingerprint } from "../../src/meter/index.js";
import {
  type Script,
  type ScriptedModel,
  type ScriptedReply,
  startScriptedModel,
} from "../helpers/scripted-model.js";

/** Hermes' `sessions` columns in its schema's order, then `messages` (SessionDB.export_session). */
const SESSION_KEYS = [
  "id",
  "source",
  "user_id",
  "model",
  "model_config",
  "system_prompt",
  "parent_session_id",
  "started_at",
  "ended_at",
  "end_reason",
  "message_count",
  "tool_call_count",
  "input_tokens",
  "output_tokens",
  "cache_read_tokens",
  "cache_write_tokens",
  "reasoning_tokens",
  "billing_provider",
  "billing_base_url",
  "billing_mode",
  "estimated_cost_usd",
  "actual_cost_usd",
  "cost_status",
  "cost_source",
  "pricing_version",
  "title",
  "api_call_count",
  "messages",
];
const MESSAGE_KEYS = [
  "id",
  "session_id",
  "role",
  "content",
  "tool_call_id",
  "tool_calls",
  "tool_name",
  "timestamp",
  "token_count",
  "finish_reason",
  "reasoning",
  "reasoning_content",
  "reasoning_details",
  "codex_reasoning_items",
  "codex_message_items",
];

interface ExportedMessage {
  role: string;
  content: string | null;
  tool_calls: Array<{ id: string; type: string; function: { name: string; arguments: string } }> | null;
  tool_call_id: string | null;
  tool_name: string | null;
  finish_reason: string | null;
  id: number;
  session_id: string;
}
type ExportedSessionJson = Record<string, unknown> & { messages: ExportedMessage[] };

/** upstream `_last_session_obj`: the last line that parses as a JSON object. */
function lastSessionObj(blob: string): ExportedSessionJson | undefined {
  let last: ExportedSessionJson | undefined;
  for (const line of blob.split("\n")) {
    if (!line.trim()) continue;
    try {
      const v = JSON.parse(line);
      if (v && typeof v === "object" && !Array.isArray(v)) last = v;
    } catch {
      // skipped, as upstream does
    }
  }
  return last;
}

let root: string;
let model: ScriptedModel | undefined;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "hermes-session-"));
  mkdirSync(join(root, "app"));
  mkdirSync(join(root, "ws"));
});
afterEach(async () => {
  await model?.close();
  model = undefined;
  rmSync(root, { recursive: true, force: true });
});

function config(url: string): AgentConfig {
  return {
    baseUrl: url,
    model: "auto",
    apiKey: "ep-token",
    maxTurns: 20,
    workdir: join(root, "app"),
    workspace: join(root, "ws"),
    turnsFile: join(root, "ws/unused-turns.jsonl"),
    transcriptFile: join(root, "ws/unused-transcript.txt"),
    toolTimeoutS: 30,
    outputCap: 16384,
    llmTimeoutMs: 10_000,
    llmRetries: 2,
    retryBaseMs: 1,
  };
}

let chats = 0;

/** One `hermes chat` in-process, in its own fresh store; returns that store's export. */
async function chat(script: Script, prompt = "Solve the task in /workspace/INSTRUCTION.md.") {
  model = await startScriptedModel(script);
  const dir = join(root, `home-${++chats}/sessions`);
  const store = new HermesSessionStore(dir, "20260507_090305_a1b2c3");
  let stdout = "";
  const log = new HermesSessionLog(store, (t) => (stdout += t), {
    toolsets: ["terminal", "file"],
    maxTurns: 20,
  });
  const session = new AgentSession(config(model.url), {
    log,
    commandEnv: hermesCommandEnv({ ...process.env, HOME: root }),
    signal: new AbortController().signal,
    userPrompt: prompt,
  });
  const summary = await session.run();
  log.close();
  return { summary, stdout, store, text: exportText(loadStore(dir)) };
}

const SCRIPT: ScriptedReply[] = [
  {
    content: "Looking around.",
    toolCalls: [{ id: "c1", name: "terminal", arguments: '{"command": "echo hi > out.txt && cat out.txt"}' }],
    usage: { prompt_tokens: 500, completion_tokens: 40, cached_tokens: 100 },
  },
  {
    // Not valid JSON: the agent repairs it to run the tool, the export keeps what the model sent.
    toolCalls: [
      { id: "c2", name: "write_file", arguments: "{'path': 'a.txt', 'content': 'A'}" },
      { id: "c3", name: "read_file", arguments: '{"path": "a.txt"}' },
    ],
    usage: { prompt_tokens: 700, completion_tokens: 30 },
  },
  { content: "Done: out.txt and a.txt written.", usage: { prompt_tokens: 800, completion_tokens: 5 } },
];

describe("hermes session export", () => {
  it("writes one line per session in Hermes' shape, with the -q prompt as the opening user message", async () => {
    const { summary, text, stdout } = await chat(SCRIPT, "Read /workspace/SKILL.md. Solve the task.");
    expect(summary.reason).toBe("completed");
    expect(text.endsWith("\n")).toBe(true);
    expect(text.trimEnd().split("\n")).toHaveLength(1);
    // Python's separators, not JavaScript's.
    expect(text.startsWith('{"id": "20260507_090305_a1b2c3", "source": "cli", ')).toBe(true);

    const s = lastSessionObj(text)!;
    expect(Object.keys(s)).toEqual(SESSION_KEYS);
    for (const m of s.messages) expect(Object.keys(m)).toEqual(MESSAGE_KEYS);
    expect(s.system_prompt).toBe(SYSTEM_PROMPT);
    expect(model!.requests[0]!.body.messages[1]).toEqual({
      role: "user",
      content: "Read /workspace/SKILL.md. Solve the task.",
    });
    expect(s.messages.map((m) => m.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
      "tool",
      "tool",
      "assistant",
    ]);
    expect(s.messages[0]!.content).toBe("Read /workspace/SKILL.md. Solve the task.");
    expect(s.messages.map((m) => m.id)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(new Set(s.messages.map((m) => m.session_id))).toEqual(new Set([s.id]));
    expect(s.messages.filter((m) => m.role === "assistant").map((m) => m.finish_reason)).toEqual([
      "tool_calls",
      "tool_calls",
      "stop",
    ]);
    // Tool results name their call and tool.
    expect(s.messages.filter((m) => m.role === "tool").map((m) => [m.tool_call_id, m.tool_name])).toEqual([
      ["c1", "terminal"],
      ["c2", "write_file"],
      ["c3", "read_file"],
    ]);
    expect(s).toMatchObject({
      model: "auto",
      end_reason: "completed",
      message_count: 7,
      tool_call_count: 3,
      input_tokens: 400 + 700 + 800,
      output_tokens: 75,
      cache_read_tokens: 100,
      api_call_count: 3,
      actual_cost_usd: null,
      estimated_cost_usd: null,
    });
    expect(typeof s.started_at).toBe("number");
    expect(s.ended_at as number).toBeGreaterThanOrEqual(s.started_at as number);
    expect(JSON.parse(s.model_config as string)).toMatchObject({
      max_iterations: 20,
      toolsets: ["terminal", "file"],
    });
    // The transcript went to stdout as the session went.
    expect(stdout).toContain("→ terminal");
    expect(stdout).toContain("Done: out.txt and a.txt written.");
    expect(readFileSync(join(root, "app/a.txt"), "utf8")).toBe("A");
  });

  it("keeps the tool calls the model sent, so upstream's provenance check matches the meter's fingerprints", async () => {
    const { text } = await chat(SCRIPT);
    const answers = lastSessionObj(text)!.messages.filter((m) => m.role === "assistant");
    expect(answers).toHaveLength(SCRIPT.length);
    answers.forEach((m, i) => {
      const sent = SCRIPT[i]!;
      // What the meter fingerprints: the provider's answer as it passed through.
      const metered = fingerprint(
        sent.content ?? "",
        (sent.toolCalls ?? []).map((c) => ({ name: c.name, arguments: c.arguments })),
      );
      const exported = fingerprint(
        m.content ?? "",
        (m.tool_calls ?? []).map((c) => ({ name: c.function.name, arguments: c.function.arguments })),
      );
      expect(exported).toEqual(metered);
    });
    expect(answers[1]!.tool_calls![0]!.function.arguments).toBe("{'path': 'a.txt', 'content': 'A'}");
  });

  it("reads as upstream's no-progress signature only when the model never acted", async () => {
    const acted = lastSessionObj((await chat(SCRIPT)).text)!;
    await model?.close();
    const idle = lastSessionObj((await chat([{ content: "", finishReason: "length" }])).text)!;
    // _episode_incomplete_no_progress: tool_call_count == 0 and an assistant finish_reason "incomplete".
    expect(acted.tool_call_count).toBe(3);
    expect(idle.tool_call_count).toBe(0);
    expect(idle.messages.filter((m) => m.role === "assistant").map((m) => m.finish_reason)).toEqual([
      "length",
    ]);
    // _parse_session_cost: no price known to the agent → None (the meter has the cost).
    expect(idle.actual_cost_usd ?? idle.estimated_cost_usd ?? null).toBeNull();
  });
});

describe("hermes session store", () => {
  const turn = (n: number, id: string, partial = false): TurnRecord => ({
    type: "turn",
    turn: n,
    started_at: new Date().toISOString(),
    messages: [
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id, type: "function", function: { name: "terminal", arguments: '{"command":"true"}' } },
        ],
      },
      { role: "tool", tool_call_id: id, content: "[exit code: 0]" },
    ],
    tool_call_count: 1,
    finish_reason: "tool_calls",
    usage: { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12, cached_tokens: 0 },
    model: "m",
    response_id: null,
    retries: 0,
    tool_calls: [
      {
        id,
        name: "terminal",
        arguments_raw: '{"command": "true"}',
        ok: true,
        duration_ms: 1,
        output_bytes: 0,
      },
    ],
    timing: { llm_ms: 1, ttfb_ms: 1, tools_ms: 1, total_ms: 2 },
    ...(partial ? { partial: true as const } : {}),
  });

  function begin(dir: string, id: string) {
    const store = new HermesSessionStore(dir, id);
    const log = new HermesSessionLog(store, () => undefined, { toolsets: [], maxTurns: 5 });
    log.session({
      type: "session",
      version: "0.1.0",
      session_id: "x",
      started_at: new Date().toISOString(),
      model: "auto",
      base_url: "http://policy:8800/v1",
      max_turns: 5,
      workdir: "/app",
      workspace: "/workspace",
      tools: ["terminal"],
      messages: [
        { role: "system", content: "sys" },
        { role: "user", content: "go" },
      ],
    });
    return { store, log };
  }

  it("survives a kill: finished turns are on disk, a torn line is skipped, the session has no end", () => {
    const dir = join(root, "sessions");
    const { store, log } = begin(dir, "s1");
    log.turn(turn(1, "a"));
    log.turn(turn(2, "b"));
    // SIGKILL mid-write: the process dies with half a line written and nothing closed.
    appendFileSync(store.path, '{"kind":"message","message":{"role":"assis');
    const s = replaySession(readFileSync(store.path, "utf8"))!;
    expect(s.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant", "tool"]);
    expect(s.row).toMatchObject({ ended_at: null, end_reason: null, tool_call_count: 2, message_count: 5 });
    // The arguments kept are the raw ones (with the model's spacing), not the agent's re-serialisation.
    expect(s.messages[1]!.tool_calls![0]!.function.arguments).toBe('{"command": "true"}');
  });

  it("records the partial turn and the end a signal handler writes", () => {
    const dir = join(root, "sessions");
    const { log } = begin(dir, "s1");
    log.turn(turn(1, "a", true));
    const end: SummaryRecord = {
      type: "summary",
      reason: "signal",
      code: "SIGTERM",
      exit_code: 143,
      turns: 1,
      tool_call_count: 1,
      finish_reasons: ["tool_calls"],
      usage: { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12, cached_tokens: 0 },
      llm_retries: 0,
      duration_ms: 5,
      ended_at: new Date().toISOString(),
      final_message: null,
    };
    log.summary(end);
    log.summary({ ...end, reason: "completed" });
    log.close();
    const s = loadStore(dir)[0]!;
    expect(s.row).toMatchObject({ end_reason: "signal", tool_call_count: 1 });
  });

  it("exports every session newest first, message ids counted from the oldest, foreign files ignored", () => {
    const dir = join(root, "sessions");
    const older = begin(dir, "s-old");
    older.log.turn(turn(1, "a"));
    older.log.close();
    const newer = begin(dir, "s-new");
    newer.log.close();
    writeFileSync(join(dir, "notes.txt"), "not a session");
    writeFileSync(join(dir, "garbage.jsonl"), "{not json\n[1,2]\n");
    expect(readdirSync(dir).sort()).toEqual(["garbage.jsonl", "notes.txt", "s-new.jsonl", "s-old.jsonl"]);
    const lines = exportText(loadStore(dir))
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as ExportedSessionJson);
    expect(lines.map((l) => l.id)).toEqual(["s-new", "s-old"]);
    expect(lines[1]!.messages.map((m) => m.id)).toEqual([1, 2, 3]);
    expect(lines[0]!.messages.map((m) => m.id)).toEqual([4]);
    expect(exportText(loadStore(join(root, "nowhere")))).toBe("");
  });
});
