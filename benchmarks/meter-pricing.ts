/**
 * Pricing a request (issue 36 item 3):
 *   npx tsx benchmarks/meter-pricing.ts [--mib 60] [--shape-mib 4]
 *
 * 1. The scan's cost per body shape (src/meter/scan.ts, the pass that prices a request): time per
 *    MiB for plain text (the baseline, measured in the same run) and for the shapes a hostile body
 *    can take — short floats under a repeated key, 17-digit floats, subnormal floats, 200 000
 *    distinct keys in one object, escaped keys, small objects repeating a key — with each one's
 *    ratio to the baseline, and the Python-faithful definition (estimate.ts `billedClassesOf`, what
 *    the meter fell back to on a repeated key before) for comparison. Linear: the ratio bounds the
 *    time of any body of that shape.
 * 2. The daemon's loop while a body is priced: a meter in this process answers /health probes
 *    idle, then while a `--mib` MiB hostile body is posted and priced (in the scan worker); it prints
 *    the probes' median and worst latency in both phases, their ratio, and the loop's longest stall
 *    (monitorEventLoopDelay). The goal: /health under 100 ms while any body is priced.
 */
import { monitorEventLoopDelay } from "node:perf_hooks";
import { Agent, request } from "undici";
import { billedClassesOf } from "../src/meter/estimate.js";
import { loadAllowlist, loadPriceTable, Meter } from "../src/meter/index.js";
import { scanChatBody } from "../src/meter/request.js";
import { startTestUpstream } from "../test/helpers/meter-upstream.js";

const MiB = 1024 * 1024;

function arg(name: string, dflt: number): number {
  const k = process.argv.indexOf(`--${name}`);
  return k > 0 ? Number(process.argv[k + 1]) : dflt;
}

/** A body of about `bytes` bytes: `item(k)` repeated inside a message. */
function body(bytes: number, itemBytes: number, item: (k: number) => string, wrap = (s: string) => `[${s}]`) {
  const n = Math.ceil(bytes / itemBytes);
  const items = Array.from({ length: n }, (_, k) => item(k)).join(",");
  return Buffer.from(
    `{"model":"kimi-k3","messages":[{"role":"user","content":"x","a":1,"a":${wrap(items)}}]}`,
  );
}

/** The hostile body without building it in the JS heap (its garbage would stall the loop it measures). */
function hostileBody(bytes: number): Buffer {
  const head = Buffer.from('{"model":"kimi-k3","messages":[{"role":"user","content":"x","a":1,"a":[');
  const tail = Buffer.from('0.1]}],"max_tokens":100}');
  const floats = Buffer.alloc(Math.ceil(bytes / 4) * 4).fill("0.1,");
  return Buffer.concat([head, floats, tail]);
}

function shapes(bytes: number): [string, Buffer][] {
  return [
    [
      "plain text (baseline)",
      Buffer.from(`{"messages":[{"role":"user","content":"${"hello world ".repeat(bytes / 12)}"}]}`),
    ],
    ["short floats, repeated key", body(bytes, 4, () => "0.1")],
    ["17-digit floats", body(bytes, 20, (k) => `0.${String(1234567890123 + k)}4567`)],
    ["subnormal floats", body(bytes, 8, (k) => `${(k % 9) + 1}e-${310 + (k % 13)}`)],
    [
      "distinct keys in one object",
      body(
        bytes,
        10,
        (k) => `"k${k}":1`,
        (s) => `{${s}}`,
      ),
    ],
    [
      "escaped keys",
      body(
        bytes,
        14,
        (k) => `"\\u006b${k}":1`,
        (s) => `{${s}}`,
      ),
    ],
    ["small objects repeating a key", body(bytes, 14, () => `{"a":1,"a":2}`)],
  ];
}

function msPerMiB(f: () => unknown, b: Buffer, rounds = 3): number {
  let best = Number.POSITIVE_INFINITY;
  for (let r = 0; r < rounds; r++) {
    const t = performance.now();
    f();
    best = Math.min(best, performance.now() - t);
  }
  return best / (b.length / MiB);
}

function scanCosts(bytes: number): void {
  console.log(`\n1. The scan per body shape (~${(bytes / MiB).toFixed(0)} MiB each, best of 3):`);
  let baseline = 0;
  for (const [name, b] of shapes(bytes)) {
    const scan = msPerMiB(() => scanChatBody(b), b);
    if (baseline === 0) baseline = scan;
    const def = name.includes("repeated key") ? msPerMiB(() => billedClassesOf(b), b, 1) : Number.NaN;
    console.log(
      `   ${name.padEnd(32)} ${scan.toFixed(1).padStart(7)} ms/MiB  ×${(scan / baseline).toFixed(1).padStart(5)}` +
        (Number.isNaN(def)
          ? ""
          : `   (the Python-faithful definition: ${def.toFixed(0)} ms/MiB, ×${(def / scan).toFixed(0)})`),
    );
  }
}

const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.floor(q * (xs.length - 1))]!;

async function probeWhile(base: string, agent: Agent, running: () => boolean, min = 50): Promise<number[]> {
  const out: number[] = [];
  while (running() || out.length < min) {
    const t = performance.now();
    const r = await request(`${base}/health`, { dispatcher: agent });
    await r.body.dump();
    out.push(performance.now() - t);
    await new Promise((r) => setTimeout(r, 5));
  }
  return out;
}

async function loopWhilePriced(mib: number): Promise<void> {
  const up = await startTestUpstream({ lean: true });
  const meter = new Meter({ upstreamUrl: up.url, allowlist: loadAllowlist(), prices: loadPriceTable() });
  const l = await meter.listen("127.0.0.1", 0);
  const base = `http://127.0.0.1:${l.port}`;
  const probes = new Agent({ connections: 1 });
  const calls = new Agent({ connections: 2 });
  const hostile = hostileBody(mib * MiB);
  const token = meter.mint("bench-pricing", 0.05);
  // Warm the worker with one large body first (its start is paid once per daemon).
  await (
    await request(`${base}/v1/chat/completions`, {
      method: "POST",
      dispatcher: calls,
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: hostileBody(MiB),
    })
  ).body.dump();
  const idle = await probeWhile(base, probes, () => false, 100);
  const loop = monitorEventLoopDelay({ resolution: 5 });
  let pricing = true;
  const during = probeWhile(base, probes, () => pricing, 1);
  loop.enable();
  const t0 = performance.now();
  const r = await request(`${base}/v1/chat/completions`, {
    method: "POST",
    dispatcher: calls,
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: hostile,
  });
  await r.body.dump();
  const callMs = performance.now() - t0;
  loop.disable();
  pricing = false;
  const busy = await during;
  console.log(`\n2. /health while a ${mib} MiB body of short floats under a repeated key is priced:`);
  console.log(
    `   the call: ${r.statusCode} after ${callMs.toFixed(0)} ms; the loop's longest stall ${(loop.max / 1e6).toFixed(1)} ms`,
  );
  console.log(
    `   /health idle:   median ${quantile(idle, 0.5).toFixed(2)} ms, worst ${Math.max(...idle).toFixed(2)} ms (${idle.length} probes)`,
  );
  console.log(
    `   /health priced: median ${quantile(busy, 0.5).toFixed(2)} ms, worst ${Math.max(...busy).toFixed(2)} ms (${busy.length} probes); ` +
      `median ×${(quantile(busy, 0.5) / quantile(idle, 0.5)).toFixed(1)} of idle; goal (< 100 ms) ${Math.max(...busy) < 100 ? "met" : "missed"}`,
  );
  await meter.stop();
  await up.close();
  await probes.close();
  await calls.close();
}

scanCosts(arg("shape-mib", 4) * MiB);
await loopWhilePriced(arg("mib", 60));
