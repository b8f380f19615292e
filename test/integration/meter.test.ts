/**
 * The meter against a real OpenAI-shaped upstream on loopback, real sockets, real SQLite.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { Agent, request } from "undici";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { floatPrices, pyFixed6 } from "../../src/meter/admission.js";
import { estimatePromptTokens } from "../../src/meter/estimate.js";
import {
  type Listener,
  loadAllowlist,
  loadPriceTable,
  Meter,
  type MeterOptions,
  meterArtifact,
  type Receipt,
} from "../../src/meter/index.js";
import { openDb, ReceiptRepo } from "../../src/store/index.js";
import { startTestUpstream, type TestUpstream } from "../helpers/meter-upstream.js";
import { freePort } from "../helpers/ports.js";
import { poller } from "../helpers/wait.js";

const waitFor = poller({ ms: 3_000, everyMs: 10 });

const allowlist = loadAllowlist();
const prices = loadPriceTable();
const OPERATOR_KEY = "sk-operator-secret";
// kimi-k3, pico-dollars per token
const P = 1_950_000n;
const C = 9_750_000n;
const CR = 195_000n;
const KIMI_F = floatPrices(loadPriceTable()).get("kimi-k3")!;

const dispatcher = new Agent({ connections: 200 });

interface Harness {
  up: TestUpstream;
  meter: Meter;
  listener: Listener;
  base: string;
  dbPath: string;
}

async function harness(extra: Partial<MeterOptions> = {}, upKey: string = OPERATOR_KEY): Promise<Harness> {
  const up = await startTestUpstream({ apiKey: upKey });
  const dbPath = join(mkdtempSync(join(tmpdir(), "meter-it-")), "v.sqlite");
  const meter = new Meter({
    upstreamUrl: up.url,
    apiKey: OPERATOR_KEY,
    allowlist,
    prices,
    receipts: new ReceiptRepo(openDb(dbPath)),
    retry: { statusStepMs: 5, streamStepMs: 5 },
    receiptFlushMs: 10,
    // One attempt's whole deadline (head and body): the slow-client stream below takes seconds.
    upstreamTimeoutMs: 60_000,
    ...extra,
  });
  const listener = await meter.listen("127.0.0.1", 0);
  return { up, meter, listener, base: `http://127.0.0.1:${listener.port}/v1`, dbPath };
}

// biome-ignore lint/suspicious/noExplicitAny: response JSON is inspected loosely in assertions
type Json = Record<string, any>;

async function post(base: string, token: string | null, body: unknown, signal?: AbortSignal) {
  const r = await request(`${base}/chat/completions`, {
    method: "POST",
    dispatcher,
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
    signal,
  });
  const chunks: Buffer[] = [];
  for await (const c of r.body) chunks.push(c as Buffer);
  const bytes = Buffer.concat(chunks);
  return {
    status: r.statusCode,
    headers: r.headers,
    bytes,
    json: () => JSON.parse(bytes.toString("utf8")) as Json,
  };
}

async function postRaw(base: string, token: string, text: string) {
  const r = await request(`${base}/chat/completions`, {
    method: "POST",
    dispatcher,
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: text,
  });
  await r.body.dump();
  return { status: r.statusCode };
}

async function get(base: string, path: string, token: string | null) {
  const r = await request(`${base}${path}`, {
    dispatcher,
    headers: token ? { authorization: `Bearer ${token}` } : {},
  });
  return { status: r.statusCode, headers: r.headers, json: (await r.body.json()) as Json };
}

const msgs = (text = "hello") => [{ role: "user", content: text }];

let h: Harness;
afterEach(async () => {
  await h?.meter.stop();
  await h?.up.close();
});

describe("meter: routes, auth and allowlist", () => {
  beforeEach(async () => {
    h = await harness();
  });

  it("serves health, the allowlist as an OpenAI model list, and 401s unknown or closed tokens", async () => {
    const health = await get(h.base.replace("/v1", ""), "/health", null);
    expect(health.status).toBe(200);
    expect(health.json.ok).toBe(true);
    const models = await get(h.base, "/models", null);
    expect(models.json.object).toBe("list");
    expect(models.json.data.map((m: { id: string }) => m.id)).toEqual(allowlist.models);
    expect(models.headers["x-trajrl-budget-remaining-usd"]).toBe("0.000000");

    const unknown = await post(h.base, "ep-nope", { model: "kimi-k3", messages: msgs() });
    expect(unknown.status).toBe(401);
    expect(unknown.json().error.type).toBe("auth");
    expect(unknown.headers["x-trajrl-budget-remaining-usd"]).toBe("0.000000");
    expect((await post(h.base, null, { model: "kimi-k3", messages: msgs() })).status).toBe(401);
    expect((await get(h.base, "/budget", "ep-nope")).status).toBe(401);

    const token = h.meter.mint("ep-auth", 0.3);
    expect(token).toMatch(/^ep-[A-Za-z0-9_-]{32}$/);
    expect((await post(h.base, token, { model: "kimi-k3", messages: msgs() })).status).toBe(200);
    const summary = await h.meter.close(token);
    expect(summary.calls).toBe(1);
    expect((await post(h.base, token, { model: "kimi-k3", messages: msgs() })).status).toBe(401);
    expect(h.up.hits).toBe(1);
  });

  it("keeps the last 256 closed episodes in memory, and no more; older receipts come from SQLite", async () => {
    const tokens: string[] = [];
    for (let i = 0; i < 300; i++) {
      const t = h.meter.mint(`ep-evict-${i}`, 0.3);
      tokens.push(t);
      if (i === 0) expect((await post(h.base, t, { model: "kimi-k3", messages: msgs() })).status).toBe(200);
      await h.meter.close(t);
    }
    expect(() => h.meter.summary(tokens[0]!)).toThrow(/unknown episode token/);
    // Out of memory, still on record: the receipts are read back from SQLite.
    expect(h.meter.receiptsFor("ep-evict-0").map((r) => [r.episode_id, r.seq, r.status])).toEqual([
      ["ep-evict-0", 1, 200],
    ]);
    expect(() => h.meter.summary(tokens[300 - 256 - 1]!)).toThrow(/unknown episode token/);
    expect(h.meter.summary(tokens[300 - 256]!).calls).toBe(0);
    expect(h.meter.summary(tokens[299]!).calls).toBe(0);
  });

  it("refuses a model outside the allowlist with 400 type allowlist, no upstream call and no row (a counter), as upstream", async () => {
    const token = h.meter.mint("ep-allow", 0.3);
    const r = await post(h.base, token, { model: "gpt-4o", messages: msgs() });
    expect(r.status).toBe(400);
    expect(r.json().error).toMatchObject({ type: "allowlist", code: "model_not_allowed" });
    expect(r.headers["x-trajrl-budget-remaining-usd"]).toBe("0.300000");
    expect((await postRaw(h.base, token, '{"model": "kimi-k3", "messages": [')).status).toBe(400);
    expect(h.up.hits).toBe(0);
    // A max_tokens upstream's int() cannot read is forwarded (the provider decides), as upstream does.
    h.up.faults.push({
      kind: "status",
      status: 400,
      body: '{"error":{"message":"max_tokens must be positive"}}',
    });
    const bad = await post(h.base, token, { model: "kimi-k3", messages: msgs(), max_tokens: -3 });
    expect(bad.status).toBe(400);
    expect(h.up.received[0]!.body.max_tokens).toBe(-3);
    const s = h.meter.summary(token);
    expect(s).toMatchObject({
      refused_model: 1,
      calls: 1,
      cost_usd: 0,
      refused: { model: 1, invalid_request: 1 },
    });
    expect(h.meter.receiptsFor("ep-allow").map((x) => [x.status, x.err])).toEqual([
      [400, '{"error":{"message":"max_tokens must be positive"}}'],
    ]);
  });
});

describe("meter: reservation, clamp, cap", () => {
  beforeEach(async () => {
    h = await harness();
  });

  it("forwards with the operator's key, settles on provider usage, returns upstream bytes unchanged", async () => {
    const token = h.meter.mint("ep-basic", 0.3);
    const body = { model: "kimi-k3", messages: msgs("count to three"), max_tokens: 300, temperature: 0 };
    const r = await post(h.base, token, body);
    expect(r.status).toBe(200);
    expect(r.bytes.equals(h.up.sent[0]!)).toBe(true);
    const fwd = h.up.received[0]!;
    expect(fwd.authorization).toBe(`Bearer ${OPERATOR_KEY}`);
    expect(fwd.body).toEqual({ ...body, max_tokens: 300 });

    // default test usage: 50 prompt (10 cached), 10 completion
    const cost = 40n * P + 10n * CR + 10n * C;
    // Non-stream: the header after the call, cap − spent, as upstream computes and formats it.
    const usdF = 40 * KIMI_F.prompt + 10 * KIMI_F.cacheRead + 10 * KIMI_F.completion;
    expect(r.headers["x-trajrl-budget-remaining-usd"]).toBe(pyFixed6(0.3 - usdF));
    const [rec] = h.meter.receiptsFor("ep-basic") as [Receipt];
    expect(rec).toMatchObject({
      seq: 1,
      model: "kimi-k3",
      status: 200,
      upstream_status: 200,
      stream: false,
      prompt_tokens: 50,
      cached_tokens: 10,
      completion_tokens: 10,
      usd_pico: cost.toString(),
      max_tokens: 300,
      clamped: false,
      retries: 0,
      request_id: "req-1",
      finish_reason: "stop",
      truncated: false,
      usage_estimated: false,
      error_code: null,
    });
    expect(rec.content_sha).toMatch(/^[0-9a-f]{16}$/);
    expect(BigInt(rec.reserved_pico)).toBe(BigInt(estimatePromptTokens(body)) * P + 300n * C);
    // The row as upstream writes it.
    const [row] = meterArtifact({
      episodeId: "ep-basic",
      priceTableHash: "h",
      summary: null,
      receipts: [rec],
    }).rows;
    expect(row).toMatchObject({
      model: "kimi-k3",
      status: 200,
      stream: false,
      prompt: 50,
      cached: 10,
      completion: 10,
      finish: "stop",
      err: null,
      retries: 0,
      max_tokens: 300,
      clamped: false,
      rid: "req-1",
      retry_rids: [],
      content_len: "Hello from the test upstream.".length,
      tool_n: 0,
      tool_sha: null,
    });
    expect(row!.content_sha).toBe(rec.content_sha);
    expect(rec.ttfb_ms).toBeGreaterThan(0);

    const budget = await get(h.base, "/budget", token);
    expect(budget.json).toEqual({
      cap_usd: 0.3,
      spent_usd: Number(pyFixed6(usdF)),
      reserved_usd: 0,
      remaining_usd: Number(pyFixed6(0.3 - usdF)),
    });
    expect(Number(cost) / 1e12).toBeCloseTo(usdF, 15);
    const act = h.meter.lastActivity(token);
    expect(act.calls).toBe(1);
    expect(act.lastCompletedAt).toBeGreaterThan(act.startedAt);
    expect(h.meter.summary(token).by_model["kimi-k3"]).toEqual({
      calls: 1,
      cost_usd: Number(cost) / 1e12,
      prompt_tokens: 50,
      cached_tokens: 10,
      completion_tokens: 10,
    });
  });

  it("forwards the client's bytes minus the rewritten knobs; the client's formatting does not move the estimate", async () => {
    const token = h.meter.mint("ep-raw", 0.3);
    // As Python's json.dumps writes it: spaces after separators, non-ASCII escaped.
    const text =
      '{"model": "kimi-k3", "messages": [{"role": "user", "content": "caf\\u00e9 \\u65e5\\u672c"}], "max_tokens": 100, "temperature": 0.5}';
    const r = await postRaw(h.base, token, text);
    expect(r.status).toBe(200);
    expect(h.up.received[0]!.raw).toBe(
      '{"max_tokens":100,"model": "kimi-k3","messages": [{"role": "user", "content": "caf\\u00e9 \\u65e5\\u672c"}],"temperature": 0.5}',
    );
    expect(BigInt(h.meter.receiptsFor("ep-raw")[0]!.reserved_pico)).toBe(
      BigInt(estimatePromptTokens(text)) * P + 100n * C,
    );
    expect(estimatePromptTokens(text)).toBe(
      estimatePromptTokens(JSON.parse(text) as Record<string, unknown>),
    );
    // A repeated top-level key: the provider must see the same model the meter priced.
    await postRaw(h.base, token, '{"model":"glm-5.2","messages":[],"model":"kimi-k3"}');
    expect(h.up.received[1]!.raw.match(/"model"/g)).toHaveLength(1);
    expect(h.up.received[1]!.body.model).toBe("kimi-k3");
  });

  it("clamps max_tokens to the largest that fits, and refuses with 402 (no upstream call) under 64", async () => {
    const body = { model: "kimi-k3", messages: msgs("x".repeat(600)) };
    const promptCost = BigInt(estimatePromptTokens(body)) * P;
    const capPico = promptCost + 1000n * C + C / 2n; // room for 1000.5 completion tokens
    const token = h.meter.mint("ep-clamp", Number(capPico) / 1e12);
    h.up.answer = { content: "ok", usage: { prompt_tokens: 1, completion_tokens: 0 } };
    const r = await post(h.base, token, body);
    expect(r.status).toBe(200);
    expect(h.up.received[0]!.body.max_tokens).toBe(1000);
    expect(h.meter.summary(token).clamped).toBe(1);
    expect(h.meter.receiptsFor("ep-clamp")[0]).toMatchObject({ clamped: true, max_tokens: 1000 });

    const tiny = h.meter.mint("ep-402", Number(promptCost + 63n * C) / 1e12);
    const refused = await post(h.base, tiny, { ...body, max_tokens: 10 });
    expect(refused.status).toBe(402);
    expect(refused.json().error).toMatchObject({ type: "cap", code: "cap_exceeded" });
    expect(refused.headers["x-trajrl-budget-remaining-usd"]).toBeDefined();
    expect(h.up.hits).toBe(1);
    expect(h.meter.summary(tiny)).toMatchObject({
      refused_cap: 1,
      calls: 0,
      cost_usd: 0,
      refused: { cap: 1 },
    });
    const rows = meterArtifact({
      episodeId: "ep-402",
      priceTableHash: "h",
      summary: null,
      receipts: h.meter.receiptsFor("ep-402"),
    }).rows;
    expect(rows).toHaveLength(1);
    expect(Object.keys(rows[0]!).sort()).toEqual(["err", "model", "status", "ts", "usd"]);
    expect(rows[0]).toMatchObject({ model: "kimi-k3", status: 402, usd: 0, err: "cap" });
  });

  it("a call that bills more than its reservation books overshoot; the episode goes on while room remains (upstream)", async () => {
    const token = h.meter.mint("ep-over", 0.3);
    h.up.answer = { content: "big", usage: { prompt_tokens: 10_000, completion_tokens: 5 } };
    const r = await post(h.base, token, { model: "kimi-k3", messages: msgs(), max_tokens: 100 });
    expect(r.status).toBe(200);
    const s = h.meter.summary(token);
    expect(s.overshoot_usd).toBeGreaterThan(0);
    expect(s.cost_usd).toBeCloseTo((10_000 * 1.95 + 5 * 9.75) / 1e6, 12);
    const next = await post(h.base, token, { model: "kimi-k3", messages: msgs(), max_tokens: 100 });
    expect(next.status).toBe(200);
    // Once spent passes the cap, every call is refused (upstream's rule: the room is negative).
    h.up.answer = { content: "huge", usage: { prompt_tokens: 200_000, completion_tokens: 5 } };
    expect((await post(h.base, token, { model: "kimi-k3", messages: msgs(), max_tokens: 100 })).status).toBe(
      200,
    );
    const after = await post(h.base, token, {
      model: "deepseek-v4.1-flash",
      messages: msgs(),
      max_tokens: 64,
    });
    expect(after.status).toBe(402);
    expect(after.json().error).toMatchObject({ type: "cap", code: "cap_exceeded" });
    expect(after.headers["x-trajrl-budget-remaining-usd"]).toBe("0.000000");
    expect(h.up.hits).toBe(3);
  });

  it("100 concurrent calls near the cap never spend more than the cap", async () => {
    // ten worst cases (~$0.00199 each) fit, then room for a clamped ~110-token call
    const capUsd = 0.021;
    const token = h.meter.mint("ep-100", capUsd);
    // Worst case billed: every call uses its whole max_tokens; the calls overlap in flight.
    h.up.answer = {
      content: "x",
      delayMs: 30,
      usage: (req) => ({ prompt_tokens: 20, completion_tokens: Number(req.max_tokens), cached_tokens: 0 }),
    };
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, k) =>
        post(h.base, token, { model: "kimi-k3", messages: msgs(`call ${k}`), max_tokens: 200 }),
      ),
    );
    const ok = results.filter((r) => r.status === 200).length;
    const refused = results.filter((r) => r.status === 402).length;
    expect(ok + refused).toBe(100);
    expect(ok).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
    expect(h.up.hits).toBe(ok);
    const s = h.meter.summary(token);
    expect(s.overshoot_usd).toBe(0);
    expect(s.reserved_usd).toBe(0);
    expect(s.cost_usd).toBeLessThanOrEqual(capUsd);
    expect(s.refused.cap).toBe(refused);
    expect(s.clamped).toBeGreaterThan(0);
    const receipts = h.meter.receiptsFor("ep-100");
    expect(receipts).toHaveLength(100);
    expect(receipts.map((r) => r.seq)).toEqual(Array.from({ length: 100 }, (_, k) => k + 1));
    const total = receipts.reduce((a, r) => a + BigInt(r.usd_pico), 0n);
    expect(total <= 21_000_000_000n).toBe(true);
    expect(Number(total) / 1e12).toBe(s.cost_usd);
  });
});

describe("meter: streaming", () => {
  beforeEach(async () => {
    h = await harness();
  });

  it("passes the stream through byte-identical, the usage chunk it asked for included (as upstream's meter does)", async () => {
    const token = h.meter.mint("ep-stream", 0.3);
    h.up.answer = { content: "one two three four", comments: true };
    const r = await post(h.base, token, {
      model: "glm-5.3-flash",
      messages: msgs(),
      stream: true,
      max_tokens: 50,
    });
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toMatch(/^text\/event-stream/);
    expect(h.up.received[0]!.body.stream_options).toEqual({ include_usage: true });
    const upstreamBytes = h.up.sent[0]!;
    expect(upstreamBytes.toString()).toContain('"choices":[]');
    expect(r.bytes.equals(upstreamBytes)).toBe(true);
    const [rec] = h.meter.receiptsFor("ep-stream") as [Receipt];
    expect(rec).toMatchObject({
      stream: true,
      prompt_tokens: 50,
      completion_tokens: 10,
      truncated: false,
      error_code: null,
    });
    // A stream's request id is its finish chunk's x_engy.request_id (upstream's order), else the header.
    expect(rec.request_id).toBe("engy-1");
  });

  it("a stream that arrives in one chunk is passed on whole and still read whole, in order", async () => {
    // A fast provider: every event and the usage chunk reach the meter in one read. The client gets
    // the events before the meter has parsed them; the answer it records is the same.
    const token = h.meter.mint("ep-one-chunk", 0.3);
    h.up.answer = { content: "one two three four", oneWrite: true };
    const r = await post(h.base, token, {
      model: "glm-5.3-flash",
      messages: msgs(),
      stream: true,
      max_tokens: 50,
    });
    expect(r.status).toBe(200);
    expect(r.bytes.equals(h.up.sent[0]!)).toBe(true);
    await post(h.base, token, { model: "glm-5.3-flash", messages: msgs(), max_tokens: 50 });
    const [streamed, plain] = h.meter.receiptsFor("ep-one-chunk") as [Receipt, Receipt];
    expect(streamed).toMatchObject({
      stream: true,
      completion_tokens: 10,
      truncated: false,
      error_code: null,
    });
    expect(streamed.content_sha).toMatch(/^[0-9a-f]{16}$/);
    expect(streamed.content_sha).toBe(plain.content_sha);
  });

  it("a slow client slows the provider: the stream is not read ahead into the meter's memory", async () => {
    // 32 MiB of events, far beyond the socket buffers: while the client reads nothing, the meter must
    // stop reading the provider (backpressure), so the provider cannot finish sending; once the client
    // reads, every byte arrives as sent and the call is booked on its usage.
    const token = h.meter.mint("ep-slow-client", 0.3);
    h.up.answer = { pieces: Array.from({ length: 4096 }, (_, k) => `${k} ${"x".repeat(8192)}`) };
    const r = await request(`${h.base}/chat/completions`, {
      method: "POST",
      dispatcher,
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify({ model: "glm-5.3-flash", messages: msgs(), stream: true, max_tokens: 50 }),
    });
    expect(r.statusCode).toBe(200);
    // Without backpressure the meter reads it all within this wait (it did, before the check was made).
    for (let k = 0; k < 30 && h.up.finished === 0; k++)
      await new Promise((resolve) => setTimeout(resolve, 100));
    expect(h.up.finished).toBe(0);
    const chunks: Buffer[] = [];
    for await (const c of r.body) chunks.push(c as Buffer);
    expect(h.up.finished).toBe(1);
    expect(Buffer.concat(chunks).equals(h.up.sent[0]!)).toBe(true);
    await h.meter.stop();
    const [rec] = h.meter.receiptsFor("ep-slow-client") as [Receipt];
    expect(rec).toMatchObject({ status: 200, stream: true, truncated: false, error_code: null });
    expect(rec.completion_tokens).toBeGreaterThan(0);
  });

  it("keeps upstream connections alive across calls, streamed or not", async () => {
    const token = h.meter.mint("ep-keepalive", 0.3);
    for (let k = 0; k < 20; k++) {
      const r = await post(h.base, token, { model: "glm-5.3-flash", messages: msgs(), stream: k % 2 === 0 });
      expect(r.status).toBe(200);
    }
    expect(h.up.connections).toBe(1);
  });

  it("CRLF streams, and clients that asked for usage or not, get every byte", async () => {
    const token = h.meter.mint("ep-crlf", 0.3);
    h.up.answer = { content: "alpha beta", crlf: true, comments: true };
    const stripped = await post(h.base, token, { model: "glm-5.3-flash", messages: msgs(), stream: true });
    expect(stripped.bytes.equals(h.up.sent[0]!)).toBe(true);
    const asked = await post(h.base, token, {
      model: "glm-5.3-flash",
      messages: msgs(),
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(asked.bytes.equals(h.up.sent[1]!)).toBe(true);
    h.up.answer = { content: "gamma", usageInFinishChunk: true };
    const inline = await post(h.base, token, { model: "glm-5.3-flash", messages: msgs(), stream: true });
    expect(inline.bytes.equals(h.up.sent[2]!)).toBe(true);
    const receipts = h.meter.receiptsFor("ep-crlf");
    expect(receipts.every((r) => r.completion_tokens === 10 && !r.usage_estimated)).toBe(true);
  });

  it("streamed tool calls get the same fingerprint as the same answer non-streamed", async () => {
    const token = h.meter.mint("ep-tools", 0.3);
    h.up.answer = { toolCalls: [{ name: "terminal", arguments: '{"command": "ls -la /app"}' }] };
    await post(h.base, token, { model: "qwen3.8-27b", messages: msgs(), stream: true });
    await post(h.base, token, { model: "qwen3.8-27b", messages: msgs() });
    const [a, b] = h.meter.receiptsFor("ep-tools") as [Receipt, Receipt];
    expect(a.tool_sha).toMatch(/^[0-9a-f]{16}$/);
    expect(a.tool_sha).toBe(b.tool_sha);
    expect(a.tool_calls).toBe(1);
    expect(a.finish_reason).toBe("tool_calls");
  });

  it("a cut stream is passed on as a cut and booked at its reservation (what the provider billed is not known)", async () => {
    const token = h.meter.mint("ep-cut", 0.3);
    h.up.answer = { content: "a b c d e f g" };
    h.up.faults.push({ kind: "cut", afterEvents: 4 });
    await expect(
      post(h.base, token, { model: "kimi-k3", messages: msgs(), stream: true, max_tokens: 100 }),
    ).rejects.toThrow();
    await waitFor(() => h.meter.receiptsFor("ep-cut").length === 1);
    const [rec] = h.meter.receiptsFor("ep-cut") as [Receipt];
    expect(rec).toMatchObject({
      status: 200,
      truncated: true,
      usage_estimated: true,
      error_code: "upstream_cut",
    });
    expect(rec.usd_pico).toBe(rec.reserved_pico);
    const s = h.meter.summary(token);
    expect(s.reserved_usd).toBe(0);
    // Upstream counts as errors the calls whose status was not 200 (issue 31 item 5); a cut 200
    // stream is counted apart.
    expect(s).toMatchObject({ calls: 1, errors: 0, cut: 1 });
  });

  it("a mid-stream error object passes through; a 200 without usage is billed $0 and recorded no-usage (upstream)", async () => {
    const token = h.meter.mint("ep-mid", 0.3);
    h.up.answer = { content: "a b c d" };
    h.up.faults.push({ kind: "mid_error", afterEvents: 3 });
    const r = await post(h.base, token, { model: "kimi-k3", messages: msgs(), stream: true });
    expect(r.bytes.toString()).toContain('"model crashed"');
    expect(r.bytes.equals(h.up.sent[0]!)).toBe(true);
    h.up.faults.push({ kind: "no_usage" });
    const r2 = await post(h.base, token, { model: "kimi-k3", messages: msgs(), stream: true });
    expect(r2.bytes.equals(h.up.sent[1]!)).toBe(true);
    h.up.faults.push({ kind: "no_usage" });
    const r3 = await post(h.base, token, { model: "kimi-k3", messages: msgs() });
    expect(r3.status).toBe(200);
    const [a, b, c] = h.meter.receiptsFor("ep-mid") as [Receipt, Receipt, Receipt];
    expect(a).toMatchObject({ error_code: "upstream_stream_error", truncated: true, usd_pico: "0" });
    expect(b).toMatchObject({ error_code: "no_usage", err: "no-usage", truncated: false, usd_pico: "0" });
    expect(c).toMatchObject({ error_code: "no_usage", err: "no-usage", usd_pico: "0" });
    expect(b.content_sha).toMatch(/^[0-9a-f]{16}$/);
    expect(h.meter.summary(token).cost_usd).toBe(0);
  });
});

describe("meter: upstream faults", () => {
  beforeEach(async () => {
    h = await harness();
  });

  it("retries 429 and 503 on upstream's schedule (k × step, Retry-After not read), keeping the retried ids", async () => {
    await h.meter.stop();
    await h.up.close();
    h = await harness({ retry: { statusStepMs: 60, streamStepMs: 40 } });
    const token = h.meter.mint("ep-retry", 0.3);
    h.up.faults.push({ kind: "status", status: 429, retryAfter: "10" }, { kind: "status", status: 503 });
    const t = performance.now();
    const r = await post(h.base, token, { model: "kimi-k3", messages: msgs() });
    expect(r.status).toBe(200);
    expect(performance.now() - t).toBeGreaterThanOrEqual(60 + 120 - 5);
    expect(h.up.hits).toBe(3);
    expect(h.meter.receiptsFor("ep-retry")[0]).toMatchObject({
      status: 200,
      retries: 2,
      retry_rids: ["req-1", "req-2"],
      request_id: "req-3",
    });

    // An error as the first stream chunk is retried too, with the same counter; the row keeps its text.
    h.up.faults.push({ kind: "status", status: 503 }, { kind: "first_event_error" });
    const s = await post(h.base, token, { model: "kimi-k3", messages: msgs(), stream: true });
    expect(s.bytes.toString()).not.toContain("concurrency");
    expect(s.bytes.toString()).toContain("[DONE]");
    const rec = h.meter.receiptsFor("ep-retry")[1]!;
    expect(rec).toMatchObject({ status: 200, retries: 2, stream: true });
    expect(rec.err).toContain("concurrency limit reached");
    expect(h.meter.summary(token).retries).toBe(4);
  });

  it("gives up after 6 status retries and passes the error on as it came, the operator's key redacted, unbilled", async () => {
    const token = h.meter.mint("ep-giveup", 0.3);
    for (let k = 0; k < 7; k++) h.up.faults.push({ kind: "status", status: 503 });
    const r = await post(h.base, token, { model: "kimi-k3", messages: msgs() });
    expect(r.status).toBe(503);
    expect(r.bytes.toString()).toBe(
      JSON.stringify({ error: { message: "fault 503", type: "server_error", code: 503 } }),
    );
    expect(h.up.hits).toBe(7);
    h.up.faults.push({ kind: "status", status: 400, body: `plain text failure for key ${OPERATOR_KEY}` });
    const bad = await post(h.base, token, { model: "kimi-k3", messages: msgs() });
    expect(bad.status).toBe(400);
    expect(bad.bytes.toString()).toBe("plain text failure for key [redacted]");
    expect(bad.headers["x-trajrl-budget-remaining-usd"]).toBe("0.300000");
    expect(h.meter.summary(token)).toMatchObject({ calls: 2, errors: 2, cost_usd: 0, reserved_usd: 0 });
    expect(h.meter.receiptsFor("ep-giveup")[1]!.err).toBe("plain text failure for key [redacted]");
  });

  it("a client that leaves does not end the call: the answer is read to its end and booked on its usage", async () => {
    const token = h.meter.mint("ep-gone", 0.3);
    h.up.answer = {
      content: "slow answer",
      delayMs: 400,
      usage: { prompt_tokens: 5000, completion_tokens: 7 },
    };
    const ac = new AbortController();
    const p = post(h.base, token, { model: "kimi-k3", messages: msgs() }, ac.signal);
    await waitFor(() => h.up.hits === 1);
    ac.abort();
    await expect(p).rejects.toThrow();
    await waitFor(() => h.meter.receiptsFor("ep-gone").length === 1);
    expect(h.up.received[0]!.aborted).toBe(false);
    const [rec] = h.meter.receiptsFor("ep-gone") as [Receipt];
    expect(rec).toMatchObject({ prompt_tokens: 5000, completion_tokens: 7, usage_estimated: false });
    expect(BigInt(rec.usd_pico)).toBe(5000n * P + 7n * C);
    expect(h.meter.summary(token).reserved_usd).toBe(0);
    // Upstream's meter settles a body answer before writing it: its view has the call settled too.
    expect(h.meter.budget(token).reserved_usd).toBe(0);

    // A stream whose client left: upstream's handler fails writing to it and never settles, so its
    // view keeps the reservation (and refuses as upstream would); the exact ledger books the usage.
    const ac2 = new AbortController();
    const p2 = post(
      h.base,
      token,
      { model: "kimi-k3", messages: msgs(), stream: true, max_tokens: 100 },
      ac2.signal,
    );
    await waitFor(() => h.up.hits === 2);
    ac2.abort();
    await expect(p2).rejects.toThrow();
    await waitFor(() => h.meter.receiptsFor("ep-gone").length === 2);
    expect(h.meter.receiptsFor("ep-gone")[1]).toMatchObject({
      prompt_tokens: 5000,
      error_code: "client_disconnected",
    });
    expect(h.meter.summary(token).reserved_usd).toBe(0);
    expect(h.meter.budget(token).reserved_usd).toBeGreaterThan(0);
  });

  it("a call whose answer never comes is booked at its reservation when the provider timeout ends it", async () => {
    await h.meter.stop();
    await h.up.close();
    h = await harness({ upstreamTimeoutMs: 300 });
    const token = h.meter.mint("ep-timeout", 0.3);
    h.up.faults.push({ kind: "hang" });
    const r = await post(h.base, token, { model: "kimi-k3", messages: msgs(), max_tokens: 100 });
    expect(r.status).toBe(504);
    const [rec] = h.meter.receiptsFor("ep-timeout") as [Receipt];
    expect(rec).toMatchObject({ error_code: "upstream_timeout", usage_estimated: true });
    expect(rec.usd_pico).toBe(rec.reserved_pico);
    expect(BigInt(rec.usd_pico) > 0n).toBe(true);
  });

  it("close() aborts the episode's calls in flight and summarises them once settled, as their receipts book them", async () => {
    const token = h.meter.mint("ep-closing", 0.3);
    h.up.faults.push({ kind: "hang" }, { kind: "hang" });
    const plain = post(h.base, token, { model: "kimi-k3", messages: msgs() });
    const streamed = post(h.base, token, {
      model: "kimi-k3",
      messages: msgs(),
      stream: true,
      max_tokens: 100,
    });
    await waitFor(() => h.up.hits === 2);
    // Issue 36 item 6: the summary once the aborted calls settled — it used to be taken before, and
    // said 0 calls and $0 while their receipts booked their reservations.
    const summary = await h.meter.close(token);
    const recs = h.meter.receiptsFor("ep-closing");
    expect(recs).toHaveLength(2);
    for (const rec of recs)
      expect(rec).toMatchObject({ status: 503, error_code: "episode_closed", usage_estimated: true });
    const booked = recs.reduce((a, r) => a + BigInt(r.usd_pico), 0n);
    expect(booked > 0n).toBe(true);
    expect(summary).toMatchObject({
      calls: 2,
      errors: 2,
      reserved_usd: 0,
      cost_usd: Number(booked) / 1e12,
      estimated_usd: Number(booked) / 1e12,
    });
    expect(summary.longest_wait_s).toBeGreaterThan(0);
    for (const r of await Promise.all([plain, streamed])) {
      expect(r.status).toBe(503);
      expect(r.json().error.code).toBe("episode_closed");
    }
    await waitFor(() => h.up.received.every((x) => x.aborted));
    expect(h.meter.summary(token)).toEqual(summary);
    expect(await h.meter.close(token)).toEqual(summary);
    expect(h.meter.lastActivity(token).calls).toBe(2);
  });

  it("the provider refusing the operator's key is a 502, never a 401 the policy would take for its token", async () => {
    await h.meter.stop();
    await h.up.close();
    h = await harness({}, "sk-some-other-key");
    const token = h.meter.mint("ep-key", 0.3);
    const r = await post(h.base, token, { model: "kimi-k3", messages: msgs() });
    expect(r.status).toBe(502);
    expect(r.json().error.code).toBe("upstream_auth_failed");
  });

  it("an unreachable upstream is a 502 at once (upstream does not retry a connection), unbilled", async () => {
    const port = await freePort();
    await h.meter.stop();
    await h.up.close();
    h = await harness({ upstreamUrl: `http://127.0.0.1:${port}/v1` });
    const token = h.meter.mint("ep-down", 0.3);
    const r = await post(h.base, token, { model: "kimi-k3", messages: msgs() });
    expect(r.status).toBe(502);
    expect(r.json().error.code).toBe("upstream_unreachable");
    expect(h.meter.receiptsFor("ep-down")[0]).toMatchObject({
      retries: 0,
      upstream_status: null,
      usd_pico: "0",
    });
  });
});

describe("meter: receipts, listeners, SDK", () => {
  beforeEach(async () => {
    h = await harness();
  });

  it("every receipt is in SQLite after stop(), equal to the in-memory ones", async () => {
    const token = h.meter.mint("ep-db", 0.3);
    await post(h.base, token, { model: "kimi-k3", messages: msgs() });
    await post(h.base, token, { model: "glm-5.2", messages: msgs(), stream: true });
    await post(h.base, token, { model: "nope", messages: msgs() });
    h.up.faults.push({ kind: "status", status: 500 });
    await post(h.base, token, { model: "glm-5.3", messages: msgs() });
    const mem = h.meter.receiptsFor("ep-db");
    await h.meter.stop();
    const repo = new ReceiptRepo(openDb(h.dbPath));
    const stored = repo.listByEpisode("ep-db");
    expect(stored).toHaveLength(3);
    // SQLite keeps the receipt's columns; upstream's row fields live in memory and meter.json.
    const columns = (r: Receipt) => {
      const { ts: _ts, err: _err, retry_rids: _rr, content_len: _cl, ...rest } = r;
      return rest;
    };
    expect(stored.map(columns)).toEqual(mem.map(columns));
    expect(stored.map((r) => r.status)).toEqual([200, 200, 500]);
  });

  it("serves on several listeners; closing one leaves the others", async () => {
    const second = await h.meter.listen("127.0.0.1", 0);
    const token = h.meter.mint("ep-two", 0.3);
    const base2 = `http://127.0.0.1:${second.port}/v1`;
    expect((await post(base2, token, { model: "kimi-k3", messages: msgs() })).status).toBe(200);
    await expect(h.meter.listen("127.0.0.1", second.port)).rejects.toMatchObject({
      code: "meter_listen_failed",
    });
    await second.close();
    await expect(post(base2, token, { model: "kimi-k3", messages: msgs() })).rejects.toThrow();
    expect((await post(h.base, token, { model: "kimi-k3", messages: msgs() })).status).toBe(200);
  });

  it("a listener bound to one episode's token answers that token alone", async () => {
    const mine = h.meter.mint("ep-mine", 0.3);
    const other = h.meter.mint("ep-other", 0.3);
    const bound = await h.meter.listen("127.0.0.1", 0, mine);
    const base2 = `http://127.0.0.1:${bound.port}/v1`;
    const refused = await post(base2, other, { model: "kimi-k3", messages: msgs() });
    expect(refused.status).toBe(401);
    expect(refused.json().error.type).toBe("auth");
    expect((await get(base2, "/budget", other)).status).toBe(401);
    expect((await post(base2, mine, { model: "kimi-k3", messages: msgs() })).status).toBe(200);
    expect((await get(base2, "/budget", mine)).status).toBe(200);
    // the other token is live and still spends on the unbound listener; nothing was billed to it
    expect(h.meter.summary(other)).toMatchObject({ calls: 0, errors: 0, cost_usd: 0 });
    expect((await post(h.base, other, { model: "kimi-k3", messages: msgs() })).status).toBe(200);
    expect(h.up.hits).toBe(2);
    await bound.close();
  });

  it("the openai SDK works through the meter unchanged, stream and non-stream, with tool calls", async () => {
    const token = h.meter.mint("ep-sdk", 0.3);
    h.up.answer = { toolCalls: [{ name: "read_file", arguments: '{"path": "/workspace/SKILL.md"}' }] };
    const client = new OpenAI({ baseURL: h.base, apiKey: token, maxRetries: 0 });
    const done = await client.chat.completions.create({
      model: "glm-5.3-flash",
      messages: [{ role: "user", content: "go" }],
    });
    expect(done.choices[0]!.message.tool_calls?.[0]).toMatchObject({ function: { name: "read_file" } });
    const stream = await client.chat.completions.create({
      model: "glm-5.3-flash",
      messages: [{ role: "user", content: "go" }],
      stream: true,
    });
    let args = "";
    for await (const chunk of stream)
      args += chunk.choices[0]?.delta.tool_calls?.[0]?.function?.arguments ?? "";
    expect(JSON.parse(args)).toEqual({ path: "/workspace/SKILL.md" });
    await expect(
      client.chat.completions.create({ model: "gpt-5", messages: [{ role: "user", content: "go" }] }),
    ).rejects.toMatchObject({ status: 400 });
    expect(h.meter.summary(token)).toMatchObject({ calls: 2, refused_model: 1 });
  });
});

describe("meter: upstream's details, and the bounds", () => {
  beforeEach(async () => {
    h = await harness();
  });

  it("the budget header: a stream's is taken before its own reservation, a body's after it settled (cap − spent)", async () => {
    const token = h.meter.mint("ep-hdr", 0.3);
    h.up.answer = { content: "slow", delayMs: 300, usage: { prompt_tokens: 100, completion_tokens: 10 } };
    const slow = post(h.base, token, { model: "kimi-k3", messages: msgs("slow one"), max_tokens: 1000 });
    await waitFor(() => h.up.hits === 1);
    const held = h.meter.budget(token).reserved_usd;
    expect(held).toBeGreaterThan(0);
    h.up.answer = { content: "quick", usage: { prompt_tokens: 100, completion_tokens: 10 } };
    const stream = await post(h.base, token, {
      model: "kimi-k3",
      messages: msgs(),
      stream: true,
      max_tokens: 1000,
    });
    expect(stream.headers["x-trajrl-budget-remaining-usd"]).toBe(pyFixed6(0.3 - held));
    const usdF = 100 * KIMI_F.prompt + 10 * KIMI_F.completion;
    const plain = await post(h.base, token, { model: "kimi-k3", messages: msgs(), max_tokens: 1000 });
    // After the call: cap − spent, the slow call's reservation left out, as upstream's meter does.
    expect(plain.headers["x-trajrl-budget-remaining-usd"]).toBe(pyFixed6(0.3 - usdF - usdF));
    await slow;
  });

  it("rows per episode are bounded as upstream bounds them (2000 by default); the counters go on", async () => {
    await h.meter.stop();
    await h.up.close();
    h = await harness({ maxRowsPerEpisode: 3 });
    const token = h.meter.mint("ep-rows", 0.3);
    for (let k = 0; k < 5; k++) await post(h.base, token, { model: "glm-5.3-flash", messages: msgs() });
    expect(h.meter.receiptsFor("ep-rows")).toHaveLength(3);
    expect(h.meter.summary(token)).toMatchObject({ calls: 5, rows_dropped: 2 });
  });

  it("falls back to an ephemeral port when asked and the port is taken (as upstream's meter does)", async () => {
    const busy = await h.meter.listen("127.0.0.1", 0);
    const other = await h.meter.listen("127.0.0.1", busy.port, undefined, { fallbackToEphemeral: true });
    expect(other.port).not.toBe(busy.port);
    expect(other.port).toBeGreaterThan(0);
    const token = h.meter.mint("ep-port", 0.3);
    const r = await post(`http://127.0.0.1:${other.port}/v1`, token, { model: "kimi-k3", messages: msgs() });
    expect(r.status).toBe(200);
    await other.close();
    await busy.close();
  });

  it("calls whose worst cases do not fit together wait for each other; small ones run side by side", async () => {
    // Each call's worst case (its bytes as tokens, 8192 completion) fits the cap alone, not two at once.
    const big = { model: "kimi-k3", messages: msgs("9".repeat(9000)), max_tokens: 2000 };
    const bound = 9000 + 200;
    const capUsd = (bound * 1.95 + 2000 * 9.75) * 1.6e-6;
    const token = h.meter.mint("ep-expo", capUsd);
    h.up.answer = { content: "ok", delayMs: 80, usage: { prompt_tokens: 9050, completion_tokens: 5 } };
    const statuses = await Promise.all(Array.from({ length: 3 }, () => post(h.base, token, big)));
    expect(statuses.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(h.up.maxInflight).toBe(1);
    expect(h.meter.summary(token).waited).toBe(2);
    // One call at a time (an agent's loop) never waits: with nothing in flight, upstream's rule alone decides.
    const sequential = h.meter.mint("ep-expo-seq", capUsd);
    for (let k = 0; k < 3; k++) expect((await post(h.base, sequential, big)).status).toBe(200);
    expect(h.meter.summary(sequential).waited).toBe(0);

    const roomy = h.meter.mint("ep-roomy", 1);
    h.up.maxInflight = 0;
    await Promise.all(
      Array.from({ length: 3 }, () => post(h.base, roomy, { model: "glm-5.3-flash", messages: msgs() })),
    );
    expect(h.up.maxInflight).toBeGreaterThan(1);
    expect(h.meter.summary(roomy).waited).toBe(0);
  });

  it("bounds: calls in flight per token, body size (no row, a counter), and a request that never finishes arriving", async () => {
    await h.meter.stop();
    await h.up.close();
    h = await harness({ maxCallsPerToken: 2, maxBodyBytes: 64 * 1024, requestTimeoutMs: 500 });
    const token = h.meter.mint("ep-bounds", 1);
    h.up.answer = { content: "ok", delayMs: 60 };
    const rs = await Promise.all(
      Array.from({ length: 6 }, () => post(h.base, token, { model: "glm-5.3-flash", messages: msgs() })),
    );
    expect(rs.every((r) => r.status === 200)).toBe(true);
    expect(h.up.maxInflight).toBe(2);

    const big = await post(h.base, token, { model: "glm-5.3-flash", messages: msgs("x".repeat(70 * 1024)) });
    expect(big.status).toBe(413);
    expect(h.meter.summary(token).refused).toMatchObject({ body_too_large: 1 });
    expect(h.meter.receiptsFor("ep-bounds")).toHaveLength(6);

    // Headers and half a body, then silence: the meter cuts the connection after requestTimeoutMs.
    const { connect } = await import("node:net");
    const sock = connect(h.listener.port, "127.0.0.1");
    await new Promise<void>((r) => sock.once("connect", () => r()));
    sock.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${token}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"model":`,
    );
    const closed = await new Promise<boolean>((r) => {
      sock.once("close", () => r(true));
      sock.resume();
    });
    expect(closed).toBe(true);
    expect(h.meter.receiptsFor("ep-bounds")).toHaveLength(6);
  });

  it("a listener holds a bounded number of connections; more are closed at once", async () => {
    await h.meter.stop();
    await h.up.close();
    h = await harness({ maxConnections: 4 });
    const { connect } = await import("node:net");
    const socks = await Promise.all(
      Array.from({ length: 6 }, async () => {
        const s = connect(h.listener.port, "127.0.0.1");
        await new Promise<void>((r) => s.once("connect", () => r()));
        return s;
      }),
    );
    const closed = await Promise.all(
      socks.map(
        (s) =>
          new Promise<boolean>((r) => {
            s.once("close", () => r(true));
            s.resume();
            setTimeout(() => r(false), 500);
          }),
      ),
    );
    expect(closed.filter(Boolean)).toHaveLength(2);
    for (const s of socks) s.destroy();
  });
});

afterAll(async () => {
  await dispatcher.close();
});
beforeAll(() => undefined);

/** A loopback port nobody listens on: bind one of our own, then release it. */
