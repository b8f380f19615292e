/**
 * `--self-test`: proves, offline and in a temp dir, that every tool works on this machine's
 * bash/grep/node and that the loop speaks streamed chat completions (against a scripted model on
 * 127.0.0.1, which exists even with --network none). One line of report; exit 0 or 1.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { AGENT_VERSION, parseTurnsJsonl } from "../contract.js";
import type { AgentConfig } from "./env.js";
import { commandEnv } from "./env.js";
import { AgentSession } from "./loop.js";
import { executeToolCall, type ToolContext, type ToolOutcome } from "./tools.js";
import { SessionLog } from "./turns.js";

/** What a check works with: its temp dir and a tool call in it (arguments as JSON or raw text). */
interface Probe {
  dir: string;
  call: (name: string, args: unknown) => Promise<ToolOutcome>;
}

type Check = [name: string, fn: (probe: Probe) => Promise<void>];

function assert(cond: unknown, message: string): asserts cond {
  if (!cond) throw new Error(message);
}

/** The checks, in the order they run and are reported. */
const CHECKS: Check[] = [
  ["write_file", checkWriteFile],
  ["read_file", checkReadFile],
  ["patch", checkPatch],
  ["search_files", checkSearchFiles],
  ["terminal", checkTerminal],
  ["terminal_timeout", checkTerminalTimeout],
  ["output_cap", checkOutputCap],
  ["argument_repair", checkArgumentRepair],
  ["loop", ({ dir }) => loopCheck(dir)],
];

export async function runSelfTest(): Promise<{ ok: boolean; line: string }> {
  const t0 = performance.now();
  const dir = mkdtempSync(join(tmpdir(), "trajrl-agent-selftest-"));
  const failures = await runChecks(toolProbe(dir));
  try {
    rmSync(dir, { recursive: true, force: true });
  } catch {
    // A leftover temp dir is harmless.
  }
  return report(failures, performance.now() - t0);
}

function toolProbe(dir: string): Probe {
  const ctx: ToolContext = {
    workdir: dir,
    toolTimeoutS: 20,
    outputCap: 1024,
    // A temp HOME: the checks are about the tools, not about the user's login dotfiles.
    env: commandEnv({ ...process.env, HOME: dir }),
    killGraceMs: 200,
  };
  return {
    dir,
    call: (name, args) => executeToolCall(name, typeof args === "string" ? args : JSON.stringify(args), ctx),
  };
}

/** Every check runs; each failure is its name and the first line of its message. */
async function runChecks(probe: Probe): Promise<string[]> {
  const failures: string[] = [];
  for (const [name, fn] of CHECKS) {
    try {
      await fn(probe);
    } catch (e) {
      failures.push(`${name}: ${(e as Error).message.split("\n")[0]}`);
    }
  }
  return failures;
}

/** The one line of report. */
function report(failures: string[], elapsedMs: number): { ok: boolean; line: string } {
  const secs = (elapsedMs / 1000).toFixed(1);
  const passed = CHECKS.length - failures.length;
  const head = `trajrl-agent ${AGENT_VERSION} self-test`;
  const env = `node ${process.version}, uid ${process.getuid?.() ?? "?"}`;
  if (failures.length === 0)
    return {
      ok: true,
      line: `${head} ok: ${passed}/${CHECKS.length} checks (${CHECKS.map((c) => c[0]).join(", ")}) in ${secs} s on ${env}`,
    };
  return {
    ok: false,
    line: `${head} FAILED: ${passed}/${CHECKS.length} passed in ${secs} s on ${env}; ${failures.join("; ")}`,
  };
}

async function checkWriteFile({ dir, call }: Probe): Promise<void> {
  const r = await call("write_file", { path: "sub/dir/a.txt", content: "alpha\nbeta $1 gamma\n" });
  assert(r.record.ok, r.content);
  assert(readFileSync(join(dir, "sub/dir/a.txt"), "utf8") === "alpha\nbeta $1 gamma\n", "content differs");
}

async function checkReadFile({ dir, call }: Probe): Promise<void> {
  const r = await call("read_file", { path: join(dir, "sub/dir/a.txt") });
  assert(r.record.ok && r.content === "alpha\nbeta $1 gamma\n", `read back ${JSON.stringify(r.content)}`);
  const missing = await call("read_file", { path: "nope.txt" });
  assert(
    !missing.record.ok && missing.content.startsWith("error:"),
    "a missing file must be an error result",
  );
}

async function checkPatch({ dir, call }: Probe): Promise<void> {
  const r = await call("patch", { path: "sub/dir/a.txt", old: "beta $1", new: "BETA $&" });
  assert(r.record.ok, r.content);
  assert(
    readFileSync(join(dir, "sub/dir/a.txt"), "utf8") === "alpha\nBETA $& gamma\n",
    "patch result differs",
  );
  writeFileSync(join(dir, "dup.txt"), "x\nx\n");
  const dup = await call("patch", { path: "dup.txt", old: "x", new: "y" });
  assert(dup.record.error_code === "not_unique", `expected not_unique, got ${dup.content}`);
}

async function checkSearchFiles({ call }: Probe): Promise<void> {
  const r = await call("search_files", { pattern: "BE[T]A", path: "sub" });
  assert(r.record.ok && /a\.txt:2:BETA/.test(r.content), `unexpected search result ${r.content}`);
  const none = await call("search_files", { pattern: "zzz_not_there" });
  assert(none.record.ok && none.content.startsWith("no matches"), none.content);
}

async function checkTerminal({ dir, call }: Probe): Promise<void> {
  const r = await call("terminal", { command: "echo out; echo err >&2; pwd; exit 3" });
  assert(r.content.includes("out") && r.content.includes("err"), `output missing: ${r.content}`);
  assert(r.content.includes(dir) && r.record.exit_code === 3, `cwd or exit code wrong: ${r.content}`);
}

/** A timed-out command's whole process group dies, a background child included. */
async function checkTerminalTimeout({ dir, call }: Probe): Promise<void> {
  const pidFile = join(dir, "bg.pid");
  const r = await call("terminal", { command: `sleep 30 & echo $! > ${pidFile}; sleep 30`, timeout: 1 });
  assert(r.record.timed_out === true, `expected a timeout: ${r.content}`);
  const pid = Number(readFileSync(pidFile, "utf8").trim());
  await new Promise((res) => setTimeout(res, 100));
  assert(!isAlive(pid), `background process ${pid} survived the timeout`);
}

async function checkOutputCap({ call }: Probe): Promise<void> {
  const r = await call("terminal", { command: "yes 0123456789 | head -n 20000" });
  assert(r.content.includes("bytes omitted") && r.record.truncated_bytes, "output was not capped");
  assert(r.content.length < 2000, `capped output too long: ${r.content.length}`);
}

async function checkArgumentRepair({ dir, call }: Probe): Promise<void> {
  const r = await call("read_file", `{'path': '${join(dir, "sub/dir/a.txt")}'`);
  assert(r.record.ok && r.record.repaired, `repair failed: ${r.content}`);
  const bad = await call("terminal", '{"command": "echo unterminated');
  assert(bad.record.error_code === "bad_json", `expected bad_json: ${bad.content}`);
}

/**
 * Whether a process still runs. A killed orphan stays a zombie until PID 1 reaps it (and not
 * every PID 1 does), so a zombie counts as dead.
 */
function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }
}

/** Two scripted turns over real HTTP + SSE: a tool call split into fragments, then a stop. */
async function loopCheck(dir: string): Promise<void> {
  const model = scriptedModel();
  await new Promise<void>((res) => model.server.listen(0, "127.0.0.1", res));
  try {
    const port = (model.server.address() as AddressInfo).port;
    const workdir = join(dir, "loop-app");
    const workspace = join(dir, "loop-ws");
    const cfg: AgentConfig = {
      baseUrl: `http://127.0.0.1:${port}/v1`,
      model: "selftest",
      apiKey: undefined,
      maxTurns: 4,
      workdir,
      workspace,
      turnsFile: join(workspace, "turns.jsonl"),
      transcriptFile: join(workspace, "transcript.txt"),
      toolTimeoutS: 10,
      outputCap: 4096,
      llmTimeoutMs: 10_000,
      llmRetries: 0,
      retryBaseMs: 0,
    };
    mkdirSync(workdir, { recursive: true });
    const log = new SessionLog(cfg.turnsFile, cfg.transcriptFile);
    const ac = new AbortController();
    const summary = await new AgentSession(cfg, {
      log,
      commandEnv: commandEnv({ ...process.env, HOME: dir }),
      signal: ac.signal,
    }).run();
    log.close();
    assert(summary.reason === "completed", `session ended with ${summary.reason}: ${summary.detail ?? ""}`);
    assert(model.requests() === 2, `expected 2 model requests, saw ${model.requests()}`);
    assert(existsSync(join(workdir, "out.txt")), "the tool call did not run");
    const parsed = parseTurnsJsonl(readFileSync(cfg.turnsFile, "utf8"));
    assert(parsed.session && parsed.turns.length === 2 && parsed.summary, "turns.jsonl incomplete");
  } finally {
    // fetch keeps its connection alive; close it or server.close() waits for the idle timeout.
    model.server.closeAllConnections();
    await new Promise<void>((res) => model.server.close(() => res()));
  }
}

/** The model of the loop check: a terminal call in two fragments first, then "done". */
function scriptedModel(): { server: Server; requests: () => number } {
  let requests = 0;
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (d) => {
      body += d;
    });
    req.on("end", () => {
      requests++;
      const parsed = JSON.parse(body) as { messages: unknown[]; stream: boolean };
      const chunks = parsed.messages.length === 2 ? TOOL_CALL_CHUNKS : STOP_CHUNKS;
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(`: keep-alive\n\n${sse(chunks)}`);
    });
  });
  return { server, requests: () => requests };
}

const sse = (chunks: object[]) =>
  `${chunks.map((c) => `data: ${JSON.stringify(c)}\r\n\r\n`).join("")}data: [DONE]\n\n`;

const chunk = (delta: object, finish: string | null = null) => ({
  id: "chatcmpl-selftest",
  object: "chat.completion.chunk",
  model: "selftest",
  choices: [{ index: 0, delta, finish_reason: finish }],
});

const TOOL_CALL_CHUNKS = [
  chunk({ role: "assistant", content: "" }),
  chunk({
    tool_calls: [
      {
        index: 0,
        id: "call_1",
        type: "function",
        function: { name: "terminal", arguments: '{"comm' },
      },
    ],
  }),
  chunk({
    tool_calls: [{ index: 0, function: { arguments: 'and": "echo selftest > out.txt"}' } }],
  }),
  chunk({}, "tool_calls"),
];

const STOP_CHUNKS = [chunk({ role: "assistant", content: "done" }), chunk({}, "stop")];
