/**
 * The meter's answer side against a real OpenAI-shaped upstream on loopback: one deadline per
 * provider attempt (upstream's total timeout), clients that stop reading (cut after the idle
 * window, the provider's connection with them), and the answer bytes an episode may hold.
 */
import type { DestinationStream } from "pino";
import { Agent, type Dispatcher, request } from "undici";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { createLogger } from "../../src/log.js";
import {
  loadAllowlist,
  loadPriceTable,
  Meter,
  type MeterOptions,
  type Receipt,
} from "../../src/meter/index.js";
import { startTestUpstream, type TestUpstream } from "../helpers/meter-upstream.js";
import { poller } from "../helpers/wait.js";

const waitFor = poller({ ms: 10_000, everyMs: 20 });

const MiB = 1024 * 1024;
const dispatcher = new Agent({ connections: 64 });

let up: TestUpstream | undefined;
let meter: Meter | undefined;

async function start(
  extra: Partial<MeterOptions>,
  upstream: { lean?: boolean } = {},
): Promise<{ base: string; token: string }> {
  up = await startTestUpstream({ apiKey: "sk-op", ...upstream });
  meter = new Meter({
    upstreamUrl: up.url,
    apiKey: "sk-op",
    allowlist: loadAllowlist(),
    prices: loadPriceTable(),
    retry: { statusStepMs: 5, streamStepMs: 5 },
    ...extra,
  });
  const l = await meter.listen("127.0.0.1", 0);
  return { base: `http://127.0.0.1:${l.port}/v1`, token: meter.mint("ep-pace", 1) };
}

afterEach(async () => {
  await meter?.stop();
  await up?.close();
  meter = undefined;
  up = undefined;
});

afterAll(async () => {
  await dispatcher.destroy();
});

/** A call whose answer the client does not read: the response head, its body left alone. */
function open(base: string, token: string, body: unknown): Promise<Dispatcher.ResponseData> {
  return request(`${base}/chat/completions`, {
    method: "POST",
    dispatcher,
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
}

async function readAll(r: Dispatcher.ResponseData): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of r.body) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

const receipts = (): Receipt[] => meter!.receiptsFor("ep-pace");
const msgs = [{ role: "user", content: "hello" }];

describe("the provider's deadline: one per attempt, head and body (upstream's ClientTimeout(total=900))", () => {
  it("a stream still arriving at the deadline is cut there, although it was never silent that long", async () => {
    // Before issue 31 item 4 the deadline was per phase (time to the head, longest silence): this
    // stream, an event every 150 ms for ~2.4 s, went through whole under a 1 s setting.
    const { base, token } = await start({ upstreamTimeoutMs: 1_000 });
    up!.answer = { pieces: Array.from({ length: 16 }, (_, k) => `w${k} `), gapMs: 150 };
    const r = await open(base, token, {
      model: "glm-5.3-flash",
      messages: msgs,
      stream: true,
      max_tokens: 64,
    });
    expect(r.statusCode).toBe(200);
    await expect(readAll(r)).rejects.toThrow();
    await waitFor(() => receipts().length === 1);
    expect(receipts()[0]).toMatchObject({
      status: 200,
      truncated: true,
      usage_estimated: true,
      error_code: "upstream_timeout",
    });
    expect(up!.received[0]!.aborted).toBe(true);
    expect(meter!.summary(token)).toMatchObject({ calls: 1, errors: 0, cut: 1, reserved_usd: 0 });
  });
});

describe("a client that stops reading (issue 36 items 4 and 10: the policy's doing)", () => {
  it("a paused stream is cut after the idle window, and its provider connection closed", async () => {
    const { base, token } = await start({ clientIdleMs: 400 });
    // 32 MiB of events over ~10 s: far beyond the socket buffers, so the meter stops reading the
    // provider, which is still sending when the idle window ends.
    up!.answer = {
      pieces: Array.from({ length: 1024 }, (_, k) => `${k} ${"x".repeat(32 * 1024)}`),
      gapMs: 10,
    };
    const r = await open(base, token, {
      model: "glm-5.3-flash",
      messages: msgs,
      stream: true,
      max_tokens: 50,
    });
    expect(r.statusCode).toBe(200);
    // The client reads nothing. Before the idle deadline the stream held one of the provider
    // connections until the episode closed.
    await waitFor(() => receipts().length === 1);
    expect(receipts()[0]).toMatchObject({
      status: 200,
      stream: true,
      truncated: true,
      usage_estimated: true,
      error_code: "client_not_reading",
    });
    await waitFor(() => up!.received[0]!.aborted && up!.inflight === 0);
    expect(up!.finished).toBe(0);
    await expect(readAll(r)).rejects.toThrow();
    // Not the provider's failure: a 200 cut by the meter, counted with the cut answers.
    expect(meter!.summary(token)).toMatchObject({ calls: 1, errors: 0, cut: 1, reserved_usd: 0 });
  });

  it("a paused stream waits for its client once, however many chunks the provider's parser already held", async () => {
    // A fast provider: the head and hundreds of small events in one read of the meter's socket, held
    // until the relay attaches, then written at once past the socket's buffer. Each used to start a
    // wait of its own for the client (drain, close and abort listeners past Node's limit:
    // MaxListenersExceededWarning in every busy evaluation).
    const { base, token } = await start({ clientIdleMs: 10_000 }, { lean: true });
    up!.answer = { pieces: Array.from({ length: 800 }, (_, k) => `${k} ${"x".repeat(40)}`) };
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on("warning", onWarning);
    try {
      const r = await open(base, token, {
        model: "glm-5.3-flash",
        messages: msgs,
        stream: true,
        max_tokens: 50,
      });
      expect(r.statusCode).toBe(200);
      const text = (await readAll(r)).toString();
      expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
      expect(text).toContain(`"799 ${"x".repeat(40)}"`);
      await waitFor(() => receipts().length === 1);
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off("warning", onWarning);
    }
    expect(warnings).not.toContain("MaxListenersExceededWarning");
    expect(receipts()[0]).toMatchObject({ status: 200, truncated: false, error_code: null });
  });

  it("unread non-stream answers: an episode holds at most its answer bytes, then its calls fail (429, the policy's)", async () => {
    const { base, token } = await start({ maxAnswerBytesPerToken: 24 * MiB });
    // 16 MiB answers (a long completion with logprobs is this size): one fits the bound, two do not.
    // Before the bound, every unread answer stayed in the meter's memory until the episode closed.
    up!.answer = { content: "y".repeat(16 * MiB) };
    const body = { model: "glm-5.3-flash", messages: msgs, max_tokens: 64 };
    const first = await open(base, token, body);
    expect(first.statusCode).toBe(200);
    // The first answer is not read, and the second does not fit beside it.
    const second = await open(base, token, body);
    expect(second.statusCode).toBe(429);
    expect(JSON.parse((await readAll(second)).toString()).error.code).toBe("answer_bytes_limit");
    await waitFor(() => receipts().length === 2);
    expect(receipts()[1]).toMatchObject({
      status: 429,
      upstream_status: 200,
      usage_estimated: true,
      error_code: "answer_bytes_limit",
    });
    // Booked at its reservation (the provider billed it), and not the provider's failure.
    expect(BigInt(receipts()[1]!.usd_pico) > 0n).toBe(true);
    expect(meter!.summary(token)).toMatchObject({ calls: 2, errors: 1, cut: 0 });
    // Once the first is read, its bytes are free: the next answer of that size goes through.
    expect((await readAll(first)).equals(up!.sent[0]!)).toBe(true);
    const third = await open(base, token, body);
    expect(third.statusCode).toBe(200);
    expect((await readAll(third)).equals(up!.sent[2]!)).toBe(true);
  });

  it("an unread non-stream answer is cut after the idle window, and its bytes freed", async () => {
    const lines: string[] = [];
    const destination: DestinationStream = { write: (l: string) => void lines.push(l) };
    const { base, token } = await start({
      maxAnswerBytesPerToken: 24 * MiB,
      clientIdleMs: 300,
      log: createLogger({ level: "info", destination }),
    });
    up!.answer = { content: "y".repeat(16 * MiB) };
    const body = { model: "glm-5.3-flash", messages: msgs, max_tokens: 64 };
    const first = await open(base, token, body);
    expect(first.statusCode).toBe(200);
    // The client reads nothing: the meter closes its connection (before: held until the episode
    // closed). A paused client sees the cut once it reads again.
    await waitFor(() => lines.some((l) => l.includes('"meter.client_not_reading"')));
    expect(
      await readAll(first).then(
        () => "read whole",
        () => "cut",
      ),
    ).toBe("cut");
    // Its bytes were given back: an answer of the same size fits again.
    const second = await open(base, token, body);
    expect(second.statusCode).toBe(200);
    expect((await readAll(second)).equals(up!.sent[1]!)).toBe(true);
    // It was answered and booked on its usage before it was sent: the receipt stands.
    expect(receipts().map((r) => [r.status, r.error_code])).toEqual([
      [200, null],
      [200, null],
    ]);
  });
});
