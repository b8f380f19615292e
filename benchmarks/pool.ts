/**
 * benchmarks/pool.ts — one pack over a spec with the simulator's latency profile on, evaluated on one
 * engine × N slots, then on two engines × N slots each: the host's engine and a second one in a
 * network namespace of its own on this machine (test/helpers/netns-engine.ts, reached over TLS, its
 * meter path through the relay). Reports the speed-up, and the placement overhead per episode: the
 * orchestration time (an episode's wall time outside the agent and the verifier) of the episodes on
 * the second engine minus that of the episodes on the first, measured in the same run. The first
 * copy of the images to the second engine is timed and reported apart (it happens once per set).
 *
 *   npx tsx benchmarks/pool.ts [--pack examples/packs/advisers.json] [--suite builtin] [--latency-scale 0.3] [--slots 2]
 *
 * Both engines share this machine's cores: on 2 cores the speed-up measures what placement adds and
 * what the episodes' waiting (model latency) lets overlap, not a second host's CPU.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import pino from "pino";
import { openEnvironment } from "../src/environment/index.js";
import type { Verdict } from "../src/evaluation/index.js";
import { evaluatePack, resolveRequest } from "../src/evaluation/index.js";
import { createLogger } from "../src/log.js";
import { loadPack } from "../src/pack/index.js";
import { startNetnsEngine } from "../test/helpers/netns-engine.js";

import { simulatorConfig } from "./sim-config.js";

const { values } = parseArgs({
  options: {
    pack: { type: "string", default: "examples/packs/advisers.json" },
    suite: { type: "string", default: "builtin" },
    "latency-scale": { type: "string", default: "0.3" },
    slots: { type: "string", default: "2" },
  },
});
const slots = Number(values.slots);
const packBytes = readFileSync(values.pack!);
const logDir = mkdtempSync(join(tmpdir(), "bench-pool-"));

interface Row {
  label: string;
  wallS: number;
  verdict: Verdict;
  /** scenario → engine of its final attempt */
  placed: Map<string, string>;
}

const orchestrationMs = (s: Verdict["scenarios"][number]) =>
  s.timings.totalMs - s.timings.agentMs - s.timings.verifyMs;
const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : Number.NaN);

async function run(label: string, engines: string, prepareOnly = false): Promise<Row> {
  const logFile = join(logDir, `${label}.log`);
  const { config } = simulatorConfig(`bench-pool-${label}-`, values["latency-scale"], { ENGINES: engines });
  const env = await openEnvironment(config, {
    log: createLogger({ level: "info", destination: pino.destination({ dest: logFile, sync: true }) }),
  });
  try {
    const req = { suite: values.suite! };
    const prepared = await env.bench.prepare(resolveRequest(env, req));
    if (prepareOnly) {
      // Place the images on every engine first (timed apart from the evaluations).
      const images = await Promise.all([
        prepared.images.sidecar(),
        ...prepared.scenarios.map((s) => prepared.images.scenario(s)),
      ]);
      const t0 = performance.now();
      env.pool.prefetch(images);
      for (;;) {
        const v = env.pool.views();
        if (v.every((e) => e.primary || e.images.present >= images.length)) break;
        await new Promise((r) => setTimeout(r, 250));
      }
      const copied = env.pool.views().reduce((n, e) => n + e.images.copiedBytes, 0);
      process.stdout.write(
        `images placed on the second engine: ${(copied / 1e6).toFixed(0)} MB in ${((performance.now() - t0) / 1000).toFixed(1)} s (once per image set)\n`,
      );
      return { label, wallS: 0, verdict: undefined as unknown as Verdict, placed: new Map() };
    }
    const t0 = performance.now();
    const r = await evaluatePack(env, { pack: loadPack(packBytes), label: "bench", source: "local", ...req });
    const wallS = (performance.now() - t0) / 1000;
    if (r.kind !== "verdict") throw new Error(`${label}: ${r.kind} ${"message" in r ? r.message : ""}`);
    const placed = new Map<string, string>();
    for (const line of readFileSync(logFile, "utf8").split("\n")) {
      if (!line.includes('"episode.placed"')) continue;
      const l = JSON.parse(line) as { engine: string; scenario: string };
      placed.set(l.scenario, l.engine);
    }
    process.stdout.write(
      `${label}: ${wallS.toFixed(1)} s wall, score ${r.verdict.score}, ${r.verdict.scenarios.length} episodes\n`,
    );
    return { label, wallS, verdict: r.verdict, placed };
  } finally {
    await env.close();
  }
}

async function main(): Promise<void> {
  const e2 = await startNetnsEngine();
  try {
    const two = `name=local url=local slots=${slots}; name=e2 url=${e2.url} slots=${slots} tls=${e2.tlsDir}`;
    await run("prepare", two, true);
    const one = await run(`1 engine × ${slots}`, `name=local url=local slots=${slots}`);
    const both = await run(`2 engines × ${slots}`, two);

    const scores = (v: Verdict) => v.scenarios.map((s) => s.quality).join(",");
    const same = scores(one.verdict) === scores(both.verdict);
    const orch = (row: Row, engine?: string) =>
      mean(
        row.verdict.scenarios
          .filter((s) => engine === undefined || row.placed.get(s.scenario) === engine)
          .map(orchestrationMs),
      );
    const onFirst = orch(both, "local");
    const onSecond = orch(both, "e2");
    const n2 = both.verdict.scenarios.filter((s) => both.placed.get(s.scenario) === "e2").length;
    process.stdout.write(
      [
        "",
        "run                 wall (s)  speed-up  orchestration per episode (s)",
        `${one.label.padEnd(18)}  ${one.wallS.toFixed(1).padStart(8)}  ${"1.00×".padStart(8)}  ${(orch(one) / 1000).toFixed(2)}`,
        `${both.label.padEnd(18)}  ${both.wallS.toFixed(1).padStart(8)}  ${`${(one.wallS / both.wallS).toFixed(2)}×`.padStart(8)}  ${(orch(both) / 1000).toFixed(2)} (first engine ${(onFirst / 1000).toFixed(2)}, second ${(onSecond / 1000).toFixed(2)} over ${n2} episodes)`,
        "",
        `placement overhead per episode on the second engine (relay, remote API): ${((onSecond - onFirst) / 1000).toFixed(2)} s`,
        `same scores on one and two engines: ${same ? "yes" : `NO (${scores(one.verdict)} vs ${scores(both.verdict)})`}`,
        `logs: ${logDir}`,
        "",
      ].join("\n"),
    );
  } finally {
    await e2.stop();
  }
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? err}\n`);
  process.exitCode = 1;
});
