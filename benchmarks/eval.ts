/**
 * benchmarks/eval.ts — wall time of evaluating one pack over a scenario set at concurrency 1, 2 and 4,
 * with the simulator's latency profile on (model calls take time, as real ones do, scaled down),
 * reported as speed-up against concurrency 1 measured in the same run; the share of episode wall
 * time spent outside the agent and the verifier (orchestration); peak RSS of this process.
 *
 *   npx tsx benchmarks/eval.ts [--pack examples/packs/advisers.json] [--suite builtin] [--latency-scale 0.3]
 *                         [--levels 1,2,4] [--scenarios a,b]
 *
 * Images are built before timing starts (a first run builds them once).
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { openEnvironment } from "../src/environment/index.js";
import type { Verdict } from "../src/evaluation/index.js";
import { evaluatePack, resolveRequest } from "../src/evaluation/index.js";
import { createLogger } from "../src/log.js";
import { loadPack } from "../src/pack/index.js";

import { simulatorConfig } from "./sim-config.js";

const { values } = parseArgs({
  options: {
    pack: { type: "string", default: "examples/packs/advisers.json" },
    suite: { type: "string", default: "builtin" },
    "latency-scale": { type: "string", default: "0.3" },
    levels: { type: "string", default: "1,2,4" },
    scenarios: { type: "string" },
  },
});

const levels = values.levels!.split(",").map(Number);
const packBytes = readFileSync(values.pack!);
const scenarioNames = values.scenarios?.split(",");

function pct(x: number): string {
  return `${(x * 100).toFixed(1)} %`;
}

async function main(): Promise<void> {
  const rows: Array<{ c: number; wallS: number; orchestration: number; verdict: Verdict }> = [];
  const logDir = mkdtempSync(join(tmpdir(), "bench-eval-"));
  for (const c of levels) {
    // A fresh database per level: no resume across levels, same simulator seed.
    const { config } = simulatorConfig(`bench-eval-c${c}-`, values["latency-scale"]);
    const log = createLogger({
      level: "info",
      destination: (await import("pino")).default.destination(join(logDir, `c${c}.log`)),
    });
    const env = await openEnvironment(config, { log });
    try {
      const req = {
        suite: values.suite!,
        ...(scenarioNames ? { scenarios: scenarioNames } : {}),
      };
      await env.bench.prepare(resolveRequest(env, req));
      const t0 = performance.now();
      const r = await evaluatePack(env, {
        pack: loadPack(packBytes),
        label: "bench",
        source: "local",
        concurrency: c,
        ...req,
      });
      const wallS = (performance.now() - t0) / 1000;
      if (r.kind !== "verdict") throw new Error(`level ${c}: ${r.kind}`);
      const v = r.verdict;
      let total = 0;
      let inside = 0;
      for (const s of v.scenarios) {
        total += s.timings.totalMs;
        inside += s.timings.agentMs + s.timings.verifyMs;
      }
      rows.push({ c, wallS, orchestration: total > 0 ? (total - inside) / total : 0, verdict: v });
      process.stdout.write(
        `concurrency ${c}: ${wallS.toFixed(1)} s wall, score ${v.score}, ${v.scenarios.length} episodes, orchestration ${pct(total > 0 ? (total - inside) / total : 0)}\n`,
      );
    } finally {
      await env.close();
    }
  }
  const base = rows.find((r) => r.c === 1) ?? rows[0]!;
  process.stdout.write("\nconcurrency  wall (s)  speed-up vs 1  orchestration share  score\n");
  for (const r of rows) {
    process.stdout.write(
      `${String(r.c).padStart(11)}  ${r.wallS.toFixed(1).padStart(8)}  ${(base.wallS / r.wallS).toFixed(2).padStart(12)}×  ${pct(r.orchestration).padStart(19)}  ${r.verdict.score}\n`,
    );
  }
  const rssMb = process.resourceUsage().maxRSS / 1024;
  process.stdout.write(`\npeak RSS of this process: ${rssMb.toFixed(0)} MB (goal < 250 MB)\n`);
  process.stdout.write(`goals: ≥ 1.8× at 2, ≥ 3× at 4, orchestration < 10 %\nlogs: ${logDir}\n`);
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? err}\n`);
  process.exitCode = 1;
});
