/**
 * The knobs that decide an answer's mode and its bill, against providers that read them otherwise
 * than Python's truthiness (issue 36 items 1 and 2): a lax pydantic validator (vLLM, SGLang) and a
 * JavaScript server, on loopback, each billing what it generates. Whatever a policy writes, the
 * meter must book what the provider billed, and the provider must not bill past the cap.
 */
import { Agent, request } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { loadAllowlist, loadPriceTable, Meter, picoToUsd } from "../../src/meter/index.js";
import { type KnobProvider, type Reader, startKnobProvider } from "../helpers/knob-providers.js";

const dispatcher = new Agent({ connections: 64 });
const READERS: Reader[] = ["pydantic", "javascript"];

/** `stream` as policies may write it: what Python, pydantic and JavaScript disagree on. */
const STREAM_VALUES: unknown[] = [true, false, "no", "false", "0", "", "off", "yes", 0, 1, [], {}, [0], null];
/** `n` as policies may write it. */
const N_VALUES: unknown[] = [1, 2, 2.0, "2", "8.0", true, 0, -1, 129, null, "x"];

let provider: KnobProvider | undefined;
let meter: Meter | undefined;
afterEach(async () => {
  await meter?.stop();
  await provider?.close();
  meter = provider = undefined;
});

async function start(reader: Reader): Promise<string> {
  provider = await startKnobProvider(reader);
  meter = new Meter({
    upstreamUrl: provider.url,
    apiKey: "sk-knobs",
    allowlist: loadAllowlist(),
    prices: loadPriceTable(),
    retry: { statusStepMs: 5, streamStepMs: 5 },
    upstreamTimeoutMs: 10_000,
  });
  const l = await meter.listen("127.0.0.1", 0);
  return `http://127.0.0.1:${l.port}/v1`;
}

async function post(base: string, token: string, body: Record<string, unknown>) {
  const r = await request(`${base}/chat/completions`, {
    method: "POST",
    dispatcher,
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  const text = await r.body.text();
  return { status: r.statusCode, text };
}

/** Every forwarded call's booking next to what the provider billed for it, in order. */
function bookedVsBilled(episodeId: string): { booked: bigint[]; billed: bigint[] } {
  const receipts = meter!.receiptsFor(episodeId).filter((r) => r.upstream_status !== null);
  return { booked: receipts.map((r) => BigInt(r.usd_pico)), billed: provider!.billed.map((c) => c.pico) };
}

describe.each(READERS)("the request knobs against a %s reader (issue 36 items 1–2)", (reader) => {
  it("every spelling of stream is answered in the mode the meter read and booked as the provider billed it", async () => {
    const base = await start(reader);
    const token = meter!.mint("ep-stream", 10);
    for (const stream of STREAM_VALUES) {
      const r = await post(base, token, {
        model: "glm-5.3-flash",
        messages: [{ role: "user", content: `stream ${JSON.stringify(stream)}` }],
        max_tokens: 50,
        stream,
        stream_options: { include_usage: "no" },
      });
      expect(r.status, JSON.stringify(stream)).toBe(200);
    }
    const summary = await meter!.close(token);
    const { booked, billed } = bookedVsBilled("ep-stream");
    expect(billed).toHaveLength(STREAM_VALUES.length);
    expect(booked).toEqual(billed);
    expect(provider!.billed.every((c) => c.usageReported)).toBe(true);
    expect(summary.cost_usd).toBe(picoToUsd(provider!.total()));
    expect(summary.cost_usd).toBeGreaterThan(0);
  });

  it("n: an integer from 1 to 128 is reserved and booked as billed; any other spelling is refused before the provider", async () => {
    const base = await start(reader);
    const token = meter!.mint("ep-n", 10);
    const statuses: number[] = [];
    for (const n of N_VALUES) {
      const r = await post(base, token, {
        model: "glm-5.3-flash",
        messages: [{ role: "user", content: `n ${JSON.stringify(n)}` }],
        max_tokens: 40,
        n,
      });
      statuses.push(r.status);
    }
    await meter!.close(token);
    // Forwarded: 1, 2, 2.0, null (one completion); refused with a 400: the rest.
    expect(statuses).toEqual([200, 200, 200, 400, 400, 400, 400, 400, 400, 200, 400]);
    expect(provider!.billed.map((c) => c.n)).toEqual([1, 2, 2, 1]);
    expect(provider!.refused).toBe(0);
    const { booked, billed } = bookedVsBilled("ep-n");
    expect(booked).toEqual(billed);
  });

  it("n completions are reserved: a lone call cannot spend past the cap, nor calls together", async () => {
    const base = await start(reader);
    const cap = 0.05;
    // One call alone in flight, n = 50, no max_tokens (8192 each, $4 at kimi-k3's price before the bound).
    const lone = meter!.mint("ep-lone", cap);
    const r = await post(base, lone, {
      model: "kimi-k3",
      messages: [{ role: "user", content: "go" }],
      n: 50,
    });
    expect(r.status).toBe(200);
    await meter!.close(lone);
    const loneBilled = provider!.total();
    expect(provider!.billed[0]!.n).toBe(50);
    expect(picoToUsd(loneBilled)).toBeLessThanOrEqual(cap);
    expect(bookedVsBilled("ep-lone").booked).toEqual(bookedVsBilled("ep-lone").billed);
    // Four calls at once, n = 8 each.
    const together = meter!.mint("ep-together", cap);
    const answers = await Promise.all(
      Array.from({ length: 4 }, () =>
        post(base, together, { model: "kimi-k3", messages: [{ role: "user", content: "go" }], n: 8 }),
      ),
    );
    await meter!.close(together);
    expect(answers.map((a) => a.status)).toContain(200);
    const togetherBilled = provider!.total() - loneBilled;
    console.log(
      `[${reader}] n=50 alone: provider billed $${picoToUsd(loneBilled).toFixed(4)}; 4 × n=8 at once: $${picoToUsd(togetherBilled).toFixed(4)} (cap $${cap})`,
    );
    expect(picoToUsd(togetherBilled)).toBeLessThanOrEqual(cap);
  });
});
