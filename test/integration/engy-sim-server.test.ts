import { request as httpRequest } from "node:http";
import { performance } from "node:perf_hooks";
import OpenAI from "openai";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EngySim, SIM_MODELS, startEngySim } from "../../src/engy-sim/index.js";

const SCENARIOS = new URL("../fixtures/sim-scenarios", import.meta.url).pathname;
const TOOLS: ChatCompletionTool[] = [
  {
    type: "function",
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
    type: "function",
    function: {
      name: "read_file",
      description: "read a file",
      parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
    },
  },
];
const START: ChatCompletionMessageParam[] = [
  { role: "system", content: "You are a careful terminal agent." },
  {
    role: "user",
    content: "Read /workspace/SKILL.md and /workspace/INSTRUCTION.md, then complete the task.",
  },
];

/** Raw HTTP, for what the SDK hides: exact bytes, headers, cut sockets, arrival times. */
function raw(
  sim: EngySim,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  error?: Error;
  chunkTimes: number[];
  ttfb: number;
}> {
  const started = performance.now();
  return new Promise((resolve) => {
    const req = httpRequest(
      `${sim.url}/chat/completions`,
      {
        method: "POST",
        headers: { "content-type": "application/json", authorization: "Bearer test-key", ...headers },
      },
      (res) => {
        const ttfb = performance.now() - started;
        let text = "";
        const chunkTimes: number[] = [];
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          text += c;
          chunkTimes.push(performance.now() - started);
        });
        const done = (error?: Error) =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text,
            chunkTimes,
            ttfb,
            ...(error ? { error } : {}),
          });
        res.on("end", () => done());
        res.on("error", (e) => done(e));
        res.on("aborted", () => done(new Error("aborted")));
      },
    );
    req.on("error", (e) => resolve({ status: 0, headers: {}, text: "", error: e, chunkTimes: [], ttfb: 0 }));
    req.end(JSON.stringify(body));
  });
}

const sseJson = (text: string) =>
  text
    .split("\n\n")
    .filter((e) => e.startsWith("data: ") && e !== "data: [DONE]")
    .map((e) => JSON.parse(e.slice(6)) as SseEvent);

interface SseEvent {
  choices: { finish_reason?: string | null; delta?: { content?: string | null } }[];
  usage?: { completion_tokens: number };
}

describe("engy-sim over HTTP, with the openai SDK unchanged", () => {
  let sim: EngySim;
  let client: OpenAI;
  beforeAll(async () => {
    sim = await startEngySim({ port: 0, seed: 7, scenariosDir: SCENARIOS, apiKeys: ["test-key"] });
    client = new OpenAI({ baseURL: sim.url, apiKey: "test-key", maxRetries: 0 });
  });
  afterAll(async () => {
    await sim.close();
  });

  it("GET /v1/models lists exactly the eight models", async () => {
    const page = await client.models.list();
    expect(page.data.map((m) => m.id).sort()).toEqual([...SIM_MODELS].sort());
    expect(sim.scenarios).toEqual(["sum-stats"]);
  });

  it("non-stream: tool calls with valid JSON arguments, usage, request id in header and body", async () => {
    const { data, response } = await client.chat.completions
      .create({ model: "kimi-k3", messages: START, tools: TOOLS })
      .withResponse();
    expect(data.id).toMatch(/^chatcmpl-[0-9a-f]{24}$/);
    expect(data.object).toBe("chat.completion");
    expect(data.model).toBe("kimi-k3");
    expect(typeof data.created).toBe("number");
    const choice = data.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    const calls = choice.message.tool_calls!;
    expect(calls.map((c) => c.type)).toEqual(["function", "function"]);
    const args = calls.map((c) => (c.type === "function" ? JSON.parse(c.function.arguments) : null));
    expect(args).toEqual([{ path: "/workspace/SKILL.md" }, { path: "/workspace/INSTRUCTION.md" }]);
    expect(calls.every((c) => /^call_[0-9a-f]{24}$/.test(c.id))).toBe(true);
    const usage = data.usage!;
    expect(usage.prompt_tokens).toBeGreaterThan(0);
    expect(usage.total_tokens).toBe(usage.prompt_tokens + usage.completion_tokens);
    expect(usage.prompt_tokens_details?.cached_tokens).toBe(0);
    const requestId = response.headers.get("x-engy-request-id");
    expect(requestId).toMatch(/^req_[0-9a-f]{24}$/);
    expect((data as unknown as { x_engy: { request_id: string } }).x_engy.request_id).toBe(requestId);
  });

  it("stream: accumulated tool-call fragments equal the non-stream answer; usage chunk only when asked", async () => {
    const plain = await client.chat.completions.create({ model: "glm-5.3", messages: START, tools: TOOLS });
    const stream = await client.chat.completions.create({
      model: "glm-5.3",
      messages: START,
      tools: TOOLS,
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = "";
    const calls: { id: string; name: string; arguments: string }[] = [];
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined;
    let chunks = 0;
    let lastExtra: unknown;
    for await (const chunk of stream) {
      chunks++;
      if (chunk.usage) usage = chunk.usage;
      lastExtra = (chunk as unknown as { x_engy?: unknown }).x_engy ?? lastExtra;
      const c = chunk.choices[0];
      if (!c) continue;
      content += c.delta.content ?? "";
      for (const tc of c.delta.tool_calls ?? []) {
        calls[tc.index] ??= { id: "", name: "", arguments: "" };
        const acc = calls[tc.index]!;
        if (tc.id) acc.id = tc.id;
        if (tc.function?.name) acc.name = tc.function.name;
        acc.arguments += tc.function?.arguments ?? "";
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
    expect(chunks).toBeGreaterThan(5);
    expect(finish).toBe("tool_calls");
    expect(content).toBe(plain.choices[0]!.message.content);
    expect(calls).toEqual(
      plain.choices[0]!.message.tool_calls!.map((c) =>
        c.type === "function" ? { id: c.id, name: c.function.name, arguments: c.function.arguments } : null,
      ),
    );
    expect(calls.map((c) => JSON.parse(c.arguments))).toEqual([
      { path: "/workspace/SKILL.md" },
      { path: "/workspace/INSTRUCTION.md" },
    ]);
    expect(usage?.completion_tokens).toBe(plain.usage!.completion_tokens);
    expect(lastExtra).toMatchObject({ request_id: expect.stringMatching(/^req_/) });

    const noUsage = await raw(sim, { model: "glm-5.3", messages: START, tools: TOOLS, stream: true });
    expect(noUsage.headers["content-type"]).toContain("text/event-stream");
    expect(noUsage.text.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(noUsage.text).not.toContain('"usage"');
  });

  it("the SDK's helper for streamed runs assembles the same final message", async () => {
    const runner = client.chat.completions.stream({ model: "qwen3.8-27b", messages: START, tools: TOOLS });
    const final = await runner.finalChatCompletion();
    const calls = final.choices[0]!.message.tool_calls!;
    expect(calls).toHaveLength(2);
    for (const c of calls)
      if (c.type === "function") expect(() => JSON.parse(c.function.arguments)).not.toThrow();
  });

  it("max_tokens cuts the answer: finish_reason length, completion within the limit", async () => {
    const r = await client.chat.completions.create({
      model: "kimi-k3",
      messages: START,
      tools: TOOLS,
      max_tokens: 5,
    });
    expect(r.choices[0]!.finish_reason).toBe("length");
    expect(r.usage!.completion_tokens).toBeLessThanOrEqual(5);
    expect(r.choices[0]!.message.tool_calls ?? []).toEqual([]);
    const s = await raw(sim, {
      model: "kimi-k3",
      messages: START,
      tools: TOOLS,
      max_completion_tokens: 40,
      stream: true,
      stream_options: { include_usage: true },
    });
    const events = sseJson(s.text);
    expect(events.flatMap((e) => e.choices.map((c) => c.finish_reason)).filter(Boolean)).toEqual(["length"]);
    expect(events.at(-1)!.usage!.completion_tokens).toBeLessThanOrEqual(40);
  });

  it("cached tokens grow across the turns of a session and start from zero on another model", async () => {
    const turn1 = [...START];
    const r1 = await client.chat.completions.create({ model: "glm-5.2", messages: turn1, tools: TOOLS });
    const m1 = r1.choices[0]!.message;
    const turn2: ChatCompletionMessageParam[] = [
      ...turn1,
      { role: "assistant", content: m1.content, tool_calls: m1.tool_calls },
      ...m1.tool_calls!.map((c) => ({ role: "tool" as const, tool_call_id: c.id, content: "file text" })),
    ];
    const r2 = await client.chat.completions.create({ model: "glm-5.2", messages: turn2, tools: TOOLS });
    const m2 = r2.choices[0]!.message;
    const turn3: ChatCompletionMessageParam[] = [
      ...turn2,
      { role: "assistant", content: m2.content, tool_calls: m2.tool_calls },
      ...(m2.tool_calls ?? []).map((c) => ({
        role: "tool" as const,
        tool_call_id: c.id,
        content: "total 0",
      })),
    ];
    const r3 = await client.chat.completions.create({ model: "glm-5.2", messages: turn3, tools: TOOLS });
    const cached = (r: OpenAI.ChatCompletion) => r.usage!.prompt_tokens_details!.cached_tokens!;
    expect(cached(r1)).toBe(0);
    // Everything turn 1 sent, except the 3 tokens of reply priming, is a cached prefix of turn 2.
    expect(cached(r2)).toBe(r1.usage!.prompt_tokens - 3);
    expect(cached(r3)).toBe(r2.usage!.prompt_tokens - 3);
    expect(cached(r3)).toBeGreaterThan(cached(r2));
    expect(cached(r3)).toBeLessThan(r3.usage!.prompt_tokens);
    const other = await client.chat.completions.create({
      model: "glm-5.3-flash",
      messages: turn3,
      tools: TOOLS,
    });
    expect(cached(other)).toBe(0);
  });

  it("auth: missing or unknown key → 401; unknown model → 404 OpenAI-shaped; bad input → 400", async () => {
    const anon = await fetch(`${sim.url}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "kimi-k3", messages: START }),
    });
    expect(anon.status).toBe(401);
    expect(((await anon.json()) as { error: { code: string } }).error.code).toBe("invalid_api_key");
    const wrongKey = new OpenAI({ baseURL: sim.url, apiKey: "nope", maxRetries: 0 });
    await expect(wrongKey.models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    const err = await client.chat.completions.create({ model: "gpt-4o", messages: START }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err.code).toBe("model_not_found");
    expect(err.error).toMatchObject({ type: "invalid_request_error", code: "model_not_found" });
    const bad = await raw(sim, { model: "kimi-k3", messages: [] });
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.text).error.type).toBe("invalid_request_error");
    const badFault = await raw(sim, { model: "kimi-k3", messages: START }, { "x-sim-fault": "teapot" });
    expect(badFault.status).toBe(400);
    expect(JSON.parse(badFault.text).error.code).toBe("invalid_fault_header");
  });

  it("determinism: two simulators with the same seed answer the same requests byte for byte", async () => {
    const opts = { port: 0, seed: 99, scenariosDir: SCENARIOS, now: () => 1_800_000_000 };
    const [a, b, c] = await Promise.all([
      startEngySim(opts),
      startEngySim(opts),
      startEngySim({ ...opts, seed: 100 }),
    ]);
    try {
      const body = (stream: boolean) => ({ model: "qwen3.6-35b-a3b", messages: START, tools: TOOLS, stream });
      for (const stream of [false, true, false]) {
        const [ra, rb, rc] = await Promise.all([
          raw(a, body(stream)),
          raw(b, body(stream)),
          raw(c, body(stream)),
        ]);
        expect(ra.status).toBe(200);
        expect(ra.text).toBe(rb.text);
        expect(ra.headers["x-engy-request-id"]).toBe(rb.headers["x-engy-request-id"]);
        expect(rc.text).not.toBe(ra.text);
      }
    } finally {
      await Promise.all([a.close(), b.close(), c.close()]);
    }
  });

  it("stats count requests per model", async () => {
    const before = sim.stats();
    await client.chat.completions.create({ model: "glm-5.3", messages: START });
    const after = sim.stats();
    expect(after.requests).toBe(before.requests + 1);
    expect(after.byModel["glm-5.3"]).toBe((before.byModel["glm-5.3"] ?? 0) + 1);
  });
});

describe("engy-sim fault injection", () => {
  let sim: EngySim;
  const body = (extra: Record<string, unknown> = {}) => ({
    model: "kimi-k3",
    messages: START,
    tools: TOOLS,
    ...extra,
  });
  const streamBody = { stream: true, stream_options: { include_usage: true } };
  beforeAll(async () => {
    sim = await startEngySim({ port: 0, seed: 3, scenariosDir: SCENARIOS });
  });
  afterAll(async () => {
    await sim.close();
  });

  it("429 and 503 with Retry-After, per request; the SDK surfaces them", async () => {
    const r = await raw(sim, body(), { "x-sim-fault": "429;retry-after=7" });
    expect(r.status).toBe(429);
    expect(r.headers["retry-after"]).toBe("7");
    expect(r.headers["x-engy-request-id"]).toMatch(/^req_/);
    expect(JSON.parse(r.text).error.code).toBe("rate_limit_exceeded");
    const client = new OpenAI({
      baseURL: sim.url,
      apiKey: "k",
      maxRetries: 0,
      defaultHeaders: { "x-sim-fault": "503" },
    });
    const err = await client.chat.completions.create(body() as never).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.InternalServerError);
    expect(err.status).toBe(503);
  });

  it("a planned 503 burst: the SDK's own retries get through after it", async () => {
    sim.setFaults({ rules: [{ fault: { kind: "503", retryAfterS: 0 }, count: 2 }] });
    try {
      const before = sim.stats().requests;
      const client = new OpenAI({ baseURL: sim.url, apiKey: "k", maxRetries: 2 });
      const r = await client.chat.completions.create(body() as never);
      expect((r as OpenAI.ChatCompletion).choices[0]!.finish_reason).toBe("tool_calls");
      expect(sim.stats().requests - before).toBe(3);
    } finally {
      sim.setFaults({ rules: [] });
    }
  });

  it("every Nth request: a 429 on requests 2 and 4 of the plan, for one model only", async () => {
    sim.setFaults({ rules: [{ fault: { kind: "429" }, model: "kimi-k3", start: 2, every: 2 }] });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) statuses.push((await raw(sim, body())).status);
      expect(statuses).toEqual([200, 429, 200, 429]);
      expect((await raw(sim, body({ model: "glm-5.2" }))).status).toBe(200);
    } finally {
      sim.setFaults({ rules: [] });
    }
  });

  it("stall: nothing arrives before the stall is over", async () => {
    const r = await raw(sim, body(), { "x-sim-fault": "stall=300" });
    expect(r.status).toBe(200);
    expect(r.ttfb).toBeGreaterThanOrEqual(290);
    const quick = await raw(sim, body());
    expect(quick.ttfb).toBeLessThan(250);
  });

  it("cut: a stream stops mid-way with a destroyed socket (no [DONE]); so does a non-stream body", async () => {
    const r = await raw(sim, body(streamBody), { "x-sim-fault": "cut=3" });
    expect(r.status).toBe(200);
    expect(r.error).toBeDefined();
    expect(r.text.split("\n\n").filter((e) => e.startsWith("data: "))).toHaveLength(3);
    expect(r.text).not.toContain("[DONE]");
    const client = new OpenAI({
      baseURL: sim.url,
      apiKey: "k",
      maxRetries: 0,
      defaultHeaders: { "x-sim-fault": "cut" },
    });
    const consume = async () => {
      const s = await client.chat.completions.create({
        model: "kimi-k3",
        messages: START,
        tools: TOOLS,
        stream: true,
      });
      for await (const _ of s) {
        // drain
      }
    };
    await expect(consume()).rejects.toThrow();
    const plain = await raw(sim, body(), { "x-sim-fault": "cut" });
    expect(plain.error).toBeDefined();
    expect(() => JSON.parse(plain.text)).toThrow();
  });

  it("error: an OpenAI error object mid-stream, then the end; the SDK throws it; non-stream gets a 500", async () => {
    const r = await raw(sim, body(streamBody), { "x-sim-fault": "error=2" });
    const events = r.text.split("\n\n").filter((e) => e.startsWith("data: "));
    expect(events).toHaveLength(3);
    expect(JSON.parse(events[2]!.slice(6)).error.type).toBe("server_error");
    expect(r.text).not.toContain("[DONE]");
    const client = new OpenAI({
      baseURL: sim.url,
      apiKey: "k",
      maxRetries: 0,
      defaultHeaders: { "x-sim-fault": "error" },
    });
    const consume = async () => {
      const s = await client.chat.completions.create({
        model: "kimi-k3",
        messages: START,
        tools: TOOLS,
        stream: true,
      });
      for await (const _ of s) {
        // drain
      }
    };
    await expect(consume()).rejects.toBeInstanceOf(OpenAI.APIError);
    const plain = await raw(sim, body(), { "x-sim-fault": "error" });
    expect(plain.status).toBe(500);
  });

  it("no-usage: the usage chunk (stream) or field (non-stream) is missing", async () => {
    const s = await raw(sim, body(streamBody), { "x-sim-fault": "no-usage" });
    expect(s.text.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(s.text).not.toContain('"usage"');
    const n = await raw(sim, body(), { "x-sim-fault": "no-usage" });
    expect(JSON.parse(n.text).usage).toBeUndefined();
  });

  it("drip: small chunks, one every N ms", async () => {
    const r = await raw(sim, body({ ...streamBody, max_tokens: 12 }), { "x-sim-fault": "drip=15" });
    const events = sseJson(r.text);
    expect(events.length).toBeGreaterThanOrEqual(10);
    const span = r.chunkTimes.at(-1)! - r.chunkTimes[0]!;
    expect(span).toBeGreaterThanOrEqual((events.length - 2) * 15 * 0.8);
    expect(r.chunkTimes.length).toBeGreaterThan(5);
    for (const e of events)
      for (const c of e.choices) expect((c.delta?.content ?? "").length).toBeLessThanOrEqual(4);
  });

  it("faults from the profile apply from the start", async () => {
    const s = await startEngySim({
      port: 0,
      scenariosDir: SCENARIOS,
      profile: { faults: [{ fault: { kind: "503", retryAfterS: 2 }, count: 1 }] },
    });
    try {
      const first = await raw(s, body());
      expect(first.status).toBe(503);
      expect(first.headers["retry-after"]).toBe("2");
      expect((await raw(s, body())).status).toBe(200);
    } finally {
      await s.close();
    }
  });
});

describe("engy-sim latency", () => {
  it("latencyScale multiplies the profile's time to first token; 0 is instant", async () => {
    const profile = { models: { "kimi-k3": { ttft_ms: 400, tokens_per_s: 1000 } } };
    const [slow, fast] = await Promise.all([
      startEngySim({ port: 0, profile, latencyScale: 0.5 }),
      startEngySim({ port: 0, profile, latencyScale: 0 }),
    ]);
    try {
      const b = { model: "kimi-k3", messages: START, stream: true };
      const s = await raw(slow, b);
      const f = await raw(fast, b);
      expect(s.ttfb).toBeGreaterThanOrEqual(190);
      expect(f.ttfb).toBeLessThan(100);
      expect(s.text.endsWith("data: [DONE]\n\n")).toBe(true);
    } finally {
      await Promise.all([slow.close(), fast.close()]);
    }
  });
});
