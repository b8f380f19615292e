/**
 * Meter overhead benchmark:
 *   npx tsx benchmarks/meter.ts [--seconds 2] [--rounds 2] [--body-kb 8]
 *     [--levels 1,16,64] [--modes json,stream] [--variant full|no-receipts|no-logs|no-receipts,no-logs]
 *     [--cpu-prof DIR]   (a V8 CPU profile of the meter process, for diagnosis)
 *     [--from dist|src]  (dist, the default: the compiled JavaScript the daemon runs in production,
 *                         built with tsc at start; src: the TypeScript sources through tsx)
 *     [--baseline-dist DIR]  (a fourth target, "meter0": the meter compiled from another revision,
 *                         e.g. `git archive REV | tar -x -C DIR/..` then tsc there; measured in the same
 *                         rounds, for a before/after on a noisy machine)
 *
 * Three targets on the same zero-latency upstream, each server in its own child process:
 *   direct  the upstream itself (the Engy simulator at latency scale 0),
 *   bare    a bare pass-through proxy (node:http + an undici Pool, nothing else): the floor of one
 *           extra HTTP hop on this machine,
 *   meter   the meter (receipts on, durable SQLite file in WAL mode, info logs to a file).
 * The load generator (this process) runs closed-loop clients at 1, 16 and 64 concurrent calls and
 * measures latency (non-stream: whole response; stream: time to the first body byte) and
 * throughput. Ratios are against baselines measured in the same run, interleaved per round; each
 * figure is the best of the rounds (the machine is shared, so the best run is the least disturbed).
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Pool } from "undici";

const here = fileURLToPath(import.meta.url);
const root = join(here, "../..");

function arg(name: string, dflt: number): number {
  const k = process.argv.indexOf(`--${name}`);
  return k > 0 ? Number(process.argv[k + 1]) : dflt;
}

function argStr(name: string, dflt: string): string {
  const k = process.argv.indexOf(`--${name}`);
  return k > 0 ? (process.argv[k + 1] ?? dflt) : dflt;
}

/** CPU seconds (user + system) a process has used so far, from /proc (Linux). */
function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // fields[11] = utime, fields[12] = stime (clock ticks; 100 per second on Linux)
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

// ------------------------------------------------------------------ children

async function childUpstream(): Promise<void> {
  const sim = await import("../src/engy-sim/index.js");
  const s = await sim.startEngySim({ host: "127.0.0.1", port: 0, seed: 1, latencyScale: 0, apiKeys: "any" });
  console.log(`${s.port} engy-sim`);
}

async function childBare(upstreamPort: number): Promise<void> {
  const pool = new Pool(`http://127.0.0.1:${upstreamPort}`, { connections: 256, keepAliveTimeout: 30_000 });
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    try {
      const r = await pool.request({
        path: req.url ?? "/",
        method: (req.method ?? "GET") as "POST",
        headers: { "content-type": "application/json", authorization: req.headers.authorization ?? "" },
        body: req.method === "POST" ? req : null,
      });
      const h: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(r.headers)) {
        if (v !== undefined && k !== "connection" && k !== "keep-alive" && k !== "transfer-encoding")
          h[k] = v;
      }
      res.writeHead(r.statusCode, h);
      for await (const chunk of r.body) res.write(chunk);
      res.end();
    } catch (err) {
      if (!res.headersSent) res.writeHead(502);
      res.end(String(err));
    }
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  console.log(String((server.address() as { port: number }).port));
}

type MeterModule = typeof import("../src/meter/index.js");
type StoreModule = typeof import("../src/store/index.js");
type LogModule = typeof import("../src/log.js");

async function childMeter(upstreamPort: number, variant: string, from: string): Promise<void> {
  // dist: the compiled modules production runs (tsx adds per-call work of its own to the sources).
  const base = from === "src" ? "../src" : from === "dist" ? "../dist" : from;
  const [{ Meter, loadAllowlist, loadPriceTable }, { openDb, ReceiptRepo }, { createLogger }, pino] =
    await Promise.all([
      import(`${base}/meter/index.js`) as Promise<MeterModule>,
      import(`${base}/store/index.js`) as Promise<StoreModule>,
      import(`${base}/log.js`) as Promise<LogModule>,
      import("pino"),
    ]);
  const dir = mkdtempSync(join(tmpdir(), "bench-meter-"));
  const db = openDb(join(dir, "validator.sqlite"));
  const log = createLogger({
    level: "info",
    destination: pino.default.destination({ dest: join(dir, "meter.log"), sync: false }),
  });
  const meter = new Meter({
    upstreamUrl: `http://127.0.0.1:${upstreamPort}/v1`,
    apiKey: "sk-bench",
    allowlist: loadAllowlist(),
    prices: loadPriceTable(),
    // Diagnosis only (--variant): what receipts and logging cost per call.
    receipts: variant.includes("no-receipts") ? undefined : new ReceiptRepo(db),
    log: variant.includes("no-logs") ? undefined : log,
    // A token serves many calls here: keep every receipt (an episode keeps 2000), so each call pays for its own.
    maxRowsPerEpisode: Number.MAX_SAFE_INTEGER,
  });
  const l = await meter.listen("127.0.0.1", 0);
  // Clients share TOKENS episode tokens (client k uses token k mod TOKENS): 64 clients are four
  // episodes of 16 calls in flight, within the meter's per-token bound of calls in flight.
  const tokens = Array.from({ length: TOKENS }, (_, k) => meter.mint(`bench-${k}`, 1000));
  console.log(`${l.port} ${tokens.join(",")} ${dir}`);
  process.on("SIGTERM", async () => {
    await meter.stop();
    const n = (db.prepare("SELECT COUNT(*) AS n FROM receipts").get() as { n: number }).n;
    console.error(`receipts written: ${n}`);
    db.close();
    process.exit(0);
  });
}

// ------------------------------------------------------------------ load generator

const TOKENS = 4;

interface Target {
  name: "direct" | "bare" | "meter" | "meter0";
  port: number;
  /** Bearer tokens, used round-robin by the clients. */
  tokens: string[];
  /** The proxy process (not for direct): its CPU per call is the load-independent cost. */
  pid?: number;
}

interface Stats {
  p50: number;
  p99: number;
  rps: number;
  n: number;
  errors: number;
  /** CPU microseconds the proxy process spent per call (NaN for direct). */
  cpuUs: number;
}

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

async function measure(
  t: Target,
  body: string,
  concurrency: number,
  stream: boolean,
  seconds: number,
): Promise<Stats> {
  const pool = new Pool(`http://127.0.0.1:${t.port}`, { connections: concurrency, keepAliveTimeout: 30_000 });
  const lat: number[] = [];
  let errors = 0;
  let recording = false;
  const one = async (client: number): Promise<void> => {
    const headers = {
      "content-type": "application/json",
      authorization: `Bearer ${t.tokens[client % t.tokens.length]}`,
    };
    const t0 = performance.now();
    const r = await pool.request({ path: "/v1/chat/completions", method: "POST", headers, body });
    let first = -1;
    for await (const _ of r.body) if (first < 0) first = performance.now();
    const end = performance.now();
    if (r.statusCode !== 200) errors++;
    if (recording) lat.push((stream ? first : end) - t0);
  };
  const warm = performance.now() + WARM_MS;
  const stopAt = warm + seconds * 1000;
  let count = 0;
  let startAt = 0;
  const worker = async (client: number) => {
    for (;;) {
      const now = performance.now();
      if (now >= stopAt) return;
      if (!recording && now >= warm) {
        recording = true;
        startAt = now;
      }
      await one(client);
      if (recording) count++;
    }
  };
  const cpu0 = t.pid === undefined ? Number.NaN : cpuSeconds(t.pid);
  await Promise.all(Array.from({ length: concurrency }, (_, k) => worker(k)));
  const elapsed = (performance.now() - startAt) / 1000;
  const cpuUs = t.pid === undefined ? Number.NaN : ((cpuSeconds(t.pid) - cpu0) * 1e6) / (count || 1);
  await pool.close();
  lat.sort((a, b) => a - b);
  return { p50: quantile(lat, 0.5), p99: quantile(lat, 0.99), rps: count / elapsed, n: count, errors, cpuUs };
}

function requestBody(kb: number, stream: boolean): string {
  const tools = ["terminal", "read_file", "write_file", "patch", "search_files"].map((name) => ({
    type: "function",
    function: {
      name,
      description: `The ${name} tool of the agent harness.`,
      parameters: { type: "object", properties: { path: { type: "string" }, command: { type: "string" } } },
    },
  }));
  const messages: { role: string; content: string }[] = [
    { role: "system", content: "You are a careful software agent working in /app. Use the tools." },
    { role: "user", content: "Read /workspace/SKILL.md and /workspace/INSTRUCTION.md, then solve the task." },
  ];
  let size = JSON.stringify({ messages, tools }).length;
  let k = 0;
  while (size < kb * 1024) {
    const content = `tool output ${k++}: ${"drwxr-xr-x 2 agent agent 4096 Jan  1 00:00 src\n".repeat(8)}`;
    messages.push({ role: k % 2 ? "assistant" : "user", content });
    size += content.length + 40;
  }
  return JSON.stringify({ model: "glm-5.3-flash", messages, tools, max_tokens: 256, stream });
}

function startChild(args: string[]): { proc: ChildProcess; firstLine: Promise<string> } {
  // --cpu-prof DIR: a V8 CPU profile of the meter process, written when it stops (Chrome DevTools).
  const prof = argStr("cpu-prof", "");
  const v8 = prof && args[0] === "meter" ? ["--cpu-prof", `--cpu-prof-dir=${prof}`] : [];
  const proc = spawn(process.execPath, [...v8, "--import", "tsx", here, "child", ...args], {
    cwd: root,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const rl = createInterface({ input: proc.stdout! });
  const firstLine = new Promise<string>((resolve, reject) => {
    rl.once("line", resolve);
    proc.once("exit", (c) => reject(new Error(`child ${args[0]} exited ${c}`)));
  });
  return { proc, firstLine };
}

const WARM_MS = 500;
const WARM_CALLS = 3000;

async function warmUp(t: Target, body: string, calls: number): Promise<void> {
  const pool = new Pool(`http://127.0.0.1:${t.port}`, { connections: 16 });
  let left = calls;
  await Promise.all(
    Array.from({ length: 16 }, async (_, k) => {
      const headers = {
        "content-type": "application/json",
        authorization: `Bearer ${t.tokens[k % t.tokens.length]}`,
      };
      while (left-- > 0) {
        const r = await pool.request({ path: "/v1/chat/completions", method: "POST", headers, body });
        await r.body.dump();
      }
    }),
  );
  await pool.close();
}
const fmt = (x: number, d = 3) => (Number.isFinite(x) ? x.toFixed(d) : "n/a");

async function main(): Promise<void> {
  const seconds = arg("seconds", 2);
  const rounds = arg("rounds", 2);
  const bodyKb = arg("body-kb", 8);
  const levels = argStr("levels", "1,16,64").split(",").map(Number);
  const modes = argStr("modes", "json,stream").split(",");
  const from = argStr("from", "dist");
  if (from !== "src") {
    // The meter as production runs it: compiled by tsc, imported by plain node.
    const tsc = spawnSync(
      process.execPath,
      [join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json"],
      {
        cwd: root,
        stdio: "inherit",
      },
    );
    if (tsc.status !== 0)
      throw new Error("tsc failed: cannot build dist/ for the benchmark (use --from src)");
  }

  const up = startChild(["upstream"]);
  const [upPortStr, upKind] = (await up.firstLine).split(" ") as [string, string];
  const upPort = Number(upPortStr);
  const bare = startChild(["bare", String(upPort)]);
  const met = startChild(["meter", String(upPort), argStr("variant", "full"), from]);
  const baselineDist = argStr("baseline-dist", "");
  const met0 = baselineDist
    ? startChild(["meter", String(upPort), argStr("variant", "full"), baselineDist])
    : undefined;
  const barePort = Number(await bare.firstLine);
  const [meterPort, tokens, meterDir] = (await met.firstLine).split(" ") as [string, string, string];
  const targets: Target[] = [
    { name: "direct", port: upPort, tokens: ["sk-bench"] },
    { name: "bare", port: barePort, tokens: ["sk-bench"], pid: bare.proc.pid },
    { name: "meter", port: Number(meterPort), tokens: tokens.split(","), pid: met.proc.pid },
  ];
  if (met0) {
    const [port0, tokens0] = (await met0.firstLine).split(" ") as [string, string];
    targets.push({ name: "meter0", port: Number(port0), tokens: tokens0.split(","), pid: met0.proc.pid });
  }
  console.log(
    `meter benchmark: meter from ${from}, upstream=${upKind} body=${bodyKb} KiB, ${seconds}s per run after ${WARM_CALLS} warm-up calls per target and path and ${WARM_MS / 1000}s per run, best of ${rounds} rounds, node ${process.version}`,
  );

  // JIT warm-up of every server on both paths before anything is measured: the meter has the most
  // code to optimise, and at one concurrent call a short per-run warm-up would favour the baselines.
  for (const t of targets)
    for (const stream of modes.map((m) => m === "stream"))
      await warmUp(t, requestBody(bodyKb, stream), WARM_CALLS);

  const results: Record<string, Record<string, Stats>> = {};
  for (const stream of modes.map((m) => m === "stream")) {
    const body = requestBody(bodyKb, stream);
    for (const c of levels) {
      const key = `${stream ? "stream" : "json"}@${c}`;
      const best: Record<string, Stats> = {};
      for (let r = 0; r < rounds; r++) {
        for (const t of targets) {
          const s = await measure(t, body, c, stream, seconds);
          const b = best[t.name];
          // best run: the highest throughput, and the lowest latencies seen
          best[t.name] =
            b === undefined
              ? s
              : {
                  p50: Math.min(b.p50, s.p50),
                  p99: Math.min(b.p99, s.p99),
                  rps: Math.max(b.rps, s.rps),
                  n: b.n + s.n,
                  errors: b.errors + s.errors,
                  cpuUs: Math.min(b.cpuUs, s.cpuUs),
                };
        }
      }
      results[key] = best;
    }
  }

  console.log("");
  console.log("mode    conc  target  p50 ms   p99 ms   req/s     errors  proxy CPU µs/call");
  for (const [key, byTarget] of Object.entries(results)) {
    const [mode, conc] = key.split("@") as [string, string];
    for (const name of ["direct", "bare", "meter", "meter0"]) {
      const s = byTarget[name];
      if (s === undefined) continue;
      console.log(
        `${mode.padEnd(7)} ${conc.padStart(4)}  ${name.padEnd(6)}  ${fmt(s.p50).padStart(7)}  ${fmt(s.p99).padStart(7)}  ${fmt(s.rps, 0).padStart(7)}  ${String(s.errors).padStart(6)}  ${fmt(s.cpuUs, 0).padStart(8)}`,
      );
    }
  }
  console.log("");
  console.log("added latency vs direct (ms; stream = time to first byte) and throughput ratios");
  console.log("mode    conc  bare+p50  meter+p50  bare+p99  meter+p99  bare/direct  meter/bare");
  const goals: string[] = [];
  for (const [key, t] of Object.entries(results)) {
    const [mode, conc] = key.split("@") as [string, string];
    const d = t.direct!;
    const b = t.bare!;
    const m = t.meter!;
    const addB50 = b.p50 - d.p50;
    const addM50 = m.p50 - d.p50;
    const ratio = m.rps / b.rps;
    console.log(
      `${mode.padEnd(7)} ${conc.padStart(4)}  ${fmt(addB50).padStart(8)}  ${fmt(addM50).padStart(9)}  ${fmt(b.p99 - d.p99).padStart(8)}  ${fmt(m.p99 - d.p99).padStart(9)}  ${fmt(b.rps / d.rps, 2).padStart(11)}  ${fmt(ratio, 2).padStart(10)}`,
    );
    // Goals (issue 21): the meter within 0.1 ms of the bare proxy at one client (non-stream p50 and
    // stream time to first byte), ≥ 95 % of its throughput at 16 and 64, ≤ 1.2× its CPU per call.
    const over = addM50 - addB50;
    if (conc === "1")
      goals.push(
        `${mode === "json" ? "added p50 (non-stream)" : "stream TTFB added"} at 1 concurrent: meter ${fmt(addM50)} ms, bare ${fmt(addB50)} ms, difference ${fmt(over)} ms  (goal ≤ 0.1)  ${over <= 0.1 ? "MET" : "MISSED"}`,
      );
    if (conc !== "1")
      goals.push(
        `${mode} throughput at ${conc} concurrent: meter/bare ${fmt(ratio * 100, 1)} %  (goal ≥ 95 %)  ${ratio >= 0.95 ? "MET" : "MISSED"}`,
      );
    const cpu = m.cpuUs / b.cpuUs;
    goals.push(
      `${mode} CPU per call at ${conc} concurrent: meter ${fmt(m.cpuUs, 0)} µs, bare ${fmt(b.cpuUs, 0)} µs, ${fmt(cpu, 2)}×  (goal ≤ 1.2×)  ${cpu <= 1.2 ? "MET" : "MISSED"}`,
    );
  }
  console.log("");
  for (const g of goals) console.log(g);
  if (met0) {
    console.log("");
    console.log("this build (meter) vs the baseline build (meter0), same rounds:");
    for (const [key, t] of Object.entries(results)) {
      const m = t.meter!;
      const m0 = t.meter0!;
      const d = t.direct!;
      console.log(
        `${key.padEnd(10)} added p50 ${fmt(m.p50 - d.p50)} vs ${fmt(m0.p50 - d.p50)} ms, req/s ${fmt((m.rps / m0.rps) * 100, 1)} %, CPU per call ${fmt(m.cpuUs, 0)} vs ${fmt(m0.cpuUs, 0)} µs (${fmt(m.cpuUs / m0.cpuUs, 2)}×)`,
      );
    }
  }

  for (const c of [up, bare, met, ...(met0 ? [met0] : [])]) c.proc.kill("SIGTERM");
  await new Promise((r) => met.proc.once("exit", r));
  console.log(`meter data (SQLite + log): ${meterDir}`);
}

const role = process.argv[2] === "child" ? process.argv[3] : undefined;
if (role === "upstream") await childUpstream();
else if (role === "bare") await childBare(Number(process.argv[4]));
else if (role === "meter")
  await childMeter(Number(process.argv[4]), process.argv[5] ?? "full", process.argv[6] ?? "dist");
else await main();
