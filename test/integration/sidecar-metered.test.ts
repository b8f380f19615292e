/**
 * Our example policies, the public SDK example, and upstream's four published examples (byte for byte,
 * test/fixtures/upstream-policies), unchanged, on the SDK file → the real meter → the Engy simulator.
 * What each routes where is read from the meter's own accounting (by_model per episode token) and
 * from the policy log.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import OpenAI from "openai";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Listener, Meter } from "../../src/meter/index.js";
import { type PolicyServer, type PolicyTurn, startPolicyServer } from "../../src/policy/index.js";
import { type MeterRig, startMeterRig } from "../helpers/episode.js";

const example = (name: string) =>
  fileURLToPath(new URL(`../../examples/policies/${name}/policy`, import.meta.url));
const upstreamExample = (name: string) =>
  fileURLToPath(new URL(`../fixtures/upstream-policies/${name}`, import.meta.url));

const TOOLS = [
  {
    type: "function" as const,
    function: {
      name: "terminal",
      description: "run a shell command",
      parameters: {
        type: "object",
        properties: { command: { type: "string" }, timeout: { type: "number" } },
        required: ["command"],
      },
    },
  },
  {
    type: "function" as const,
    function: {
      name: "read_file",
      description: "read a file",
      parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
    },
  },
];

type Msg = Record<string, unknown>;
const SYSTEM: Msg = { role: "system", content: "You are Hermes, an agent working in a Linux container." };
const TASK: Msg = {
  role: "user",
  content: "Read /workspace/SKILL.md and /workspace/INSTRUCTION.md, then do the task.",
};

/** One agent turn after the model asked for tools: the assistant message and its tool results. */
function toolTurn(id: string, command: string, result: Record<string, unknown>): Msg[] {
  return [
    {
      role: "assistant",
      content: null,
      tool_calls: [
        { id, type: "function", function: { name: "terminal", arguments: JSON.stringify({ command }) } },
      ],
    },
    { role: "tool", tool_call_id: id, content: JSON.stringify(result) },
  ];
}
const OK = (out: string) => ({ output: out, exit_code: 0, error: null });
const FAIL = { output: "bash: ./configure: No such file or directory", exit_code: 127, error: null };

let rig: MeterRig;
let meter: Meter;
let listener: Listener;
let meterUrl: string;
let episode = 0;
const servers: PolicyServer[] = [];

interface Episode {
  token: string;
  server: PolicyServer;
  client: OpenAI;
}

async function episodeWith(policyDir: string, capUsd = 0.3): Promise<Episode> {
  episode += 1;
  const token = meter.mint(`sidecar-test-${episode}`, capUsd);
  const server = await startPolicyServer({
    policyDir,
    upstreamUrl: meterUrl,
    token,
    defaultModel: "qwen3.8-27b",
  });
  servers.push(server);
  return {
    token,
    server,
    client: new OpenAI({ baseURL: server.url, apiKey: "agent-has-no-key", maxRetries: 0 }),
  };
}

const byModel = (token: string) =>
  Object.fromEntries(Object.entries(meter.summary(token).by_model).map(([m, u]) => [m, u.calls]));

async function turn(e: Episode, messages: Msg[], stream: boolean): Promise<{ model: string; message: Msg }> {
  if (!stream) {
    const r = await e.client.chat.completions.create({
      model: "auto",
      messages: messages as never,
      tools: TOOLS,
    });
    return { model: r.model, message: r.choices[0]!.message as unknown as Msg };
  }
  const s = await e.client.chat.completions.create({
    model: "auto",
    messages: messages as never,
    tools: TOOLS,
    stream: true,
  });
  let model = "";
  let content = "";
  const calls: Record<number, { id: string; name: string; args: string }> = {};
  for await (const chunk of s) {
    model = chunk.model || model;
    const d = chunk.choices[0]?.delta;
    content += d?.content ?? "";
    for (const tc of d?.tool_calls ?? []) {
      calls[tc.index] ??= { id: "", name: "", args: "" };
      const slot = calls[tc.index]!;
      slot.id += tc.id ?? "";
      slot.name += tc.function?.name ?? "";
      slot.args += tc.function?.arguments ?? "";
    }
  }
  return { model, message: { role: "assistant", content, calls: Object.values(calls) } };
}

async function lastTurn(s: PolicyServer, n: number): Promise<PolicyTurn> {
  for (let i = 0; i < 150; i++) {
    const t = s.turns();
    if (t.length >= n) return t[n - 1]!;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`no policy log line for turn ${n}`);
}

beforeAll(async () => {
  rig = await startMeterRig();
  meter = rig.meter;
  listener = await meter.listen("127.0.0.1", 0);
  meterUrl = `http://127.0.0.1:${listener.port}/v1`;
});

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

afterAll(async () => {
  await listener?.close();
  await rig?.close();
});

/** The conversation after the task and `n` failed tool calls (three in a row make `toolerr`). */
function failing(n: number): Msg[] {
  const out = [SYSTEM, TASK];
  for (let i = 0; i < n; i++) out.push(...toolTurn(`f${i}`, "./configure && make", FAIL));
  return out;
}

describe("sidecar through the real meter to the simulator", () => {
  it("runs the public SDK example unchanged: glm-5.3-flash, kimi-k3 while the last three tool results are errors", async () => {
    const e = await episodeWith(example("public_sdk_example"));
    const first = await turn(e, [SYSTEM, TASK], true);
    expect(first.model).toBe("glm-5.3-flash");
    expect((first.message.calls as { name: string }[]).length).toBeGreaterThan(0);
    expect((await turn(e, failing(2), true)).model).toBe("glm-5.3-flash");
    expect((await turn(e, failing(3), true)).model).toBe("kimi-k3");
    const recovered = [...failing(3), ...toolTurn("c2", "ls -la /app", OK("total 0"))];
    expect((await turn(e, recovered, false)).model).toBe("glm-5.3-flash");
    expect(byModel(e.token)).toEqual({ "glm-5.3-flash": 3, "kimi-k3": 1 });
    const log = await lastTurn(e.server, 3);
    expect(log.remaining_usd).toBeGreaterThan(0);
    expect(log.remaining_usd).toBeLessThan(0.3);
  });

  it("pin: every call, streamed or not, goes to the pinned model", async () => {
    const e = await episodeWith(example("pin"));
    const a = await turn(e, [SYSTEM, TASK], true);
    const b = await turn(e, [SYSTEM, TASK], false);
    expect([a.model, b.model]).toEqual(["glm-5.3-flash", "glm-5.3-flash"]);
    // The simulator plays the agent's model: its first move reads the two files.
    expect(b.message.tool_calls).toBeDefined();
    expect(byModel(e.token)).toEqual({ "glm-5.3-flash": 2 });
    const log = await lastTurn(e.server, 1);
    expect(log.usage?.prompt_tokens).toBeGreaterThan(0);
    expect(log.usage?.completion_tokens).toBeGreaterThan(0);
  });

  it("escalate: cheap until a listed signal, then strong for the rest of the session; other sessions start cheap", async () => {
    const e = await episodeWith(example("escalate"));
    const t2 = [SYSTEM, TASK, ...toolTurn("c1", "ls -la /app", OK("total 8"))];
    const models = [];
    for (const m of [[SYSTEM, TASK], t2, failing(2), failing(3)]) models.push((await turn(e, m, true)).model);
    expect(models).toEqual(["glm-5.3-flash", "glm-5.3-flash", "glm-5.3-flash", "kimi-k3"]);
    // Same session (same first five messages), the errors behind it: still strong.
    const later = [...failing(3), ...toolTurn("c3", "cat README", OK("hello"))];
    expect((await turn(e, later, false)).model).toBe("kimi-k3");
    const other = [SYSTEM, { role: "user", content: "A different task entirely." }];
    expect((await turn(e, other, false)).model).toBe("glm-5.3-flash");
    expect(byModel(e.token)).toEqual({ "glm-5.3-flash": 4, "kimi-k3": 2 });
  });

  it("advisers: the writer alone until tool results exist, then three notes in parallel before the writer", async () => {
    const e = await episodeWith(example("advisers"));
    const t1 = [SYSTEM, TASK];
    expect((await turn(e, t1, true)).model).toBe("kimi-k3");
    expect(byModel(e.token)).toEqual({ "kimi-k3": 1 });
    const t2 = [
      ...t1,
      ...toolTurn("c1", "cat /workspace/INSTRUCTION.md", OK("Write /app/out.txt containing 42.")),
    ];
    expect((await turn(e, t2, true)).model).toBe("kimi-k3");
    expect(byModel(e.token)).toEqual({
      "kimi-k3": 2,
      "deepseek-v4.1-flash": 1,
      "qwen3.8-27b": 1,
      "glm-5.3-flash": 1,
    });
    const notes = e.server.events().find((x) => x.event === "advisers");
    expect(notes).toMatchObject({ n: 3, status: [200, 200, 200] });
  });

  it("sdk_custom: cheap while orienting, then one adviser note and kimi-k3 for the work", async () => {
    const e = await episodeWith(example("sdk_custom"));
    const t1 = [SYSTEM, TASK];
    expect((await turn(e, t1, true)).model).toBe("glm-5.3-flash");
    const t2 = [
      ...t1,
      ...toolTurn("c1", "cat /workspace/INSTRUCTION.md", OK("Write /app/out.txt containing 42.")),
    ];
    expect((await turn(e, t2, true)).model).toBe("kimi-k3");
    const t3 = [...t2, ...toolTurn("c2", "ls /app", OK("out.txt"))];
    expect((await turn(e, t3, false)).model).toBe("kimi-k3");
    // The adviser is asked on the first working turn only (no trouble since); t3 is a new session
    // (five messages) but the note is kept per session: asked again there.
    expect(byModel(e.token)).toEqual({ "glm-5.3-flash": 3, "kimi-k3": 2 });
  });

  it("passes the meter's refusals through: 402 at the cap, 400 off the allowlist", async () => {
    const broke = await episodeWith(example("pin"), 0.000001);
    await expect(turn(broke, [SYSTEM, TASK], true)).rejects.toMatchObject({ status: 402 });
    await expect(turn(broke, [SYSTEM, TASK], false)).rejects.toMatchObject({ status: 402 });
    const log = await lastTurn(broke.server, 2);
    expect(log).toMatchObject({ status: 402, model: "glm-5.3-flash" });
    expect(meter.summary(broke.token).refused_cap).toBe(2);

    const dir = await mkdtemp(join(tmpdir(), "trajrl-policy-"));
    try {
      await writeFile(join(dir, "policy.json"), JSON.stringify({ kind: "pin", model: "gpt-4o" }));
      const off = await episodeWith(dir);
      const err = await turn(off, [SYSTEM, TASK], false).catch((x: unknown) => x);
      expect(err).toMatchObject({ status: 400, error: { type: "allowlist" } });
      expect(meter.summary(off.token).refused_model).toBe(1);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("upstream's published example policies, unchanged, on our SDK", () => {
  it("pin", async () => {
    const e = await episodeWith(upstreamExample("pin"));
    expect((await turn(e, [SYSTEM, TASK], true)).model).toBe("glm-5.3-flash");
    expect((await turn(e, failing(3), false)).model).toBe("glm-5.3-flash");
    expect(byModel(e.token)).toEqual({ "glm-5.3-flash": 2 });
  });

  it("escalate: glm-5.3-flash, kimi-k3 for good once three tool results in a row failed", async () => {
    const e = await episodeWith(upstreamExample("escalate"));
    const models = [];
    for (const n of [0, 1, 2, 3]) models.push((await turn(e, failing(n), n % 2 === 0)).model);
    expect(models).toEqual(["glm-5.3-flash", "glm-5.3-flash", "glm-5.3-flash", "kimi-k3"]);
    expect((await turn(e, [...failing(3), ...toolTurn("ok", "ls", OK("a"))], true)).model).toBe("kimi-k3");
  });

  it("advisers: kimi-k3 writes; three notes once tool results exist", async () => {
    const e = await episodeWith(upstreamExample("advisers"));
    expect((await turn(e, [SYSTEM, TASK], true)).model).toBe("kimi-k3");
    expect((await turn(e, failing(1), false)).model).toBe("kimi-k3");
    expect(byModel(e.token)).toEqual({
      "kimi-k3": 2,
      "deepseek-v4.1-flash": 1,
      "qwen3.8-27b": 1,
      "glm-5.3-flash": 1,
    });
    const sent = e.server.events().find((x) => x.event === "advisers");
    expect(sent).toMatchObject({ n: 3 });
  });

  it("sdk_custom: cheap, then kimi-k3 with a deepseek note on every turn once a signal fired", async () => {
    const e = await episodeWith(upstreamExample("sdk_custom"));
    expect((await e.client.models.list()).data[0]).toMatchObject({
      id: "auto",
      policy: "example:cheap-then-strong+adviser",
    });
    expect((await turn(e, [SYSTEM, TASK], true)).model).toBe("glm-5.3-flash");
    expect((await turn(e, failing(2), true)).model).toBe("glm-5.3-flash");
    expect((await turn(e, failing(3), true)).model).toBe("kimi-k3");
    expect((await turn(e, [...failing(3), ...toolTurn("ok", "ls", OK("a"))], false)).model).toBe("kimi-k3");
    expect(byModel(e.token)).toEqual({ "glm-5.3-flash": 2, "kimi-k3": 2, "deepseek-v4.1-flash": 2 });
  });
});
