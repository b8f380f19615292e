/**
 * The SDK file (sidecar/sdk/trajrl_policy.py) on the host (real sockets, Debian's python3) in front of
 * a recording OpenAI-shaped upstream: what it sends, streams, renders, logs and survives, with the
 * reference runtime's semantics. Routing of the built-in kinds and of upstream's published examples
 * through the real meter and simulator: sidecar-metered.test.ts.
 */
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import OpenAI from "openai";
import { request } from "undici";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ValidatorError } from "../../src/errors.js";
import {
  findPython,
  freePort,
  type PolicyServer,
  SDK_FILE,
  startPolicyServer,
} from "../../src/policy/index.js";
import { type FakeUpstream, startFakeUpstream } from "../helpers/sidecar-upstream.js";

const TOKEN = "ep-test-token-0123456789";
let upstream: FakeUpstream;
const dirs: string[] = [];
const servers: PolicyServer[] = [];

async function policyDir(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "trajrl-policy-"));
  dirs.push(dir);
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  return dir;
}

async function serve(
  files: Record<string, string>,
  extra: { defaultModel?: string } = {},
): Promise<PolicyServer> {
  const s = await startPolicyServer({
    policyDir: await policyDir(files),
    upstreamUrl: upstream.url,
    token: TOKEN,
    defaultModel: extra.defaultModel ?? "default-model",
  });
  servers.push(s);
  return s;
}

const PIN = { "policy.json": JSON.stringify({ kind: "pin", model: "pinned-model" }) };
const USER = [
  { role: "system", content: "You are an agent." },
  { role: "user", content: "Do the task." },
];

async function chat(
  s: PolicyServer,
  body: Record<string, unknown>,
): Promise<{ status: number; json: () => unknown; text: string; chunks: string[]; ms: number[] }> {
  const t0 = performance.now();
  const r = await request(`${s.url}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "auto", messages: USER, ...body }),
  });
  const chunks: string[] = [];
  const ms: number[] = [];
  for await (const c of r.body) {
    chunks.push(Buffer.from(c as Uint8Array).toString("utf8"));
    ms.push(performance.now() - t0);
  }
  const text = chunks.join("");
  return { status: r.statusCode, json: () => JSON.parse(text), text, chunks, ms };
}

beforeAll(async () => {
  upstream = await startFakeUpstream({ token: TOKEN, chunkDelayMs: 20 });
});

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

afterAll(async () => {
  await upstream.close();
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

describe("sidecar runtime: serving", () => {
  it("serves /health and /v1/models as upstream's runtime does, and calls the upstream with the episode token", async () => {
    const s = await serve(PIN);
    const health = await request(`${s.baseUrl}/health`);
    expect(health.statusCode).toBe(200);
    expect(await health.body.json()).toEqual({ ok: true, policy: "pin:pinned-model" });
    const models = await request(`${s.url}/models`);
    expect(await models.body.json()).toEqual({
      object: "list",
      data: [{ id: "auto", object: "model", owned_by: "policy", policy: "pin:pinned-model" }],
    });

    const before = upstream.chatRequests().length;
    const r = await chat(s, {});
    expect(r.status).toBe(200);
    const body = r.json() as { choices: { message: { content: string } }[]; model: string };
    expect(body.model).toBe("pinned-model");
    expect(body.choices[0]!.message.content).toMatch(/^reply from pinned-model #\d+$/);
    const sent = upstream.chatRequests().slice(before);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.authorization).toBe(`Bearer ${TOKEN}`);
    expect(sent[0]!.body).toEqual({ model: "pinned-model", messages: USER });
  });

  it("passes the upstream's stream through chunk for chunk, as it arrives, usage chunk included", async () => {
    const s = await serve(PIN);
    const nStreams = upstream.streams.length;
    const before = upstream.chatRequests().length;
    const r = await chat(s, { stream: true });
    expect(r.status).toBe(200);
    // The runtime asks for the usage chunk (as upstream's does) and forwards it like every other event.
    expect(upstream.chatRequests()[before]!.body?.stream_options).toEqual({ include_usage: true });
    const written = upstream.streams[nStreams]!;
    expect(written.some((e) => e.includes('"usage"'))).toBe(true);
    // Byte-identical, the keep-alive comment included: nothing was parsed and re-serialised...
    expect(r.text).toBe(written.join(""));
    expect(written.some((e) => e.startsWith(": keep-alive"))).toBe(true);
    // ...every upstream write reached the agent as its own read, in order, as it arrived.
    expect(r.chunks).toEqual(written);
    const turn = await waitFor(() => s.turns().at(-1), SOON);
    expect(turn).toMatchObject({ model: "pinned-model", status: 200, finish: "stop" });
    expect(turn.usage?.prompt_tokens).toBeGreaterThan(100);
  });

  it("pins on DEFAULT_MODEL when the directory has no policy file", async () => {
    const s = await serve({ "README.txt": "no policy here" }, { defaultModel: "the-default" });
    const before = upstream.chatRequests().length;
    expect((await chat(s, {})).status).toBe(200);
    expect(upstream.chatRequests()[before]!.body?.model).toBe("the-default");
    const health = (await (await request(`${s.baseUrl}/health`)).body.json()) as { policy: string };
    expect(health.policy).toBe("pin:the-default");
  });

  it("relays upstream HTTP errors to the agent with the same status and body", async () => {
    const s = await serve({ "policy.json": JSON.stringify({ kind: "pin", model: "fail-402" }) });
    for (const stream of [false, true]) {
      const r = await chat(s, { stream });
      expect(r.status).toBe(402);
      expect(r.json()).toEqual({
        error: { message: "refused fail-402", type: "cap", param: null, code: "refused" },
      });
    }
    const turn = await waitFor(() => s.turns().at(-1), SOON);
    expect(turn).toMatchObject({ status: 402, model: "fail-402" });
  });

  it("retries a busy upstream (429) before answering", async () => {
    const s = await serve({ "policy.json": JSON.stringify({ kind: "pin", model: "busy-once-a" }) });
    const before = upstream.chatRequests().length;
    const r = await chat(s, {});
    expect(r.status).toBe(200);
    expect(
      upstream
        .chatRequests()
        .slice(before)
        .map((x) => x.body?.model),
    ).toEqual(["busy-once-a", "busy-once-a"]);
  });

  it("cuts the agent's stream when the upstream's breaks mid-way, and keeps serving", async () => {
    const s = await serve({ "policy.json": JSON.stringify({ kind: "pin", model: "cut" }) });
    const r = await chat(s, { stream: true }).catch((e: unknown) => e);
    // Either the read fails or the stream ends early: never a complete answer.
    if (!(r instanceof Error)) expect((r as { text: string }).text).not.toContain("[DONE]");
    expect((await request(`${s.baseUrl}/health`)).statusCode).toBe(200);
    expect((await chat(s, { model: "x" })).status).toBe(200);
  });
});

const SDK_POLICY = `
import asyncio, json, time
from trajrl_policy import Policy, serve

class Probe(Policy):
    name = "probe"

    async def handle(self, req, ctx):
        last = req["messages"][-1].get("content") or ""
        if last == "boom":
            raise ZeroDivisionError("policy bug on purpose")
        if last == "render":
            note = await ctx.call("tools", [{"role": "user", "content": "x"}], max_tokens=50, temperature=0)
            return ctx.render(note["message"], model="tools", finish=note["finish"], usage=note["usage"])
        if last == "calls":
            results = await asyncio.gather(
                ctx.call("slow", [{"role": "user", "content": "1"}]),
                ctx.call("slow", [{"role": "user", "content": "2"}]),
                ctx.call("fail-402", [{"role": "user", "content": "3"}]),
            )
            return ctx.render({"content": json.dumps(results)})
        if last == "session":
            s = dict(ctx.session)
            s["t0"] = isinstance(s.get("t0"), float)
            return ctx.render({"content": json.dumps({"session": s, "signals": ctx.signals(), "req_id": ctx.req_id})})
        if last == "budget":
            return ctx.render({"content": f"remaining={ctx.remaining_usd}"})
        if last == "nothing":
            return {"content": "a dict is not an answer"}
        if last == "status":
            req["model"] = "fail-400"
            r = await ctx.upstream(req)
            req["model"] = "sdk-model"
            return ctx.render({"content": f"first={r.status}"}) if r.status != 200 else r
        req["model"] = "long" if last == "long" else "sdk-model"
        return await ctx.upstream(req)

serve(Probe())
`;

function userSays(text: string, history: unknown[] = USER): unknown[] {
  return [...history, { role: "user", content: text }];
}

const content = (r: { json: () => unknown }) =>
  (r.json() as { choices: { message: { content: string } }[] }).choices[0]!.message.content;

describe("sidecar runtime: the SDK", () => {
  let s: PolicyServer;
  beforeAll(async () => {
    s = await startPolicyServer({
      policyDir: await policyDir({ "policy.py": SDK_POLICY }),
      upstreamUrl: upstream.url,
      token: TOKEN,
    });
  });
  afterAll(async () => {
    await s.stop();
  });

  it("a handle() that raises answers upstream's 500 body, logs policy_error, and the next request succeeds", async () => {
    const r = await chat(s, { messages: userSays("boom") });
    expect(r.status).toBe(500);
    expect(r.json()).toEqual({
      error: { message: "policy error: ZeroDivisionError('policy bug on purpose')", type: "policy" },
    });
    const err = await waitFor(() => s.events().find((e) => e.event === "policy_error"), SOON);
    expect(err).toMatchObject({ error: "ZeroDivisionError('policy bug on purpose')", turn: 1 });
    expect(s.stderr()).toContain("ZeroDivisionError: policy bug on purpose");
    expect((await chat(s, { messages: userSays("hello") })).status).toBe(200);
    const streamed = await chat(s, { messages: userSays("hello"), stream: true });
    expect(streamed.status).toBe(200);
    expect(streamed.text.endsWith("data: [DONE]\n\n")).toBe(true);
  });

  it("a handle() that returns anything but upstream() or render() is a 500", async () => {
    const r = await chat(s, { messages: userSays("nothing") });
    expect(r.status).toBe(500);
    expect(r.json()).toEqual({
      error: { message: "policy returned neither upstream() nor render()", type: "policy" },
    });
  });

  it("ctx.render answers with an assembled message: SSE when streaming (tool calls included), JSON otherwise", async () => {
    const client = new OpenAI({ baseURL: s.url, apiKey: "unused", maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: "auto",
      messages: userSays("render") as never,
      stream: true,
    });
    let text = "";
    let name = "";
    let args = "";
    let finish: string | null = null;
    let usage: unknown;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      const c = chunk.choices[0];
      if (!c) continue;
      text += c.delta.content ?? "";
      for (const tc of c.delta.tool_calls ?? []) {
        name += tc.function?.name ?? "";
        args += tc.function?.arguments ?? "";
      }
      finish = c.finish_reason ?? finish;
    }
    expect(text).toMatch(/^reply from tools #\d+$/);
    expect(name).toBe("terminal");
    expect(JSON.parse(args)).toEqual({ command: "ls -la /app" });
    expect(finish).toBe("tool_calls");
    expect(usage).toMatchObject({ prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number) });

    const plain = await client.chat.completions.create({
      model: "auto",
      messages: userSays("render") as never,
    });
    expect(plain.model).toBe("tools");
    expect(plain.id).toMatch(/^chatcmpl-(s|pre)[0-9a-f]{12}-\d+$/);
    expect(plain.choices[0]!.message.tool_calls?.[0]).toMatchObject({
      type: "function",
      function: { name: "terminal", arguments: '{"command":"ls -la /app"}' },
    });
    expect(plain.choices[0]!.finish_reason).toBe("tool_calls");
  });

  it("ctx.call returns upstream's dict, never raises, and runs in parallel under asyncio.gather", async () => {
    const r = await chat(s, { messages: userSays("calls") });
    expect(r.status).toBe(200);
    const [a, b, refused] = JSON.parse(content(r)) as Record<string, unknown>[];
    for (const ok of [a!, b!]) {
      expect(Object.keys(ok).sort()).toEqual(["error", "finish", "message", "s", "status", "text", "usage"]);
      expect(ok).toMatchObject({
        status: 200,
        error: null,
        finish: "stop",
        text: expect.stringMatching(/^reply from slow/),
      });
      expect(ok.message).toMatchObject({ role: "assistant", content: ok.text });
    }
    expect(refused).toMatchObject({ status: 402, text: "", message: {}, usage: null, finish: null });
    expect(String(refused!.error)).toContain("refused fail-402");
    // The two slow calls were waiting upstream at once.
    expect(upstream.maxSlowInFlight).toBe(2);
    const sent = upstream.chatRequests().filter((x) => x.body?.model === "slow");
    expect(sent.at(-1)!.body).toMatchObject({ max_tokens: 600, temperature: 0.7, stream: false });
  });

  it("keeps ctx.session per agent session: t0, turn and last_finish, keyed pre… then s… by the first messages", async () => {
    const ask = async (messages: unknown[]) =>
      JSON.parse(content(await chat(s, { messages }))) as {
        session: Record<string, unknown>;
        signals: string[];
        req_id: string;
      };
    const sys = { role: "system", content: "sys-session-test" };
    const short = [sys, { role: "user", content: "session" }];
    const first = await ask(short);
    expect(first.session).toEqual({ t0: true, turn: 1 });
    expect(first.req_id).toMatch(/^chatcmpl-pre[0-9a-f]{12}-1$/);
    // Still under five messages: the same provisional session (keyed by the first two).
    const four = [
      sys,
      { role: "user", content: "session" },
      { role: "assistant", content: "x" },
      { role: "user", content: "session" },
    ];
    expect((await ask(four)).session.turn).toBe(2);
    // Five messages: a session of its own, which counts from 1 again.
    const head = [...four.slice(0, 3), { role: "user", content: "long" }];
    await chat(s, { messages: head }); // the provisional session's 3rd turn ends with "length"
    const five = [...head, { role: "assistant", content: "y" }, { role: "user", content: "session" }];
    const full = await ask(five);
    expect(full.req_id).toMatch(/^chatcmpl-s[0-9a-f]{12}-1$/);
    expect(full.session).toEqual({ t0: true, turn: 1 });
    const again = await ask([
      ...five,
      { role: "assistant", content: "z" },
      { role: "user", content: "session" },
    ]);
    expect(again.session.turn).toBe(2);
    expect(again.session.last_finish).toBe("stop");
    // The previous answer of a session ended with "length": the len signal.
    await chat(s, { messages: [...five, { role: "user", content: "long" }] });
    const after = await ask([...five, { role: "user", content: "session" }]);
    expect(after.session.last_finish).toBe("length");
    expect(after.signals).toEqual(["len"]);
  });

  it("tracks ctx.remaining_usd: the meter's header after a plain call, GET /budget after a streamed one", async () => {
    upstream.remainingUsd = 0.2;
    await chat(s, { messages: userSays("hello") });
    expect(content(await chat(s, { messages: userSays("budget") }))).toBe("remaining=0.19");
    const budgetCalls = () => upstream.requests.filter((r) => r.path === "/v1/budget").length;
    const before = budgetCalls();
    upstream.remainingUsd = 0.1234;
    const streamed = chat(s, { messages: userSays("hello"), stream: true });
    await waitFor(() => (upstream.remainingUsd < 0.1234 ? true : undefined), SOON);
    upstream.remainingUsd = 0.05;
    expect((await streamed).status).toBe(200);
    await waitFor(() => (budgetCalls() > before ? true : undefined), SOON);
    expect(content(await chat(s, { messages: userSays("budget") }))).toBe("remaining=0.05");
    expect(
      upstream.requests
        .filter((r) => r.path === "/v1/budget")
        .every((r) => r.authorization === `Bearer ${TOKEN}`),
    ).toBe(true);
  });

  it("hands the policy the upstream's error as a response it can inspect (no exception)", async () => {
    const r = await chat(s, { messages: userSays("status") });
    expect(r.status).toBe(200);
    expect(content(r)).toBe("first=400");
  });

  it("logs upstream's events as JSON lines, never the token", async () => {
    const n = s.turns().length;
    await chat(s, { messages: userSays("hello") });
    const line = await waitFor(() => (s.turns().length > n ? s.turns().at(-1) : undefined), SOON);
    expect(line).toMatchObject({
      event: "turn",
      session: expect.stringMatching(/^(s|pre)[0-9a-f]{12}$/),
      turn: expect.any(Number),
      model: "sdk-model",
      status: 200,
      finish: "stop",
      usage: { prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number) },
      s: expect.any(Number),
    });
    expect(s.events()[0]).toMatchObject({ event: "start", policy: "probe", port: s.port });
    for (const l of s.logLines()) expect(() => JSON.parse(l)).not.toThrow();
    expect(s.logLines().join("\n")).not.toContain(TOKEN);
    expect(s.stderr()).not.toContain(TOKEN);
  });
});

describe("sidecar runtime: what starts and what does not, as upstream's runtime decides", () => {
  async function failing(files: Record<string, string>): Promise<ValidatorError> {
    const err = await startPolicyServer({
      policyDir: await policyDir(files),
      upstreamUrl: upstream.url,
      token: TOKEN,
      healthTimeoutMs: 20_000,
    }).then(
      (srv) => {
        servers.push(srv);
        throw new Error("the policy started");
      },
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ValidatorError);
    expect((err as ValidatorError).code).toBe("policy_exit_before_health");
    expect((err as ValidatorError).failureClass).toBe("policy");
    return err as ValidatorError;
  }

  it.each([
    [
      "an unknown kind",
      { "policy.json": '{"kind": "ensemble", "models": ["a"]}' },
      /unknown policy kind 'ensemble'/,
    ],
    ["unparseable policy.json", { "policy.json": '{"kind": "pin",' }, /policy.json: JSONDecodeError/],
    ["policy.json that is not an object", { "policy.json": '["pin"]' }, /policy.json: AttributeError/],
    [
      "a missing required field",
      { "policy.json": '{"kind": "escalate", "cheap": "a"}' },
      /KeyError: 'strong'/,
    ],
    [
      "a number that is not one",
      { "policy.json": '{"kind": "escalate", "cheap": "a", "strong": "b", "stall_s": "soon"}' },
      /ValueError/,
    ],
    [
      "policy.py crashing at import",
      { "policy.py": "import trajrl_policy\nx = 1 / 0\n" },
      /ZeroDivisionError: division by zero/,
    ],
  ])("%s: exits before health with the reason", async (_name, files, message) => {
    const err = await failing(files);
    expect(err.message).toMatch(message);
    expect((err.detail as { exit: { code: number } }).exit.code).toBe(1);
  });

  it("policy.py that returns without serving: the process ends before health", async () => {
    const err = await failing({ "policy.py": "from trajrl_policy import Policy\nclass P(Policy): pass\n" });
    expect(err.message).toMatch(/returned without serving/);
  });

  it.each([
    [
      "unknown fields",
      { "policy.json": '{"kind": "pin", "model": "m", "note": "mine", "version": 2}' },
      "pin:m",
    ],
    ["no kind", { "policy.json": '{"model": "m"}' }, "pin:m"],
    [
      "an unknown signal",
      { "policy.json": '{"kind": "escalate", "cheap": "a", "strong": "b", "signals": ["bored"]}' },
      "escalate:a->b",
    ],
    [
      "lenient numbers",
      {
        "policy.json":
          '{"kind": "advisers", "writer": "w", "advisers": ["x"], "max_tokens": "300", "every": 0}',
      },
      "advisers:w|x",
    ],
  ])("starts with %s, as upstream's runtime does", async (_name, files, name) => {
    const s = await serve(files);
    expect(await (await request(`${s.baseUrl}/health`)).body.json()).toEqual({ ok: true, policy: name });
  });

  it("starts a policy whose handle is not async, and answers each turn with upstream's 500", async () => {
    const s = await serve({
      "policy.py":
        "from trajrl_policy import Policy, serve\nclass P(Policy):\n    def handle(self, req, ctx): return None\nserve(P())\n",
    });
    const r = await chat(s, {});
    expect(r.status).toBe(500);
    expect((r.json() as { error: { type: string; message: string } }).error).toMatchObject({
      type: "policy",
    });
  });
});

const RAW_POLICY = `
import json, os
import httpx
from aiohttp import web

UP = os.environ["UPSTREAM_URL"]
HEADERS = {"Authorization": "Bearer " + os.environ["EPISODE_TOKEN"]}

async def models(request):
    return web.json_response({"object": "list", "data": [{"id": "auto", "object": "model"}]})

async def chat(request):
    body = await request.json()
    body["model"] = "raw-model"
    body["stream"] = False
    async with httpx.AsyncClient() as c:
        r = await c.post(UP + "/chat/completions", json=body, headers=HEADERS)
    data = r.json()
    data["choices"][0]["message"]["content"] = "raw: " + data["choices"][0]["message"]["content"]
    print(json.dumps({"raw_turn": True}), flush=True)
    return web.json_response(data, status=r.status_code)

app = web.Application()
app.router.add_get("/v1/models", models)
app.router.add_post("/v1/chat/completions", chat)
web.run_app(app, host=os.environ.get("POLICY_HOST", "0.0.0.0"), port=int(os.environ["POLICY_PORT"]), print=None)
`;

import { waitFor } from "../helpers/wait.js";

/** What the sidecar does next comes within 3 s here. */
const SOON = { ms: 3_000, everyMs: 20 };

describe("sidecar runtime: raw mode", () => {
  it("runs a policy.py that serves the port itself", async () => {
    const s = await serve({ "policy.py": RAW_POLICY });
    expect((await request(`${s.baseUrl}/health`)).statusCode).toBe(404); // not ours: the raw server's
    const before = upstream.chatRequests().length;
    const r = await chat(s, {});
    expect(r.status).toBe(200);
    expect(content(r)).toMatch(/^raw: reply from raw-model #\d+$/);
    expect(upstream.chatRequests()[before]!.authorization).toBe(`Bearer ${TOKEN}`);
    await waitFor(() => (s.logLines().some((l) => l.includes("raw_turn")) ? true : undefined), SOON);
    const exit = await s.stop();
    expect(exit.signal ?? exit.code).toBeDefined();
  });
});

/**
 * The bench's way: `python /policy/sdk/trajrl_policy.py` with PYTHONPATH=/policy/sdk:/policy, the
 * log in POLICY_LOG, and nothing importable beyond the standard library and aiohttp (with what
 * aiohttp itself imports): a guard refuses every other module and reports the attempt.
 */
const GUARD = `
import importlib.abc, os, runpy, sys
import aiohttp, aiohttp.web
allowed = set(sys.stdlib_module_names) | {m.split(".")[0] for m in sys.modules}
class Guard(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in allowed or top == "trajrl_policy" or os.path.exists(os.path.join(os.environ["POLICY_DIR"], top + ".py")):
            return None
        sys.stderr.write("GUARD refused " + name + "\\n"); sys.stderr.flush()
        raise ImportError("not in the bench venv: " + name)
sys.meta_path.insert(0, Guard())
sys.argv = [sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
`;

describe("sidecar runtime: the single file, run as upstream's benchmark runs it", () => {
  it("serves a policy.py with only the standard library and aiohttp importable, logging to POLICY_LOG", async () => {
    const sdkDir = await mkdtemp(join(tmpdir(), "trajrl-sdk-"));
    dirs.push(sdkDir);
    await writeFile(join(sdkDir, "trajrl_policy.py"), await readFile(SDK_FILE, "utf8"));
    const dir = await policyDir({
      "policy.py": await readFile(
        new URL("../../examples/policies/public_sdk_example/policy/policy.py", import.meta.url),
        "utf8",
      ),
    });
    const logFile = join(dir, "policy.log");
    const port = await freePort();
    const child = spawn(findPython().path, ["-B", "-c", GUARD, join(sdkDir, "trajrl_policy.py")], {
      cwd: dir,
      env: {
        PATH: "/usr/bin:/bin",
        PYTHONPATH: `${sdkDir}:${dir}`,
        HOME: dir,
        POLICY_PORT: String(port),
        POLICY_HOST: "127.0.0.1",
        POLICY_DIR: dir,
        POLICY_LOG: logFile,
        UPSTREAM_URL: upstream.url,
        EPISODE_TOKEN: TOKEN,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (c: Buffer) => {
      stderr += c.toString("utf8");
    });
    const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
    try {
      const base = `http://127.0.0.1:${port}`;
      const up = await (async () => {
        const end = performance.now() + 20_000;
        for (;;) {
          if (child.exitCode !== null) throw new Error(`exited ${child.exitCode}: ${stderr}`);
          const ok = await request(`${base}/v1/models`).then(
            async (r) => ((await r.body.json()) as { data?: unknown[] }).data,
            () => undefined,
          );
          if (ok) return ok;
          if (performance.now() > end) throw new Error(`no answer: ${stderr}`);
          await new Promise((r) => setTimeout(r, 50));
        }
      })();
      expect(up).toEqual([{ id: "auto", object: "model", owned_by: "policy", policy: "policy" }]);
      const before = upstream.chatRequests().length;
      for (const stream of [false, true]) {
        const r = await request(`${base}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "auto", stream, messages: USER }),
        });
        const text = await r.body.text();
        expect(r.statusCode).toBe(200);
        expect(text).toContain("glm-5.3-flash");
      }
      expect(
        upstream
          .chatRequests()
          .slice(before)
          .map((x) => x.body?.model),
      ).toEqual(["glm-5.3-flash", "glm-5.3-flash"]);
      // The streamed turn is logged after the agent's [DONE] (once the meter's budget is refreshed).
      const events = async () =>
        (await readFile(logFile, "utf8"))
          .trim()
          .split("\n")
          .map((l) => (JSON.parse(l) as { event: string }).event);
      await waitFor(async () => ((await events()).length >= 3 ? true : undefined), SOON);
      expect(await events()).toEqual(["start", "turn", "turn"]);
      expect(stderr).not.toContain("GUARD refused");
    } finally {
      child.kill("SIGTERM");
      await exited;
    }
  });

  it("the guard does refuse what the bench venv would not have", async () => {
    const dir = await policyDir({ "policy.py": "import httpx\n" });
    const r = spawn(findPython().path, ["-B", "-c", GUARD, SDK_FILE], {
      cwd: dir,
      env: { PATH: "/usr/bin:/bin", POLICY_DIR: dir, UPSTREAM_URL: upstream.url },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    r.stderr.on("data", (c: Buffer) => {
      stderr += c.toString("utf8");
    });
    const code = await new Promise<number | null>((res) => r.on("exit", (c) => res(c)));
    expect(code).toBe(1);
    expect(stderr).toContain("GUARD refused httpx");
  });
});
