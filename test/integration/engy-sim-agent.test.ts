/**
 * A scripted agent drives the simulator through whole sessions, executing its tool calls for real
 * (bash, files) in a temp dir laid out like the scenario container (/app, /workspace, /tmp mapped
 * into it), then grades the deliverable with hidden checks the simulator never sees.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import OpenAI from "openai";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EngySim, SIM_MODELS, startEngySim } from "../../src/engy-sim/index.js";

const FIXTURES = new URL("../fixtures/sim-scenarios", import.meta.url).pathname;
const ROOT = new URL("../..", import.meta.url).pathname;
const WEAKEST = SIM_MODELS[0]!;
const SEEDS = Array.from({ length: 12 }, (_, i) => 100 + i);
const exec = promisify(execFile);

/** bash -c, never throwing: status and output, like the agent's terminal tool. */
async function bash(
  script: string,
  cwd: string,
  args: string[] = [],
): Promise<{ status: number; stdout: string; stderr: string }> {
  try {
    const r = await exec("bash", ["-c", script, "bash", ...args], { cwd, encoding: "utf8", timeout: 20_000 });
    return { status: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return {
      status: typeof err.code === "number" ? err.code : 1,
      stdout: err.stdout ?? "",
      stderr: err.stderr ?? "",
    };
  }
}

const fn = (name: string, properties: Record<string, unknown>, required: string[]): ChatCompletionTool => ({
  type: "function",
  function: { name, description: name, parameters: { type: "object", properties, required } },
});
const S = { type: "string" };
const TOOLS = [
  fn("terminal", { command: S, timeout: { type: "number" } }, ["command"]),
  fn("read_file", { path: S }, ["path"]),
  fn("write_file", { path: S, content: S }, ["path", "content"]),
  fn("patch", { path: S, old: S, new: S }, ["path", "old", "new"]),
  fn("search_files", { pattern: S, path: S }, ["pattern"]),
];

interface RunResult {
  score: number;
  turns: number;
  usd: number;
  finish: string | null;
  lastMessage: OpenAI.ChatCompletionMessage | undefined;
  toolErrors: number;
}

const prices: Record<string, { prompt: number; completion: number; cache_read: number }> = existsSync(
  join(ROOT, "price-table.json"),
)
  ? JSON.parse(readFileSync(join(ROOT, "price-table.json"), "utf8")).models
  : Object.fromEntries(SIM_MODELS.map((m, i) => [m, { prompt: i + 1, completion: i + 1, cache_read: 0.1 }]));

function usdOf(model: string, u: OpenAI.CompletionUsage | undefined): number {
  if (!u) return 0;
  const p = prices[model]!;
  const cached = u.prompt_tokens_details?.cached_tokens ?? 0;
  return (
    ((u.prompt_tokens - cached) * p.prompt + cached * p.cache_read + u.completion_tokens * p.completion) / 1e6
  );
}

function layout(): string {
  const root = mkdtempSync(join(tmpdir(), "engy-sim-agent-"));
  for (const d of ["app", "workspace", "tmp"]) mkdirSync(join(root, d));
  writeFileSync(join(root, "app/numbers.txt"), "4\n-2\n\n17\n");
  writeFileSync(
    join(root, "workspace/SKILL.md"),
    "# Skill\nRead the task, solve it with a script, verify.\n",
  );
  writeFileSync(
    join(root, "workspace/INSTRUCTION.md"),
    readFileSync(join(FIXTURES, "sum-stats/instruction.md")),
  );
  return root;
}

/** The container's absolute paths, mapped into the temp root. */
const mapPaths = (root: string, text: string) =>
  text.replace(
    /(^|[^\w./-])\/(app|workspace|tmp)(?=$|[/\s'";&|)])/g,
    (_m, pre: string, dir: string) => `${pre}${root}/${dir}`,
  );

async function runTool(
  root: string,
  name: string,
  argsText: string,
): Promise<{ out: string; error: boolean }> {
  let args: Record<string, string>;
  try {
    args = JSON.parse(argsText);
  } catch {
    try {
      args = JSON.parse(`${argsText}}`); // the one repair a Hermes-style agent makes: a missing brace
    } catch {
      return { out: "error: tool arguments are not valid JSON", error: true };
    }
  }
  if (name === "read_file") {
    try {
      return { out: readFileSync(mapPaths(root, args.path ?? ""), "utf8"), error: false };
    } catch (e) {
      return { out: `error: ${(e as Error).message}`, error: true };
    }
  }
  if (name === "terminal") {
    const r = await bash(mapPaths(root, args.command ?? ""), join(root, "app"));
    return { out: `exit code: ${r.status}\n${r.stdout}${r.stderr}`.slice(0, 4000), error: r.status !== 0 };
  }
  return { out: `error: tool ${name} is not available in this test`, error: true };
}

/** Hidden checks: inputs the simulator never saw (the fixture's partial fails 2 of 3). */
async function grade(root: string): Promise<number> {
  const script = join(root, "app/stats.sh");
  if (!existsSync(script)) return 0;
  writeFileSync(join(root, "hidden-a.txt"), "10\n-3\n\n25\n");
  writeFileSync(join(root, "hidden-b.txt"), "5\n12\n100\n");
  // One shell for both runs (spawns are slow on a loaded machine); a separator between outputs.
  const r = await bash('bash "$1" "$2"; echo "--8<--"; bash "$1" "$3"', root, [
    script,
    "hidden-a.txt",
    "hidden-b.txt",
  ]);
  const [outA = "", outB = ""] = r.stdout.split("--8<--\n");
  const a = outA.split("\n");
  const b = outB.split("\n");
  const tests = [a[0] === "sum=32", b[1] === "min=5", b[2] === "max=100"];
  return tests.filter(Boolean).length / tests.length;
}

type Policy =
  | { kind: "pin"; model: string }
  | { kind: "escalate"; cheap: string; strong: string }
  | { kind: "advisers"; writer: string; adviser: string };

async function runSession(client: OpenAI, policy: Policy, stream: boolean): Promise<RunResult> {
  const root = layout();
  try {
    const messages: ChatCompletionMessageParam[] = [
      { role: "system", content: "You are a terminal agent. Work in /app. Use the tools." },
      {
        role: "user",
        content: "Read /workspace/SKILL.md and /workspace/INSTRUCTION.md, then complete the task.",
      },
    ];
    let usd = 0;
    let toolErrors = 0;
    let escalated = false;
    let finish: string | null = null;
    let last: OpenAI.ChatCompletionMessage | undefined;
    let turns = 0;
    for (; turns < 30; turns++) {
      const model =
        policy.kind === "pin"
          ? policy.model
          : policy.kind === "escalate"
            ? escalated
              ? policy.strong
              : policy.cheap
            : policy.writer;
      let view = messages;
      if (policy.kind === "advisers" && messages.some((m) => m.role === "tool")) {
        // Advisers see the conversation without tools and write a note the writer gets appended.
        const note = await client.chat.completions.create({
          model: policy.adviser,
          messages,
          max_tokens: 200,
        });
        usd += usdOf(policy.adviser, note.usage);
        view = [
          ...messages,
          { role: "user", content: `Notes from an adviser:\n${note.choices[0]!.message.content}` },
        ];
      }
      let message: OpenAI.ChatCompletionMessage;
      if (stream) {
        const s = client.chat.completions.stream({
          model,
          messages: view,
          tools: TOOLS,
          stream_options: { include_usage: true },
        });
        const done = await s.finalChatCompletion();
        message = done.choices[0]!.message;
        finish = done.choices[0]!.finish_reason;
        usd += usdOf(model, done.usage);
      } else {
        const r = await client.chat.completions.create({ model, messages: view, tools: TOOLS });
        message = r.choices[0]!.message;
        finish = r.choices[0]!.finish_reason;
        usd += usdOf(model, r.usage);
      }
      last = message;
      const calls = (message.tool_calls ?? []).filter((c) => c.type === "function");
      messages.push({
        role: "assistant",
        content: message.content,
        ...(calls.length ? { tool_calls: calls } : {}),
      });
      if (calls.length === 0) break;
      for (const c of calls) {
        const r = await runTool(root, c.function.name, c.function.arguments);
        if (r.error) {
          toolErrors++;
          escalated = true; // the "toolerr" signal
        }
        messages.push({ role: "tool", tool_call_id: c.id, content: r.out });
      }
    }
    return { score: await grade(root), turns, usd, finish, lastMessage: last, toolErrors };
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

describe("engy-sim plays an agent's model through whole sessions", { timeout: 180_000 }, () => {
  const sims = new Map<number, EngySim>();
  const clients = new Map<number, OpenAI>();
  beforeAll(async () => {
    for (const seed of SEEDS) {
      const sim = await startEngySim({ port: 0, seed, scenariosDir: FIXTURES });
      sims.set(seed, sim);
      clients.set(seed, new OpenAI({ baseURL: sim.url, apiKey: "k", maxRetries: 0 }));
    }
  });
  afterAll(async () => {
    await Promise.all([...sims.values()].map((s) => s.close()));
  });

  const across = async (policy: Policy, stream = false) => {
    // Seeds in parallel: each has its own simulator, and most of the time goes to bash spawns.
    return Promise.all(SEEDS.map((seed) => runSession(clients.get(seed)!, policy, stream)));
  };
  const solved = (rs: RunResult[]) => rs.filter((r) => r.score === 1).length;
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

  let strong: RunResult[];
  let weak: RunResult[];

  it("kimi-k3 reaches the reference deliverable on most seeds, and every session ends with a plain stop", async () => {
    strong = await across({ kind: "pin", model: "kimi-k3" }, true);
    expect(solved(strong)).toBeGreaterThanOrEqual(Math.ceil(SEEDS.length * 0.8));
    for (const r of strong) {
      expect(r.finish).toBe("stop");
      expect(r.lastMessage?.tool_calls ?? []).toEqual([]);
      expect(r.turns).toBeLessThan(12);
    }
  });

  it("the cheapest model fails more often, costs less; seed by seed it never beats kimi-k3", async () => {
    weak = await across({ kind: "pin", model: WEAKEST });
    expect(solved(weak)).toBeLessThan(solved(strong));
    expect(solved(strong) - solved(weak)).toBeGreaterThanOrEqual(3);
    for (const [i, r] of weak.entries()) expect(strong[i]!.score).toBeGreaterThanOrEqual(r.score);
    expect(mean(weak.map((r) => r.usd))).toBeLessThan(mean(strong.map((r) => r.usd)));
    // Visible failures happen: what an escalating policy watches for.
    expect(weak.some((r) => r.toolErrors > 0)).toBe(true);
  });

  it("a strong adviser's hints raise the weak writer's success rate; escalation on tool errors helps too", async () => {
    const advised = await across({ kind: "advisers", writer: WEAKEST, adviser: "kimi-k3" });
    expect(solved(advised)).toBeGreaterThan(solved(weak));
    for (const [i, r] of advised.entries()) expect(r.score).toBeGreaterThanOrEqual(weak[i]!.score);
    const escalate = await across({ kind: "escalate", cheap: WEAKEST, strong: "kimi-k3" });
    expect(solved(escalate)).toBeGreaterThan(solved(weak));
    for (const [i, r] of escalate.entries()) expect(r.score).toBeGreaterThanOrEqual(weak[i]!.score);
  });
});
