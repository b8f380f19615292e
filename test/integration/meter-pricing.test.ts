/**
 * Pricing a request must not hold the daemon's event loop (issue 36 item 3): a free call — a 60 MiB
 * body of short floats under a repeated key, refused 402 once priced — froze the meter (and every
 * loop of the daemon beside it) for ~25 s. The test keeps no clock bound: it compares the loop's
 * longest stall (monitorEventLoopDelay) and the slowest /health probe with the call's own duration,
 * measured in the same run. When the body is priced on the loop, the stall is most of the call;
 * off it, a small part. Absolute figures: `npx tsx benchmarks/meter-pricing.ts`.
 */
import { monitorEventLoopDelay } from "node:perf_hooks";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadAllowlist, loadPriceTable, Meter } from "../../src/meter/index.js";
import { startTestUpstream, type TestUpstream } from "../helpers/meter-upstream.js";

const MiB = 1024 * 1024;

/**
 * The shape issue 36 measured: short floats, and a key repeated inside a message. Built outside the
 * JS heap (a 15-million-element array's garbage would stall the very loop the test watches).
 */
function hostileBody(bytes: number): Buffer {
  const head = Buffer.from('{"model":"kimi-k3","messages":[{"role":"user","content":"x","a":1,"a":[');
  const tail = Buffer.from('0.1]}],"max_tokens":100}');
  return Buffer.concat([head, Buffer.alloc(Math.ceil(bytes / 4) * 4).fill("0.1,"), tail]);
}

let up: TestUpstream;
let meter: Meter;
let base: string;
const calls = new Agent({ connections: 4 });
const probes = new Agent({ connections: 2 });

beforeAll(async () => {
  up = await startTestUpstream();
  meter = new Meter({
    upstreamUrl: up.url,
    apiKey: "sk-pricing",
    allowlist: loadAllowlist(),
    prices: loadPriceTable(),
  });
  const l = await meter.listen("127.0.0.1", 0);
  base = `http://127.0.0.1:${l.port}`;
});

afterAll(async () => {
  await meter.stop();
  await up.close();
});

describe("pricing a request off the event loop (issue 36 item 3)", () => {
  it("a 60 MiB body is refused 402 while the loop and /health stay free", { timeout: 600_000 }, async () => {
    const body = hostileBody(60 * MiB);
    const token = meter.mint("ep-pricing", 0.05);
    const loop = monitorEventLoopDelay({ resolution: 10 });
    let pricing = true;
    let slowestProbe = 0;
    let answered = 0;
    const probe = (async () => {
      while (pricing) {
        const t = performance.now();
        const r = await request(`${base}/health`, { dispatcher: probes });
        await r.body.dump();
        slowestProbe = Math.max(slowestProbe, performance.now() - t);
        answered++;
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    loop.enable();
    const t0 = performance.now();
    const r = await request(`${base}/v1/chat/completions`, {
      method: "POST",
      dispatcher: calls,
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body,
    });
    const text = await r.body.text();
    const callMs = performance.now() - t0;
    loop.disable();
    pricing = false;
    await probe;
    const stallMs = loop.max / 1e6;
    console.log(
      `60 MiB body: answered ${r.statusCode} in ${callMs.toFixed(0)} ms; longest loop stall ${stallMs.toFixed(0)} ms; ` +
        `slowest of ${answered} /health probes ${slowestProbe.toFixed(0)} ms`,
    );
    expect(r.statusCode, text.slice(0, 200)).toBe(402);
    expect(up.hits).toBe(0);
    expect(answered).toBeGreaterThan(1);
    expect(stallMs).toBeLessThan(callMs / 4);
    expect(slowestProbe).toBeLessThan(callMs / 4);
  });
});
