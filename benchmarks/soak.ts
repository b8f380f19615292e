/**
 * benchmarks/soak.ts — evaluations back to back in one process, as the daemon runs them for months, with
 * the Engy simulator: does anything grow? Samples RSS, V8 heap and the process's open handles
 * (process.getActiveResourcesInfo) after every evaluation, and counts the containers and networks
 * left behind at the end. Not in CI (an hour by default).
 *
 *   npx tsx benchmarks/soak.ts [--minutes 60] [--pack examples/packs/escalate.json]
 *                         [--scenarios access-log-regex,binary-flag-hunt] [--concurrency 2]
 *
 * Growth is judged on the second half against the first (warm-up excluded): RSS and heap slopes per
 * hour from a least-squares fit, and handles first vs last. The baseline is this run's own first
 * samples; the machine's noise shows as scatter, not as a slope. Expect the heap to rise until the
 * meter's bounded caches fill (the last 256 episodes' receipts stay in memory): judge growth on a
 * run longer than ~130 evaluations of 2 scenarios.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { loadConfig } from "../src/config.js";
import { openEnvironment } from "../src/environment/index.js";
import { evaluatePack, resolveRequest } from "../src/evaluation/index.js";
import { createLogger } from "../src/log.js";
import { loadPack } from "../src/pack/index.js";
import { LABEL } from "../src/sandbox/labels.js";

const { values } = parseArgs({
  options: {
    minutes: { type: "string", default: "60" },
    pack: { type: "string", default: "examples/packs/escalate.json" },
    scenarios: { type: "string", default: "access-log-regex,binary-flag-hunt" },
    concurrency: { type: "string", default: "2" },
  },
});

interface Sample {
  n: number;
  tS: number;
  rssMb: number;
  heapMb: number;
  handles: number;
  kind: string;
}

const MB = 1024 * 1024;

/** Least-squares slope of y over x. */
function slope(xs: number[], ys: number[]): number {
  const n = xs.length;
  if (n < 2) return 0;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

async function main(): Promise<void> {
  const minutes = Number(values.minutes);
  const dataDir = mkdtempSync(join(tmpdir(), "bench-soak-"));
  const config = loadConfig({
    ...process.env,
    DATA_DIR: dataDir,
    LLM_API_KEY: "",
    ENGY_SIM_LATENCY_SCALE: "0",
    LOG_LEVEL: "info",
  });
  const log = createLogger({
    level: "info",
    destination: (await import("pino")).default.destination(join(dataDir, "soak.log")),
  });
  const env = await openEnvironment(config, { log });
  const packBytes = readFileSync(values.pack!);
  const scenarios = values.scenarios!.split(",");
  const samples: Sample[] = [];
  const session = env.sandbox.session.id;
  try {
    await env.bench.prepare(resolveRequest(env, { scenarios }));
    const t0 = performance.now();
    const deadline = t0 + minutes * 60_000;
    process.stdout.write(
      `soak: ${minutes} min, ${scenarios.length} scenarios per evaluation, data ${dataDir}\n`,
    );
    process.stdout.write("   n   t (s)  RSS MB  heap MB  handles  result\n");
    for (let n = 1; performance.now() < deadline; n++) {
      const r = await evaluatePack(env, {
        pack: loadPack(packBytes),
        label: `soak-${n}`,
        source: "local",
        scenarios,
        concurrency: Number(values.concurrency),
      });
      global.gc?.();
      const m = process.memoryUsage();
      const s: Sample = {
        n,
        tS: (performance.now() - t0) / 1000,
        rssMb: m.rss / MB,
        heapMb: m.heapUsed / MB,
        handles: process.getActiveResourcesInfo().length,
        kind: r.kind === "verdict" ? `score ${r.verdict.score}` : r.kind,
      };
      samples.push(s);
      process.stdout.write(
        `${String(n).padStart(4)}  ${s.tS.toFixed(0).padStart(6)}  ${s.rssMb.toFixed(0).padStart(6)}  ${s.heapMb.toFixed(1).padStart(7)}  ${String(s.handles).padStart(7)}  ${s.kind}\n`,
      );
    }
  } finally {
    await env.close();
  }

  const Docker = (await import("dockerode")).default;
  const docker = new Docker({ socketPath: config.evaluation.dockerSocket });
  // This run's own session only: other validators or tests may share the engine.
  const filters = { label: [`${LABEL.session}=${session}`] };
  const left = {
    containers: (await docker.listContainers({ all: true, filters })).length,
    networks: (await docker.listNetworks({ filters })).length,
  };
  const half = samples.slice(Math.floor(samples.length / 2));
  const hours = (xs: Sample[]) => xs.map((x) => x.tS / 3600);
  const rssSlope = slope(
    hours(half),
    half.map((x) => x.rssMb),
  );
  const heapSlope = slope(
    hours(half),
    half.map((x) => x.heapMb),
  );
  const first = samples[0];
  const last = samples.at(-1);
  process.stdout.write(
    `\nevaluations: ${samples.length}; second half: RSS ${rssSlope >= 0 ? "+" : ""}${rssSlope.toFixed(1)} MB/h, heap ${heapSlope >= 0 ? "+" : ""}${heapSlope.toFixed(1)} MB/h; handles first ${first?.handles} last ${last?.handles}; RSS first ${first?.rssMb.toFixed(0)} MB last ${last?.rssMb.toFixed(0)} MB\n`,
  );
  process.stdout.write(`left behind by this run: ${left.containers} containers, ${left.networks} networks\n`);
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? err}\n`);
  process.exitCode = 1;
});
