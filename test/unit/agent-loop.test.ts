import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AGENT_EXIT, parseTurnsJsonl } from "../../agent/contract.js";
import { type AgentConfig, commandEnv } from "../../agent/src/env.js";
import { AgentSession } from "../../agent/src/loop.js";
import { SYSTEM_PROMPT, taskPrompt } from "../../agent/src/prompts.js";
import { killAllCommandGroups } from "../../agent/src/shell.js";
import { SessionLog } from "../../agent/src/turns.js";
import { type Script, type ScriptedModel, startScriptedModel } from "../helpers/scripted-model.js";

let root: string;
let model: ScriptedModel | undefined;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "agent-loop-"));
  mkdirSync(join(root, "app"));
  mkdirSync(join(root, "ws"));
  writeFileSync(join(root, "ws/SKILL.md"), "# Skill\nAlways verify.\n");
  writeFileSync(join(root, "ws/INSTRUCTION.md"), "Write hello to /app/out.txt\n");
});
afterEach(async () => {
  await model?.close();
  model = undefined;
  rmSync(root, { recursive: true, force: true });
});

function config(url: string, over: Partial<AgentConfig> = {}): AgentConfig {
  return {
    baseUrl: url,
    model: "auto",
    apiKey: undefined,
    maxTurns: 90,
    workdir: join(root, "app"),
    workspace: join(root, "ws"),
    turnsFile: join(root, "ws/turns.jsonl"),
    transcriptFile: join(root, "ws/transcript.txt"),
    toolTimeoutS: 30,
    outputCap: 16384,
    llmTimeoutMs: 10_000,
    llmRetries: 4,
    retryBaseMs: 1,
    ...over,
  };
}

async function runWith(script: Script, over: Partial<AgentConfig> = {}) {
  model = await startScriptedModel(script);
  const cfg = config(model.url, over);
  const log = new SessionLog(cfg.turnsFile, cfg.transcriptFile);
  const session = new AgentSession(cfg, {
    log,
    commandEnv: commandEnv({ ...process.env, HOME: root }),
    signal: new AbortController().signal,
  });
  const summary = await session.run();
  log.close();
  const turns = parseTurnsJsonl(readFileSync(cfg.turnsFile, "utf8"));
  return { summary, turns, requests: model.requests, cfg };
}

const stop = (content = "Done.") => ({ content });

describe("agent loop against a scripted model", () => {
  it("runs a whole session: fixed opening, whole conversation resent, tools executed, turns logged", async () => {
    const ws = join(root, "ws");
    const { summary, turns, requests } = await runWith([
      {
        content: "Reading the task.",
        toolCalls: [
          { id: "r1", name: "read_file", arguments: JSON.stringify({ path: `${ws}/SKILL.md` }) },
          { id: "r2", name: "read_file", arguments: JSON.stringify({ path: `${ws}/INSTRUCTION.md` }) },
        ],
        usage: { prompt_tokens: 500, completion_tokens: 40, cached_tokens: 0 },
        lineEnding: "\r\n",
      },
      {
        toolCalls: [
          { id: "t1", name: "terminal", arguments: '{"command": "echo hello > out.txt && cat out.txt"}' },
        ],
        usage: { prompt_tokens: 700, completion_tokens: 30, cached_tokens: 500 },
        fragment: 2,
      },
      { ...stop("Wrote out.txt."), usage: { prompt_tokens: 800, completion_tokens: 5 } },
    ]);
    expect(summary).toMatchObject({
      reason: "completed",
      exit_code: AGENT_EXIT.completed,
      turns: 3,
      tool_call_count: 3,
      finish_reasons: ["tool_calls", "tool_calls", "stop"],
      usage: { prompt_tokens: 2000, completion_tokens: 75, total_tokens: 2075, cached_tokens: 500 },
      final_message: "Wrote out.txt.",
      llm_retries: 0,
    });
    expect(readFileSync(join(root, "app/out.txt"), "utf8")).toBe("hello\n");

    // The opening is fixed; every request resends the whole conversation so far.
    expect(requests).toHaveLength(3);
    const first = requests[0]!.body;
    expect(first.messages).toEqual([
      { role: "system", content: SYSTEM_PROMPT },
      { role: "user", content: taskPrompt(ws) },
    ]);
    expect(first.messages[1]!.content).toBe(
      `Read ${ws}/SKILL.md and ${ws}/INSTRUCTION.md, then complete the task described in ${ws}/INSTRUCTION.md.`,
    );
    expect(first).toMatchObject({ model: "auto", stream: true, stream_options: { include_usage: true } });
    expect(first.tools?.map((t) => t.function.name)).toEqual([
      "terminal",
      "read_file",
      "write_file",
      "patch",
      "search_files",
    ]);
    for (let i = 1; i < requests.length; i++) {
      const prev = requests[i - 1]!.body.messages;
      expect(requests[i]!.body.messages.slice(0, prev.length)).toEqual(prev);
    }
    const last = requests[2]!.body.messages;
    expect(last.map((m) => m.role)).toEqual([
      "system",
      "user",
      "assistant",
      "tool",
      "tool",
      "assistant",
      "tool",
    ]);
    expect(last[3]).toEqual({ role: "tool", tool_call_id: "r1", content: "# Skill\nAlways verify.\n" });
    expect(last[4]).toEqual({ role: "tool", tool_call_id: "r2", content: "Write hello to /app/out.txt\n" });
    expect(last[6]!.content).toBe("hello\n[exit code: 0]");
    expect(requests[0]!.headers.authorization).toBeUndefined();

    // turns.jsonl: session line, one line per turn, summary.
    expect(turns.invalidLines).toBe(0);
    expect(turns.session?.messages).toEqual(first.messages);
    expect(turns.turns.map((t) => [t.turn, t.tool_call_count, t.finish_reason])).toEqual([
      [1, 2, "tool_calls"],
      [2, 1, "tool_calls"],
      [3, 0, "stop"],
    ]);
    expect(turns.turns[1]!.usage).toEqual({
      prompt_tokens: 700,
      completion_tokens: 30,
      total_tokens: 730,
      cached_tokens: 500,
    });
    expect(turns.turns[0]!.messages.map((m) => m.role)).toEqual(["assistant", "tool", "tool"]);
    expect(turns.turns[1]!.tool_calls[0]).toMatchObject({ name: "terminal", ok: true, exit_code: 0 });
    expect(turns.summary).toEqual(summary);
    const transcript = readFileSync(join(root, "ws/transcript.txt"), "utf8");
    expect(transcript).toContain("## turn 2");
    expect(transcript).toContain('→ terminal {"command": "echo hello > out.txt && cat out.txt"}');
    expect(transcript).toContain("== end: completed");
  });

  it("sends the API key as a bearer token when one is set", async () => {
    const { requests } = await runWith([stop()], { apiKey: "sk-test-123" });
    expect(requests[0]!.headers.authorization).toBe("Bearer sk-test-123");
  });

  it("accepts a non-stream JSON answer", async () => {
    const { summary } = await runWith([
      { mode: "json", toolCalls: [{ name: "terminal", arguments: '{"command":"true"}' }] },
      { mode: "json", content: "ok" },
    ]);
    expect(summary.detail).toBeUndefined();
    expect(summary).toMatchObject({ reason: "completed", turns: 2, tool_call_count: 1, final_message: "ok" });
  });

  it("repairs malformed arguments, reports irreparable ones, and resends valid JSON in the history", async () => {
    const { summary, requests, turns } = await runWith([
      {
        toolCalls: [
          { id: "a", name: "terminal", arguments: '{"command": "echo fixed"' },
          { id: "b", name: "write_file", arguments: '{"path": "x.txt", "content": "cut off' },
        ],
      },
      stop(),
    ]);
    expect(summary.reason).toBe("completed");
    const msgs = requests[1]!.body.messages;
    const assistant = msgs[2] as { tool_calls: { function: { arguments: string } }[] };
    expect(assistant.tool_calls.map((c) => c.function.arguments)).toEqual(['{"command":"echo fixed"}', "{}"]);
    expect(msgs[3]!.content).toMatch(/repaired: missing closing brace added\]\nfixed\n\[exit code: 0\]$/);
    expect(msgs[4]!.content).toMatch(/^error: the arguments of this write_file call are not valid JSON/);
    const rec = turns.turns[0]!.tool_calls;
    expect(rec[0]).toMatchObject({
      arguments_raw: '{"command": "echo fixed"',
      repaired: "missing closing brace added",
    });
    expect(rec[1]).toMatchObject({ ok: false, error_code: "bad_json" });
  });

  it("retries 503, 429 (Retry-After), a cut stream and a mid-stream error, then carries on", async () => {
    const { summary, requests, turns } = await runWith([
      { status: 503 },
      { status: 429, headers: { "retry-after": "0" } },
      { content: "partial answer that never finishes", cutAfterChunks: 2 },
      { content: "x", errorChunk: { message: "upstream reset", type: "upstream" } },
      stop("recovered"),
    ]);
    expect(requests).toHaveLength(5);
    expect(summary).toMatchObject({ reason: "completed", llm_retries: 4, final_message: "recovered" });
    expect(turns.turns[0]!.retries).toBe(4);
    expect(turns.turns[0]!.llm_errors?.map((e) => e.split(":")[0])).toEqual([
      "llm_http_503",
      "llm_http_429",
      "llm_stream_truncated",
      "llm_stream_error",
    ]);
  });

  it("treats a stream without [DONE] as complete when it carried a finish_reason", async () => {
    const { summary, requests } = await runWith([{ content: "fine", noDone: true }]);
    expect(requests).toHaveLength(1);
    expect(summary).toMatchObject({ reason: "completed", final_message: "fine" });
  });

  it("ends cleanly on 402 (budget spent) without retrying", async () => {
    const { summary, requests, turns } = await runWith([
      { toolCalls: [{ name: "terminal", arguments: '{"command":"true"}' }] },
      { status: 402, errorBody: { error: { message: "episode cap reached", type: "cap" } } },
    ]);
    expect(requests).toHaveLength(2);
    expect(summary).toMatchObject({
      reason: "budget_exhausted",
      code: "llm_http_402",
      exit_code: AGENT_EXIT.budget_exhausted,
      turns: 1,
    });
    expect(summary.detail).toMatch(/HTTP 402 \(cap\): episode cap reached/);
    expect(turns.summary?.reason).toBe("budget_exhausted");
  });

  it("ends on a non-retryable 4xx at once, and after the retries on a persistent 5xx", async () => {
    const bad = await runWith([{ status: 400 }]);
    expect(bad.requests).toHaveLength(1);
    expect(bad.summary).toMatchObject({
      reason: "llm_error",
      code: "llm_http_400",
      exit_code: AGENT_EXIT.llm_error,
    });
    await model?.close();
    const down = await runWith(() => ({ status: 500 }), { llmRetries: 2 });
    expect(down.requests).toHaveLength(3);
    expect(down.summary).toMatchObject({ reason: "llm_error", code: "llm_http_500", llm_retries: 2 });
  });

  it("times out a silent model and reports an unreachable one", async () => {
    const slow = await runWith([{ hang: true }], { llmTimeoutMs: 300, llmRetries: 0 });
    expect(slow.summary).toMatchObject({ reason: "llm_error", code: "llm_timeout" });
    await model?.close();
    model = undefined;
    // A port that was just free and is closed again: connection refused.
    const port = await new Promise<number>((ok) => {
      const s = createServer().listen(0, "127.0.0.1", () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => ok(p));
      });
    });
    const cfg = config(`http://127.0.0.1:${port}/v1`, { llmRetries: 1 });
    const log = new SessionLog(cfg.turnsFile, cfg.transcriptFile);
    const summary = await new AgentSession(cfg, {
      log,
      commandEnv: process.env,
      signal: new AbortController().signal,
    }).run();
    log.close();
    expect(summary).toMatchObject({ reason: "llm_error", code: "llm_unreachable", llm_retries: 1 });
    expect(summary.detail).toMatch(/ECONNREFUSED/);
  });

  it("stops at max turns with exit code 0", async () => {
    const { summary, requests } = await runWith(
      () => ({ toolCalls: [{ name: "terminal", arguments: '{"command":"echo again"}' }] }),
      { maxTurns: 3 },
    );
    expect(requests).toHaveLength(3);
    expect(summary).toMatchObject({ reason: "max_turns", exit_code: 0, turns: 3, tool_call_count: 3 });
  });

  it("interrupt() writes the turn in flight as partial and the summary, exactly once", async () => {
    model = await startScriptedModel([
      { toolCalls: [{ id: "long", name: "terminal", arguments: '{"command":"sleep 30"}' }] },
    ]);
    const cfg = config(model.url);
    const log = new SessionLog(cfg.turnsFile, cfg.transcriptFile);
    const session = new AgentSession(cfg, {
      log,
      commandEnv: commandEnv({ ...process.env, HOME: root }),
      signal: new AbortController().signal,
    });
    const running = session.run();
    // Wait until the tool is running (the model has answered).
    for (let i = 0; i < 100 && model.requests.length === 0; i++)
      await new Promise((ok) => setTimeout(ok, 20));
    await new Promise((ok) => setTimeout(ok, 300));
    const summary = session.interrupt("SIGTERM");
    killAllCommandGroups("SIGKILL");
    expect(await running).toBe(summary);
    expect(session.interrupt("SIGINT")).toBe(summary);
    log.close();
    expect(summary).toMatchObject({
      reason: "signal",
      code: "SIGTERM",
      exit_code: AGENT_EXIT.SIGTERM,
      turns: 1,
    });
    const turns = parseTurnsJsonl(readFileSync(cfg.turnsFile, "utf8"));
    expect(turns.turns).toHaveLength(1);
    expect(turns.turns[0]).toMatchObject({ partial: true, tool_call_count: 1 });
    expect(turns.turns[0]!.messages.map((m) => m.role)).toEqual(["assistant"]);
    expect(turns.summary).toEqual(summary);
  });
});
