/**
 * The cap against a provider that counts tokens as an adversary would wish (the simulator's
 * "adversarial" tokenizer: every digit, symbol and space a token, non-ASCII a token per byte), through
 * the real meter on loopback. Upstream's estimate counts digits at three to a token, so calls
 * overshoot their reservations: the meter books that overshoot (the figure below can be, and is,
 * non-zero), and its real-spend bound (exposure.ts) keeps what the provider bills within
 *
 *   cap + the largest excess of one call's worst case over its reservation.
 *
 * The provider's side of the bill is the simulator's own count of what it served.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EngySim, type EngySimStats, startEngySim } from "../../src/engy-sim/index.js";
import { compilePrices, type Listener, loadAllowlist, loadPriceTable, Meter } from "../../src/meter/index.js";
import { parseChatRequest } from "../../src/meter/request.js";
import { openDb, ReceiptRepo } from "../../src/store/index.js";
import { poller } from "../helpers/wait.js";

const until = poller({ ms: 30_000, everyMs: 20 });

const SEED = Number(process.env.FUZZ_SEED ?? 20261204);
const TRIALS = Number(process.env.CAP_TRIALS ?? 1_000);
const allowlist = loadAllowlist();
const PRICES = compilePrices(allowlist, loadPriceTable());
const models = [...allowlist.models];
const dispatcher = new Agent({ connections: 128 });
const noScenarios = join(tmpdir(), "no-scenarios-here");

/** What the provider billed: Σ per model of (prompt − cached)·p + cached·c_read + completion·c. */
function providerPico(before: EngySimStats, after: EngySimStats): bigint {
  let total = 0n;
  for (const [m, b] of Object.entries(after.billed)) {
    const a = before.billed[m] ?? { requests: 0, prompt_tokens: 0, cached_tokens: 0, completion_tokens: 0 };
    const p = PRICES.get(m)!;
    const prompt = BigInt(b.prompt_tokens - a.prompt_tokens);
    const cached = BigInt(b.cached_tokens - a.cached_tokens);
    total +=
      (prompt - cached) * p.prompt +
      cached * p.cacheRead +
      BigInt(b.completion_tokens - a.completion_tokens) * p.completion;
  }
  return total;
}
const billedRequests = (s: EngySimStats) => Object.values(s.billed).reduce((n, b) => n + b.requests, 0);

/** A call's largest possible excess over its reservation (n = 1): (prompt bound − estimate) × prompt price. */
function excessPico(body: string, model: string): bigint {
  const r = parseChatRequest(Buffer.from(body));
  return BigInt(Math.max(0, r.promptBound - r.promptEstimate)) * PRICES.get(model)!.prompt;
}

async function send(base: string, token: string, body: string, signal?: AbortSignal): Promise<number> {
  const r = await request(`${base}/chat/completions`, {
    method: "POST",
    dispatcher,
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body,
    signal,
  });
  await r.body.dump();
  return r.statusCode;
}

interface World {
  sim: EngySim;
  meter: Meter;
  listener: Listener;
  base: string;
}

async function world(
  latencyScale = 0,
  models?: Record<string, Record<string, number | boolean>>,
): Promise<World> {
  const sim = await startEngySim({
    seed: 5,
    latencyScale,
    scenariosDir: noScenarios,
    apiKeys: ["sk-op"],
    profile: { tokenizer: "adversarial", ...(models ? { models } : {}) },
  });
  const meter = new Meter({
    upstreamUrl: sim.url,
    apiKey: "sk-op",
    allowlist,
    prices: loadPriceTable(),
    receipts: new ReceiptRepo(openDb(join(mkdtempSync(join(tmpdir(), "cap-")), "v.sqlite"))),
    retry: { statusStepMs: 1, streamStepMs: 1 },
    receiptFlushMs: 5,
    upstreamTimeoutMs: 20_000,
  });
  const listener = await meter.listen("127.0.0.1", 0);
  return { sim, meter, listener, base: `http://127.0.0.1:${listener.port}/v1` };
}

let w: World;
beforeAll(async () => {
  w = await world();
});
afterAll(async () => {
  await w?.meter.stop();
  await w?.sim.close();
  await dispatcher.close();
});

/** Prompt pieces an adversary picks: digit runs, symbols, non-ASCII, letters, and long tool schemas. */
const piece = fc.oneof(
  fc.integer({ min: 1, max: 6000 }).map((n) => "7".repeat(n)),
  fc.integer({ min: 1, max: 3000 }).map((n) => "{}[]<>|;:".repeat(Math.ceil(n / 9)).slice(0, n)),
  fc.integer({ min: 1, max: 1500 }).map((n) => "日本語😀é".repeat(Math.ceil(n / 5)).slice(0, n)),
  fc.integer({ min: 1, max: 6000 }).map((n) => "lorem ipsum ".repeat(Math.ceil(n / 12)).slice(0, n)),
);
const toolsArb = fc.option(
  fc.integer({ min: 1, max: 30 }).map((k) =>
    Array.from({ length: k }, (_, i) => ({
      type: "function",
      function: {
        name: `tool_${i}`,
        description: `Tool ${i}: 0123456789 ${"{}".repeat(20)}`,
        parameters: {
          type: "object",
          properties: { [`p${i}`]: { type: "string", enum: ["1", "22", "333"] } },
        },
      },
    })),
  ),
  { nil: undefined },
);
const callArb = fc.record({
  model: fc.constantFrom(...models),
  pieces: fc.array(piece, { minLength: 1, maxLength: 4 }),
  tools: toolsArb,
  maxTokens: fc.option(fc.integer({ min: 1, max: 16_384 }), { nil: undefined }),
  stream: fc.boolean(),
});
type CallSpec = typeof callArb extends fc.Arbitrary<infer T> ? T : never;

function bodyOf(c: CallSpec): string {
  const b: Record<string, unknown> = {
    model: c.model,
    messages: c.pieces.map((content, i) => ({ role: i % 2 ? "assistant" : "user", content })),
    stream: c.stream,
  };
  if (c.tools) b.tools = c.tools;
  if (c.maxTokens !== undefined) b.max_tokens = c.maxTokens;
  return JSON.stringify(b);
}

describe("the cap under an adversarial tokenizer", () => {
  it(`${TRIALS} trials of concurrent calls: the provider's bill ≤ cap + one call's excess, and the meter books every token of it`, async () => {
    let n = 0;
    let calls = 0;
    let refused = 0;
    let clamped = 0;
    let waited = 0;
    let overshootPico = 0n;
    let overCapTrials = 0;
    let worstOverCap = 0n;
    let worstShareOfBound = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(callArb, { minLength: 1, maxLength: 16 }),
        fc.integer({ min: 100, max: 60_000 }), // cap in micro-dollars: $0.0001 … $0.06
        async (specs, capMicro) => {
          n++;
          const episode = `cap-${n}`;
          const token = w.meter.mint(episode, capMicro / 1e6);
          const before = w.sim.stats();
          const bodies = specs.map(bodyOf);
          const statuses = await Promise.all(bodies.map((b) => send(w.base, token, b)));
          const s = await w.meter.close(token);
          const after = w.sim.stats();
          calls += specs.length;
          refused += statuses.filter((x) => x === 402).length;
          clamped += s.clamped;
          waited += s.waited;
          expect(
            statuses.every((x) => x === 200 || x === 402),
            String(statuses),
          ).toBe(true);
          const receipts = w.meter.receiptsFor(episode);
          expect(receipts).toHaveLength(specs.length);
          // A refusal never reached the provider; every forwarded call has its receipt.
          const forwarded = receipts.filter((r) => r.status === 200);
          expect(billedRequests(after) - billedRequests(before)).toBe(forwarded.length);
          expect(after.requests - before.requests).toBe(forwarded.length);
          // The meter booked exactly what the provider billed.
          const booked = receipts.reduce((a, r) => a + BigInt(r.usd_pico), 0n);
          const provider = providerPico(before, after);
          expect(booked).toBe(provider);
          expect(s.reserved_usd).toBe(0);
          for (const r of forwarded) {
            const over = BigInt(r.usd_pico) - BigInt(r.reserved_pico);
            if (over > 0n) overshootPico += over;
          }
          // The guarantee.
          const capPico = BigInt(capMicro) * 1_000_000n;
          let bound = 0n;
          for (const [k, b] of bodies.entries()) {
            const e = excessPico(b, specs[k]!.model);
            if (e > bound) bound = e;
          }
          expect(provider <= capPico + bound, `billed ${provider} > cap ${capPico} + ${bound}`).toBe(true);
          if (provider > capPico) {
            overCapTrials++;
            if (provider - capPico > worstOverCap) worstOverCap = provider - capPico;
            worstShareOfBound = Math.max(worstShareOfBound, Number(provider - capPico) / Number(bound));
          }
        },
      ),
      { seed: SEED, numRuns: TRIALS },
    );
    console.log(
      `cap (adversarial tokenizer): ${TRIALS} trials, ${calls} concurrent calls (${refused} refused 402, ${clamped} clamped, ${waited} waited for the calls in flight): ` +
        `overshoot booked ${Number(overshootPico) / 1e12} USD; the provider billed more than the cap in ${overCapTrials} trials, ` +
        `by at most ${Number(worstOverCap) / 1e12} USD (${(worstShareOfBound * 100).toFixed(1)} % of that trial's one-call bound); the meter booked every pico-dollar the provider billed`,
    );
    expect(overshootPico).toBeGreaterThan(0n);
    expect(refused).toBeGreaterThan(0);
    expect(clamped).toBeGreaterThan(0);
    expect(waited).toBeGreaterThan(0);
  }, 900_000);

  it("8 parallel kimi-k3 calls of 120 000 digits on a $0.30 cap: one runs, the rest wait and are refused", async () => {
    const token = w.meter.mint("digits-8", 0.3);
    const before = w.sim.stats();
    const body = JSON.stringify({
      model: "kimi-k3",
      messages: [{ role: "user", content: "7".repeat(120_000) }],
    });
    const statuses = await Promise.all(Array.from({ length: 8 }, () => send(w.base, token, body)));
    const s = await w.meter.close(token);
    const provider = providerPico(before, w.sim.stats());
    const excess = excessPico(body, "kimi-k3");
    console.log(
      `8 × 120 000 digits on kimi-k3, cap $0.30: statuses ${statuses.sort().join(",")}; the provider billed ${Number(provider) / 1e12} USD, ` +
        `the meter booked ${s.cost_usd} USD (overshoot ${s.overshoot_usd}); the bound is cap + ${Number(excess) / 1e12} USD`,
    );
    expect(provider <= 300_000_000_000n + excess).toBe(true);
    expect(s.cost_usd).toBe(Number(provider) / 1e12);
    expect(statuses.filter((x) => x === 200).length).toBeGreaterThanOrEqual(1);
    expect(s.overshoot_usd).toBeGreaterThan(0);
  }, 120_000);
});

describe("calls the policy walks away from", () => {
  it("long calls fired and abandoned, wave after wave, over a cap: the provider's bill stays within the bound, every call has a receipt", async () => {
    // A slow model (first token after 300 ms, 100 tokens/s): each call lasts seconds; the policy
    // drops its connection at once and fires the next wave. Before the fix such a call released its
    // reservation and was billed $0, so the waves never ran out of budget.
    const slow = await world(1, {
      "kimi-k3": { ttft_ms: 300, tokens_per_s: 100, verbosity: 100, cache: false },
    });
    try {
      const token = slow.meter.mint("walk-away", 0.03);
      const before = slow.sim.stats();
      const body = JSON.stringify({
        model: "kimi-k3",
        messages: [{ role: "user", content: `${"0123456789".repeat(300)} keep going` }],
        max_tokens: 300,
      });
      const bodies: string[] = [];
      let statuses: number[] = [];
      for (let wave = 0; wave < 16; wave++) {
        if (wave > 0) await new Promise((r) => setTimeout(r, 250));
        const waveStatuses = await Promise.all(
          Array.from({ length: 8 }, async () => {
            const ac = new AbortController();
            bodies.push(body);
            const p = send(slow.base, token, body, ac.signal).catch(() => 0);
            setTimeout(() => ac.abort(), 50);
            return p;
          }),
        );
        statuses = statuses.concat(waveStatuses);
      }
      // Every call the provider got is settled on what it billed (the meter reads the answers out).
      await until(
        () =>
          slow.meter.summary(token).reserved_usd === 0 &&
          slow.meter.receiptsFor("walk-away").length >=
            billedRequests(slow.sim.stats()) - billedRequests(before),
      );
      const s = await slow.meter.close(token);
      const after = slow.sim.stats();
      const provider = providerPico(before, after);
      const receipts = slow.meter.receiptsFor("walk-away");
      const forwarded = receipts.filter((r) => r.status !== 402);
      expect(forwarded.length).toBe(billedRequests(after) - billedRequests(before));
      expect(receipts.reduce((a, r) => a + BigInt(r.usd_pico), 0n)).toBe(provider);
      const bound = excessPico(body, "kimi-k3");
      console.log(
        `walk-away: ${bodies.length} calls fired and dropped after 50 ms, cap $0.03: the provider served ${forwarded.length} and billed ${Number(provider) / 1e12} USD, ` +
          `the meter booked ${s.cost_usd} USD in ${receipts.length} receipts (${receipts.filter((r) => r.status === 402).length} refused); bound cap + ${Number(bound) / 1e12} USD`,
      );
      expect(provider <= 30_000_000_000n + bound).toBe(true);
      // The attack did spend the budget (so the bound was tested), and no further.
      expect(provider > 24_000_000_000n).toBe(true);
      expect(forwarded.length).toBeGreaterThanOrEqual(3);
      expect(receipts.some((r) => r.status === 402)).toBe(true);
      expect(statuses.length).toBe(128);
      expect(forwarded.every((r) => r.error_code === "client_disconnected" || r.status === 200)).toBe(true);
    } finally {
      await slow.meter.stop();
      await slow.sim.close();
    }
  }, 300_000);
});
