/**
 * The cap holds to the micro-dollar: 1 000 trials of concurrent calls (random models, prompt sizes,
 * max_tokens or none, stream or not, cap) through the real meter on loopback to an upstream that
 * bills honestly — every call may use its whole completion budget, and the prompt is what the
 * meter's own estimate says. After every trial: spent ≤ cap in integer pico-dollars, nothing left
 * reserved, no overshoot, the receipts sum to what was spent, and every refusal was a 402 without
 * an upstream call.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { estimatePromptTokens } from "../../src/meter/estimate.js";
import { type Listener, loadAllowlist, loadPriceTable, Meter } from "../../src/meter/index.js";
import { openDb, ReceiptRepo } from "../../src/store/index.js";
import { startTestUpstream, type TestUpstream } from "../helpers/meter-upstream.js";

const SEED = Number(process.env.FUZZ_SEED ?? 20261202);
const TRIALS = Number(process.env.CAP_TRIALS ?? 1_000);
const allowlist = loadAllowlist();
const models = [...allowlist.models];
const dispatcher = new Agent({ connections: 64 });

let up: TestUpstream;
let meter: Meter;
let listener: Listener;
let base: string;

beforeAll(async () => {
  up = await startTestUpstream({ apiKey: "sk-op" });
  // Honest provider: the prompt as the meter estimates it, the completion up to the forwarded
  // max_tokens (a "greedy" call uses all of it).
  up.answer = {
    content: "ok fine",
    usage: (req) => ({
      prompt_tokens: estimatePromptTokens({
        ...req,
        max_tokens: undefined,
        stream: undefined,
        stream_options: undefined,
      }),
      completion_tokens: Math.max(
        1,
        Math.floor(Number(req.max_tokens ?? 8192) * (req.temperature === 0 ? 1 : 0.5)),
      ),
      cached_tokens: 0,
    }),
  };
  meter = new Meter({
    upstreamUrl: up.url,
    apiKey: "sk-op",
    allowlist,
    prices: loadPriceTable(),
    receipts: new ReceiptRepo(openDb(join(mkdtempSync(join(tmpdir(), "cap-")), "v.sqlite"))),
    retry: { baseDelayMs: 1, maxDelayMs: 2, maxRetries: 1 },
    receiptFlushMs: 5,
    upstreamTimeoutMs: 5_000,
  });
  listener = await meter.listen("127.0.0.1", 0);
  base = `http://127.0.0.1:${listener.port}/v1`;
});
afterAll(async () => {
  await meter?.stop();
  await up?.close();
  await dispatcher.close();
});

const call = fc.record({
  model: fc.constantFrom(...models),
  promptChars: fc.integer({ min: 1, max: 20_000 }),
  maxTokens: fc.option(fc.integer({ min: 1, max: 16_384 }), { nil: undefined }),
  stream: fc.boolean(),
  greedy: fc.boolean(),
});

async function send(token: string, c: CallSpec): Promise<number> {
  const body: Record<string, unknown> = {
    model: c.model,
    messages: [{ role: "user", content: "x".repeat(c.promptChars) }],
    stream: c.stream,
    temperature: c.greedy ? 0 : 0.7,
  };
  if (c.maxTokens !== undefined) body.max_tokens = c.maxTokens;
  const r = await request(`${base}/chat/completions`, {
    method: "POST",
    dispatcher,
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  await r.body.dump();
  return r.statusCode;
}
type CallSpec = {
  model: string;
  promptChars: number;
  maxTokens: number | undefined;
  stream: boolean;
  greedy: boolean;
};

describe("the per-episode cap under concurrency", () => {
  it(`${TRIALS} trials of concurrent calls: spent ≤ cap to the pico-dollar, no overshoot, receipts = spent`, async () => {
    let n = 0;
    let calls = 0;
    let refused = 0;
    let clamped = 0;
    let worstHeadroomPico = Number.POSITIVE_INFINITY;
    let overshootPico = 0n;
    await fc.assert(
      fc.asyncProperty(
        fc.array(call, { minLength: 1, maxLength: 24 }),
        fc.integer({ min: 100, max: 60_000 }), // cap in micro-dollars: $0.0001 … $0.06
        async (specs, capMicro) => {
          n++;
          const episode = `cap-${n}`;
          const capUsd = capMicro / 1e6;
          const token = meter.mint(episode, capUsd);
          const hitsBefore = up.hits;
          const statuses = await Promise.all(specs.map((c) => send(token, c)));
          const s = meter.close(token);
          calls += specs.length;
          const ok = statuses.filter((x) => x === 200).length;
          refused += statuses.filter((x) => x === 402).length;
          clamped += s.clamped;
          expect(
            statuses.every((x) => x === 200 || x === 402),
            String(statuses),
          ).toBe(true);
          // A refusal never reached the provider.
          expect(up.hits - hitsBefore).toBe(ok);
          const capPico = BigInt(capMicro) * 1_000_000n;
          const spentPico = BigInt(Math.round(s.cost_usd * 1e12));
          expect(spentPico <= capPico, `spent ${s.cost_usd} > cap ${capUsd}`).toBe(true);
          expect(s.overshoot_usd).toBe(0);
          expect(s.reserved_usd).toBe(0);
          overshootPico += BigInt(Math.round(s.overshoot_usd * 1e12));
          worstHeadroomPico = Math.min(worstHeadroomPico, Number(capPico - spentPico));
          const receipts = meter.receiptsFor(episode);
          expect(receipts).toHaveLength(specs.length);
          const total = receipts.reduce((a, r) => a + BigInt(r.usd_pico), 0n);
          expect(total).toBe(spentPico);
        },
      ),
      { seed: SEED, numRuns: TRIALS },
    );
    console.log(
      `cap: ${TRIALS} trials, ${calls} concurrent calls (${refused} refused 402, ${clamped} clamped): overshoot ${overshootPico} pico-$, closest approach to the cap ${worstHeadroomPico} pico-$`,
    );
    expect(refused).toBeGreaterThan(0);
    expect(clamped).toBeGreaterThan(0);
  }, 600_000);
});
