/**
 * The built bundle (agent/dist/agent.js) as a real process against a scripted model on loopback:
 * exit codes, turns.jsonl written as it goes, SIGTERM mid-tool (summary + partial turn, process
 * group killed), SIGKILL (finished turns survive). The Node-18 run inside the base image is the
 * sandbox's image test (`--self-test`); here the host's node runs the same file.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { AGENT_EXIT, parseTurnsJsonl } from "../../agent/contract.js";
import { type Script, type ScriptedModel, startScriptedModel } from "../helpers/scripted-model.js";
import { poller } from "../helpers/wait.js";

const until = poller({ ms: 10_000, everyMs: 25 });

const ROOT = resolve(import.meta.dirname, "../..");
const BUNDLE = join(ROOT, "agent/dist/agent.js");

let root: string;
let model: ScriptedModel | undefined;
const children: ChildProcess[] = [];

beforeAll(() => {
  // Whatever runs the bundle builds it first; a failed build fails here with esbuild's message.
  execFileSync(process.execPath, [join(ROOT, "scripts/build-agent.mjs"), "--if-stale", "--quiet"], {
    stdio: "inherit",
  });
  expect(existsSync(BUNDLE)).toBe(true);
});
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "agent-proc-"));
  mkdirSync(join(root, "app"));
  mkdirSync(join(root, "ws"));
});
afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  await model?.close();
  model = undefined;
  rmSync(root, { recursive: true, force: true });
});

interface Run {
  child: ChildProcess;
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>;
}

function runAgent(args: string[], env: Record<string, string> = {}): Run {
  const child = spawn(process.execPath, [BUNDLE, ...args], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: root,
      AGENT_WORKDIR: join(root, "app"),
      AGENT_WORKSPACE: join(root, "ws"),
      AGENT_RETRY_BASE_MS: "1",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (d) => {
    stdout += d;
  });
  child.stderr?.on("data", (d) => {
    stderr += d;
  });
  const done = new Promise<{
    code: number | null;
    signal: NodeJS.Signals | null;
    stdout: string;
    stderr: string;
  }>((ok) => child.on("close", (code, signal) => ok({ code, signal, stdout, stderr })));
  return { child, done };
}

async function withModel(script: Script): Promise<string> {
  model = await startScriptedModel(script);
  return model.url;
}

const turnsOf = () => parseTurnsJsonl(readFileSync(join(root, "ws/turns.jsonl"), "utf8"));

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !["Z", "X"].includes(stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3));
  } catch {
    return false;
  }
}

describe("agent bundle as a process", () => {
  it("--version and bad arguments", async () => {
    const v = await runAgent(["--version"]).done;
    expect(v.code).toBe(0);
    expect(v.stdout).toMatch(/^trajrl-agent \d+\.\d+\.\d+ \(node v\d+/);
    const bad = await runAgent(["--frobnicate"]).done;
    expect(bad.code).toBe(AGENT_EXIT.config_error);
    expect(bad.stderr).toMatch(/unknown argument/);
  });

  it("is one dependency-free CommonJS file for node 18", () => {
    const text = readFileSync(BUNDLE, "utf8");
    expect(text.startsWith("#!/usr/bin/env node\n")).toBe(true);
    const requires = [...text.matchAll(/require\("([^"]+)"\)/g)].map((m) => m[1]);
    expect(requires.length).toBeGreaterThan(0);
    expect(requires.every((r) => r?.startsWith("node:"))).toBe(true);
    expect(text).not.toMatch(/\bimport\.meta\b/);
  });

  it("runs a session to completion, exit 0, turns.jsonl and transcript written", async () => {
    const url = await withModel([
      {
        toolCalls: [
          { name: "write_file", arguments: '{"path": "solve.sh", "content": "echo solved > result.txt\\n"}' },
          { name: "terminal", arguments: '{"command": "bash solve.sh && cat result.txt"}' },
        ],
      },
      { content: "Solved." },
    ]);
    const r = await runAgent([], { LLM_BASE_URL: url, LLM_MODEL: "kimi-k3" }).done;
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout.trim().split("\n").at(-1) ?? "{}")).toMatchObject({
      reason: "completed",
      turns: 2,
    });
    expect(readFileSync(join(root, "app/result.txt"), "utf8")).toBe("solved\n");
    const t = turnsOf();
    expect(t.session?.model).toBe("kimi-k3");
    expect(t.turns).toHaveLength(2);
    expect(t.summary).toMatchObject({ reason: "completed", exit_code: 0, tool_call_count: 2 });
    expect(model?.requests[0]?.body.model).toBe("kimi-k3");
    expect(readFileSync(join(root, "ws/transcript.txt"), "utf8")).toMatch(/solved/);
  });

  it("SIGTERM mid-tool: kills the tool's process group, writes the partial turn and the summary, exits 143", async () => {
    const pidFile = join(root, "bg.pid");
    const url = await withModel([
      {
        toolCalls: [
          {
            name: "terminal",
            arguments: JSON.stringify({ command: `sleep 60 & echo $! > ${pidFile}; sleep 60` }),
          },
        ],
      },
    ]);
    const run = runAgent([], { LLM_BASE_URL: url });
    await until(() => existsSync(pidFile) && readFileSync(pidFile, "utf8").trim() !== "");
    const bg = Number(readFileSync(pidFile, "utf8"));
    const t0 = performance.now();
    run.child.kill("SIGTERM");
    const r = await run.done;
    expect(performance.now() - t0).toBeLessThan(5000);
    expect(r.code).toBe(AGENT_EXIT.SIGTERM);
    const t = turnsOf();
    expect(t.turns).toHaveLength(1);
    expect(t.turns[0]).toMatchObject({ partial: true, tool_call_count: 1 });
    expect(t.summary).toMatchObject({ reason: "signal", code: "SIGTERM", exit_code: 143, turns: 1 });
    await new Promise((ok) => setTimeout(ok, 200));
    expect(alive(bg)).toBe(false);
  });

  it("SIGKILL loses at most the turn in flight: finished turns are on disk", async () => {
    const pgFile = join(root, "pg.pid");
    const url = await withModel([
      { toolCalls: [{ name: "terminal", arguments: '{"command": "echo first"}' }] },
      {
        toolCalls: [
          { name: "terminal", arguments: JSON.stringify({ command: `echo $$ > ${pgFile}; sleep 60` }) },
        ],
      },
    ]);
    const run = runAgent([], { LLM_BASE_URL: url });
    await until(() => existsSync(pgFile) && readFileSync(pgFile, "utf8").trim() !== "");
    run.child.kill("SIGKILL");
    const r = await run.done;
    // Nobody is left to kill the tool's group after a SIGKILL: this test does (bash's pid is the pgid).
    try {
      process.kill(-Number(readFileSync(pgFile, "utf8")), "SIGKILL");
    } catch {
      // Already gone.
    }
    expect(r.signal).toBe("SIGKILL");
    const t = turnsOf();
    expect(t.invalidLines).toBe(0);
    expect(t.session).toBeDefined();
    expect(t.turns.map((x) => x.turn)).toEqual([1]);
    expect(t.summary).toBeUndefined();
  });

  it("a spent budget (402) ends with exit 3 and the reason recorded", async () => {
    const url = await withModel([{ status: 402, errorBody: { error: { message: "cap", type: "cap" } } }]);
    const r = await runAgent([], { LLM_BASE_URL: url }).done;
    expect(r.code).toBe(AGENT_EXIT.budget_exhausted);
    expect(turnsOf().summary).toMatchObject({ reason: "budget_exhausted", code: "llm_http_402" });
  });

  it("a bad environment exits 2 and still leaves the reason in turns.jsonl", async () => {
    const r = await runAgent([], { LLM_BASE_URL: "not a url", AGENT_MAX_TURNS: "-1" }).done;
    expect(r.code).toBe(AGENT_EXIT.config_error);
    expect(r.stderr).toMatch(/LLM_BASE_URL.*AGENT_MAX_TURNS/);
    expect(turnsOf().summary).toMatchObject({ reason: "config_error", exit_code: 2 });
  });

  it("--self-test passes on this machine", async () => {
    const r = await runAgent(["--self-test"]).done;
    expect(r.stdout).toMatch(/self-test ok: 9\/9 checks/);
    expect(r.code).toBe(0);
  });
});
