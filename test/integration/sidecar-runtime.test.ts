/**
 * The sidecar runtime on the host (real sockets, Debian's python3 with aiohttp/httpx) in front of a
 * recording OpenAI-shaped upstream: what the runtime sends, streams, renders, logs and survives.
 * Routing of the built-in kinds through the real meter and simulator: sidecar-metered.test.ts.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import OpenAI from "openai";
import { request } from "undici";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ValidatorError } from "../../src/errors.js";
import { type PolicyServer, startPolicyServer } from "../../src/policy/index.js";
import { type FakeUpstream, splitEvents, startFakeUpstream } from "../helpers/sidecar-upstream.js";

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

async function waitFor<T>(fn: () => T | undefined, ms = 3000): Promise<T> {
  const end = performance.now() + ms;
  for (;;) {
    const v = fn();
    if (v !== undefined) return v;
    if (performance.now() > end) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 20));
  }
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
  it("serves /health, /v1/models (one model, auto) and calls the upstream with the episode token", async () => {
    const s = await serve(PIN);
    const health = await request(`${s.baseUrl}/health`);
    expect(health.statusCode).toBe(200);
    expect(await health.body.json()).toEqual({ status: "ok", policy: "pin" });
    const models = await request(`${s.url}/models`);
    expect(((await models.body.json()) as { data: { id: string }[] }).data.map((m) => m.id)).toEqual([
      "auto",
    ]);

    const before = upstream.chatRequests().length;
    const r = await chat(s, {});
    expect(r.status).toBe(200);
    const body = r.json() as { choices: { message: { content: string } }[]; model: string; usage: unknown };
    expect(body.model).toBe("pinned-model");
    expect(body.choices[0]!.message.content).toMatch(/^reply from pinned-model #\d+$/);
    const sent = upstream.chatRequests().slice(before);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.authorization).toBe(`Bearer ${TOKEN}`);
    expect(sent[0]!.body?.model).toBe("pinned-model");
    expect(sent[0]!.body?.messages).toEqual(USER);
  });

  it("passes the upstream's stream through chunk for chunk, as it arrives", async () => {
    const s = await serve(PIN);
    const nStreams = upstream.streams.length;
    const r = await chat(s, { stream: true, stream_options: { include_usage: true } });
    expect(r.status).toBe(200);
    const written = upstream.streams[nStreams]!;
    // Byte-identical, the keep-alive comment included: nothing was parsed and re-serialised.
    expect(r.text).toBe(written.join(""));
    expect(written.some((e) => e.startsWith(": keep-alive"))).toBe(true);
    // Chunk for chunk: every upstream write reached the agent as its own read, in order...
    expect(r.chunks).toEqual(written);
    // ...and as it arrived, not after the end (the upstream paused 20 ms between writes).
    expect(r.ms[r.ms.length - 1]! - r.ms[0]!).toBeGreaterThan(20 * (written.length - 2));
    const turn = await waitFor(() => s.turns().at(-1));
    expect(turn).toMatchObject({ stream: true, status: "ok", model: "pinned-model", http_status: 200 });
    expect(turn.prompt_tokens).toBeGreaterThan(100);
    expect(turn.ttfb_ms).toBeLessThan(turn.latency_ms);
  });

  it("asks the upstream for usage and hides the usage chunk from an agent that did not ask for it", async () => {
    const s = await serve(PIN);
    const nStreams = upstream.streams.length;
    const before = upstream.chatRequests().length;
    const r = await chat(s, { stream: true });
    expect(upstream.chatRequests()[before]!.body?.stream_options).toEqual({ include_usage: true });
    const written = upstream.streams[nStreams]!;
    const usageChunk = written.filter((e) => e.includes('"usage"'));
    expect(usageChunk).toHaveLength(1);
    // Everything but that one event, byte for byte and in order.
    expect(r.text).toBe(written.filter((e) => !e.includes('"usage"')).join(""));
    const turn = await waitFor(() => s.turns().at(-1));
    expect(turn.prompt_tokens).toBeGreaterThan(100);
    expect(turn.completion_tokens).toBeGreaterThan(10);
  });

  it('substitutes DEFAULT_MODEL for "auto", and pins on it when the directory has no policy file', async () => {
    const s = await serve({ "README.txt": "no policy here" }, { defaultModel: "the-default" });
    const before = upstream.chatRequests().length;
    const r = await chat(s, {});
    expect(r.status).toBe(200);
    expect(upstream.chatRequests()[before]!.body?.model).toBe("the-default");
    const health = (await (await request(`${s.baseUrl}/health`)).body.json()) as { policy: string };
    expect(health.policy).toBe("pin(default)");
  });

  it("passes upstream HTTP errors to the agent with the same status and OpenAI body", async () => {
    const s = await serve({ "policy.json": JSON.stringify({ kind: "pin", model: "fail-402" }) });
    for (const stream of [false, true]) {
      const r = await chat(s, { stream });
      expect(r.status).toBe(402);
      expect(r.json()).toEqual({
        error: { message: "refused fail-402", type: "cap", param: null, code: "refused" },
      });
    }
    const s2 = await serve({ "policy.json": JSON.stringify({ kind: "pin", model: "fail-400" }) });
    const r = await chat(s2, {});
    expect(r.status).toBe(400);
    expect((r.json() as { error: { type: string } }).error.type).toBe("allowlist");
    const turn = await waitFor(() => s2.turns().at(-1));
    expect(turn).toMatchObject({ status: "upstream_error", http_status: 400 });
  });

  it("ends a stream the upstream cut with an SSE error event", async () => {
    const s = await serve({ "policy.json": JSON.stringify({ kind: "pin", model: "cut" }) });
    const r = await chat(s, { stream: true });
    expect(r.status).toBe(200);
    const events = splitEvents(r.text);
    expect(events.length).toBe(3);
    const last = JSON.parse(events[2]!.replace(/^data: /, "")) as {
      error: { type: string; message: string };
    };
    expect(last.error.type).toBe("upstream_error");
    expect(last.error.message).toMatch(/cut/);
    const turn = await waitFor(() => s.turns().at(-1));
    expect(turn).toMatchObject({ status: "upstream_error", http_status: 502 });
    // The server keeps serving.
    expect((await request(`${s.baseUrl}/health`)).statusCode).toBe(200);
  });
});

const SDK_POLICY = `
import asyncio, time
from trajrl_policy import Policy, serve

class Probe(Policy):
    async def handle(self, req, ctx):
        last = req["messages"][-1].get("content") or ""
        if last == "boom":
            raise ZeroDivisionError("policy bug on purpose")
        if last == "render":
            msg = await ctx.call("tools", [{"role": "user", "content": "x"}], max_tokens=50, temperature=0)
            return ctx.render(msg)
        if last == "parallel":
            t0 = time.perf_counter()
            msgs = await asyncio.gather(*(ctx.call("slow", [{"role": "user", "content": str(i)}]) for i in range(3)))
            ctx.log(parallel_s=time.perf_counter() - t0)
            return ctx.render({"role": "assistant", "content": " | ".join(m["content"] for m in msgs)})
        if last == "count":
            ctx.session["n"] = ctx.session.get("n", 0) + 1
            return ctx.render(f"n={ctx.session['n']} turn={ctx.turn} key={ctx.session_key}")
        if last == "budget":
            return ctx.render(f"remaining={ctx.remaining_usd}")
        req["model"] = "sdk-model"
        r = await ctx.upstream(req)
        ctx.log(remaining=ctx.remaining_usd, answered=r["choices"][0]["message"]["content"])
        return r

serve(Probe())
`;

function userSays(text: string, history: unknown[] = USER): unknown[] {
  return [...history, { role: "user", content: text }];
}

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

  it("a handle() that raises answers an OpenAI-shaped 500, logs the traceback, and the next request succeeds", async () => {
    const r = await chat(s, { messages: userSays("boom") });
    expect(r.status).toBe(500);
    const body = r.json() as { error: { message: string; type: string; code: string } };
    expect(body.error).toMatchObject({ type: "policy_error", code: "policy_exception" });
    expect(body.error.message).toContain("ZeroDivisionError: policy bug on purpose");
    const turn = await waitFor(() => s.turns().find((t) => t.status === "policy_error"));
    expect(turn.http_status).toBe(500);
    expect(turn.traceback).toMatch(/Traceback[\s\S]*ZeroDivisionError/);
    expect(s.stderr()).toContain("ZeroDivisionError: policy bug on purpose");
    const next = await chat(s, { messages: userSays("hello") });
    expect(next.status).toBe(200);
    // Streaming requests recover as well.
    const streamed = await chat(s, { messages: userSays("hello"), stream: true });
    expect(streamed.status).toBe(200);
    expect(streamed.text.endsWith("data: [DONE]\n\n")).toBe(true);
  });

  it("ctx.render answers with an assembled message: SSE chunks when streaming (tool calls included), JSON otherwise", async () => {
    const client = new OpenAI({ baseURL: s.url, apiKey: "unused", maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: "auto",
      messages: userSays("render") as never,
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = "";
    const args: string[] = [];
    let name = "";
    let finish: string | null = null;
    let usage: unknown;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      const c = chunk.choices[0];
      if (!c) continue;
      content += c.delta.content ?? "";
      for (const tc of c.delta.tool_calls ?? []) {
        name += tc.function?.name ?? "";
        args.push(tc.function?.arguments ?? "");
      }
      finish = c.finish_reason ?? finish;
    }
    expect(content).toMatch(/^reply from tools #\d+$/);
    expect(name).toBe("terminal");
    expect(JSON.parse(args.join(""))).toEqual({ command: "ls -la /app" });
    expect(finish).toBe("tool_calls");
    expect(usage).toMatchObject({ prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number) });

    const plain = await client.chat.completions.create({
      model: "auto",
      messages: userSays("render") as never,
    });
    expect(plain.model).toBe("tools");
    expect(plain.choices[0]!.message.tool_calls?.[0]).toMatchObject({
      type: "function",
      function: { name: "terminal", arguments: '{"command":"ls -la /app"}' },
    });
    expect(plain.choices[0]!.finish_reason).toBe("tool_calls");
  });

  it("runs ctx.call in parallel under asyncio.gather", async () => {
    const r = await chat(s, { messages: userSays("parallel") });
    expect(r.status).toBe(200);
    expect((r.json() as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toMatch(
      /^reply from slow #\d+ \| reply from slow #\d+ \| reply from slow #\d+$/,
    );
    // The three 300 ms calls were all waiting upstream at once (sequential calls would show 1).
    expect(upstream.maxSlowInFlight).toBe(3);
    const turn = await waitFor(() =>
      s.turns().find((t) => (t.policy as { parallel_s?: number })?.parallel_s),
    );
    expect((turn.policy as { parallel_s: number }).parallel_s).toBeLessThan(0.7);
    expect(turn.models).toEqual(["slow", "slow", "slow"]);
    expect(turn.prompt_tokens).toBeGreaterThan(300);
  });

  it("keeps ctx.session per agent session, keyed by the first five messages", async () => {
    const say = async (messages: unknown[]) =>
      ((await chat(s, { messages })).json() as { choices: { message: { content: string } }[] }).choices[0]!
        .message.content;
    const a1 = [
      { role: "system", content: "sys" },
      { role: "user", content: "count" },
    ];
    const a2 = [...a1, { role: "assistant", content: "ok" }, { role: "user", content: "count" }];
    const a3 = [...a2, { role: "assistant", content: "A-specific" }, { role: "user", content: "count" }];
    const b3 = [...a2, { role: "assistant", content: "B-specific" }, { role: "user", content: "count" }];
    const first = await say(a1);
    expect(first).toMatch(/^n=1 turn=1 key=/);
    expect(await say(a2)).toMatch(/^n=2 turn=2 /);
    const third = await say(a3);
    expect(third).toMatch(/^n=3 turn=3 /);
    // The key is the digest of the first five messages; a later message does not change it.
    const key = third.split("key=")[1];
    expect(
      await say([...a3, { role: "assistant", content: "more" }, { role: "user", content: "count" }]),
    ).toBe(`n=4 turn=4 key=${key}`);
    // A conversation that differs within the first five messages is another session.
    expect(await say(b3)).toMatch(/^n=1 turn=1 /);
  });

  it("tracks ctx.remaining_usd: the meter's header after a plain call, GET /budget after a streamed one", async () => {
    upstream.remainingUsd = 0.2;
    await chat(s, { messages: userSays("hello") });
    const t = await waitFor(() =>
      s.turns().findLast((x) => (x.policy as { remaining?: number })?.remaining !== undefined),
    );
    expect((t.policy as { remaining: number }).remaining).toBeCloseTo(0.19, 6);
    const budgetCalls = () => upstream.requests.filter((r) => r.path === "/v1/budget").length;
    const before = budgetCalls();
    upstream.remainingUsd = 0.1234;
    // The streamed call's header said 0.1134 before the tokens flowed; /budget then says 0.05.
    const streamed = chat(s, { messages: userSays("hello"), stream: true });
    await waitFor(() => (upstream.streams.length > 0 && upstream.remainingUsd < 0.1234 ? true : undefined));
    upstream.remainingUsd = 0.05;
    expect((await streamed).status).toBe(200);
    const after = await chat(s, { messages: userSays("budget") });
    expect(budgetCalls()).toBeGreaterThan(before);
    expect(
      (after.json() as { choices: { message: { content: string } }[] }).choices[0]!.message.content,
    ).toBe("remaining=0.05");
    expect(
      upstream.requests
        .filter((r) => r.path === "/v1/budget")
        .every((r) => r.authorization === `Bearer ${TOKEN}`),
    ).toBe(true);
  });

  it("logs one JSON line per turn with session, turn, models, tokens, latency, stream and status", async () => {
    const n = s.turns().length;
    await chat(s, { messages: userSays("hello") });
    const line = await waitFor(() => (s.turns().length > n ? s.turns().at(-1) : undefined));
    expect(line).toMatchObject({
      event: "turn",
      session: expect.stringMatching(/^[0-9a-f]{16}$/),
      turn: expect.any(Number),
      model: "sdk-model",
      models: ["sdk-model"],
      prompt_tokens: expect.any(Number),
      completion_tokens: expect.any(Number),
      stream: false,
      status: "ok",
      http_status: 200,
    });
    expect(Date.parse(line.ts)).not.toBeNaN();
    expect(line.latency_ms).toBeGreaterThan(0);
    // Nothing but JSON lines on stdout, and never the token.
    for (const l of s.logLines()) expect(() => JSON.parse(l)).not.toThrow();
    expect(s.logLines().join("\n")).not.toContain(TOKEN);
    expect(s.stderr()).not.toContain(TOKEN);
  });

  it("answers a body that is not a chat request with 400 and keeps serving", async () => {
    const r = await request(`${s.url}/chat/completions`, { method: "POST", body: "{nope" });
    expect(r.statusCode).toBe(400);
    expect(((await r.body.json()) as { error: { type: string } }).error.type).toBe("invalid_request_error");
    expect((await chat(s, { messages: userSays("hello") })).status).toBe(200);
  });
});

describe("sidecar runtime: policies that cannot start exit before health with the reason", () => {
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
    return err as ValidatorError;
  }

  it.each([
    ["unknown kind", { "policy.json": '{"kind": "ensemble", "models": ["a"]}' }, /unknown kind "ensemble"/],
    ["unparseable policy.json", { "policy.json": '{"kind": "pin",' }, /policy.json is not valid JSON/],
    [
      "a wrong field type",
      { "policy.json": '{"kind": "pin", "model": 7}' },
      /pin.model must be a model name/,
    ],
    [
      "an unknown signal",
      { "policy.json": '{"kind": "escalate", "cheap": "a", "strong": "b", "signals": ["bored"]}' },
      /unknown signal "bored"/,
    ],
    [
      "policy.py crashing at import",
      { "policy.py": "import trajrl_policy\nx = 1 / 0\n" },
      /ZeroDivisionError: division by zero/,
    ],
    [
      "policy.py that never serves",
      { "policy.py": "from trajrl_policy import Policy\nclass P(Policy): pass\n" },
      /without serving/,
    ],
    [
      "a synchronous handle",
      {
        "policy.py":
          "from trajrl_policy import Policy, serve\nclass P(Policy):\n    def handle(self, req, ctx): return None\nserve(P())\n",
      },
      /must be declared `async def handle/,
    ],
  ])("%s", async (_name, files, message) => {
    const err = await failing(files);
    expect(err.code).toBe("policy_exit_before_health");
    expect(err.failureClass).toBe("policy");
    expect(err.message).toMatch(message);
    const exit = (err.detail as { exit: { code: number } }).exit;
    expect(exit.code).not.toBe(0);
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

describe("sidecar runtime: raw mode", () => {
  it("runs a policy.py that serves the port itself as `python policy.py` in POLICY_DIR", async () => {
    const s = await serve({ "policy.py": RAW_POLICY });
    expect((await request(`${s.baseUrl}/health`)).statusCode).toBe(404); // not ours: the raw server's
    const before = upstream.chatRequests().length;
    const r = await chat(s, {});
    expect(r.status).toBe(200);
    expect((r.json() as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toMatch(
      /^raw: reply from raw-model #\d+$/,
    );
    expect(upstream.chatRequests()[before]!.authorization).toBe(`Bearer ${TOKEN}`);
    await waitFor(() => (s.logLines().some((l) => l.includes("raw_turn")) ? true : undefined));
    const exit = await s.stop();
    expect(exit.signal ?? exit.code).toBeDefined();
  });
});
