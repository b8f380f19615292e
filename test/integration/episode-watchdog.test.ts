/**
 * The policy-stall watchdog over the real meter (loopback upstream, real sockets): what the meter
 * counts as a call is what keeps an agent alive. Refusals (allowlist, cap) are not calls; a
 * forwarded call the provider failed is one (upstream's meter: `calls` grows on every forwarded call).
 */
import { setTimeout as sleep } from "node:timers/promises";
import { request } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { watchdog } from "../../src/episode/watchdog.js";
import { loadAllowlist, loadPriceTable, Meter } from "../../src/meter/index.js";
import { startTestUpstream, type TestUpstream } from "../helpers/meter-upstream.js";

const KEY = "sk-operator";
let up: TestUpstream | undefined;
let meter: Meter | undefined;

afterEach(async () => {
  await meter?.stop();
  await up?.close();
  meter = undefined;
  up = undefined;
});

async function setup(capUsd = 0.3) {
  up = await startTestUpstream({ apiKey: KEY });
  meter = new Meter({
    upstreamUrl: up.url,
    apiKey: KEY,
    allowlist: loadAllowlist(),
    prices: loadPriceTable(),
    retry: { statusRetries: 1, streamRetries: 1, statusStepMs: 5, streamStepMs: 5 },
    upstreamTimeoutMs: 5_000,
  });
  const listener = await meter.listen("127.0.0.1", 0);
  const token = meter.mint(`wd-${Math.random()}`, capUsd);
  const call = async (model: string) => {
    const r = await request(`http://127.0.0.1:${listener.port}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 100 }),
    });
    await r.body.dump();
    return r.statusCode;
  };
  return { meter, token, call };
}

const FIRST = 400;
const IDLE = 800;

describe("the watchdog over the meter", () => {
  it("refused calls (allowlist, cap) do not count: no call within the first window trips it", async () => {
    const { meter: m, token, call } = await setup(0.0000001);
    const ac = new AbortController();
    const start = performance.now();
    const wd = watchdog(m, token, start, FIRST, IDLE, 20, ac.signal);
    const statuses: number[] = [];
    // Refusals all along the window: a model off the allowlist (400), then one the cap cannot fit (402).
    for (let i = 0; i < 6; i++) {
      statuses.push(await call(i % 2 === 0 ? "gpt-4o" : "kimi-k3"));
      await sleep(40);
    }
    expect(await wd).toBe("watchdog_no_call");
    expect(new Set(statuses)).toEqual(new Set([400, 402]));
    expect(up!.hits).toBe(0);
    expect(m.lastActivity(token).calls).toBe(0);
  });

  it("a forwarded call the provider failed counts: the first-call rule is met, the idle rule then applies", async () => {
    const { meter: m, token, call } = await setup();
    up!.faults.push({ kind: "status", status: 500 });
    const ac = new AbortController();
    const wd = watchdog(m, token, performance.now(), FIRST, IDLE, 20, ac.signal);
    expect(await call("kimi-k3")).toBe(500);
    expect(m.lastActivity(token).calls).toBe(1);
    expect(await wd).toBe("watchdog_idle");
  });

  it("a call completed before the agent started counts (the token is minted before the sidecar boots)", async () => {
    const { meter: m, token, call } = await setup();
    expect(await call("kimi-k3")).toBe(200);
    const ac = new AbortController();
    expect(await watchdog(m, token, performance.now(), FIRST, IDLE, 20, ac.signal)).toBe("watchdog_idle");
  });

  it("calls that keep completing keep the agent running until the episode stops the watchdog", async () => {
    const { meter: m, token, call } = await setup();
    const ac = new AbortController();
    // Past the first-call window (which would trip without them), with an idle window far above the
    // gaps between calls: a slow machine must not trip it.
    const wd = watchdog(m, token, performance.now(), 1_500, 10_000, 20, ac.signal);
    const t0 = performance.now();
    let n = 0;
    while (performance.now() - t0 < 2_500) {
      expect(await call("glm-5.3-flash")).toBe(200);
      n++;
      await sleep(100);
    }
    ac.abort();
    expect(await wd).toBeUndefined();
    expect(m.lastActivity(token).calls).toBe(n);
  });
});
