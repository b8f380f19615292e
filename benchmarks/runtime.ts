/**
 * benchmarks/runtime.ts — what gVisor costs: the same packs over the same scenarios, evaluated with every
 * episode container under runc and under gVisor (EPISODE_RUNTIME=runc, then runsc), in one run,
 * rounds interleaved so the machine's load falls on both alike. Per runtime: episode wall time, the
 * agent's and the verifier's time, orchestration time (the episode outside those two: images,
 * networks, the sidecar's start and health, collection, teardown), and the memory an idle sandbox
 * holds (the sidecar image's Python with its libraries loaded, under each runtime). Ratios are
 * runsc ÷ runc from the same run; scores must be equal (they are printed).
 *
 *   npx tsx benchmarks/runtime.ts [--packs examples/packs/pin.json,examples/packs/advisers.json]
 *                            [--suite quick] [--scenarios a,b] [--rounds 1] [--latency-scale 0.3]
 *                            [--gvisor runsc]
 *
 * Episodes run one at a time (concurrency 1): an episode's wall time is its own, not a share of
 * two cores. `--gvisor runsc-kvm` measures another registration of gVisor on the engine (a
 * platform: README, Several hosts). Images are built before timing starts.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ProjectImages } from "../src/bench/index.js";
import { openEnvironment } from "../src/environment/index.js";
import { evaluatePack, resolveRequest, type Verdict } from "../src/evaluation/index.js";
import { createLogger } from "../src/log.js";
import { loadPack } from "../src/pack/index.js";
import { REPO_ROOT } from "../src/repo.js";
import { createOptions } from "../src/sandbox/container-spec.js";
import { connectDocker, removeContainer, startContainer } from "../src/sandbox/index.js";
import { LABEL } from "../src/sandbox/labels.js";

import { simulatorConfig } from "./sim-config.js";

const { values } = parseArgs({
  options: {
    packs: { type: "string", default: "examples/packs/pin.json,examples/packs/advisers.json" },
    suite: { type: "string", default: "quick" },
    scenarios: { type: "string" },
    rounds: { type: "string", default: "1" },
    "latency-scale": { type: "string", default: "0.3" },
    gvisor: { type: "string", default: "runsc" },
  },
});

type Runtime = "runc" | "gvisor";
interface Sums {
  episodes: number;
  totalMs: number;
  agentMs: number;
  verifyMs: number;
  scores: string[];
}
const sums: Record<Runtime, Sums> = {
  runc: { episodes: 0, totalMs: 0, agentMs: 0, verifyMs: 0, scores: [] },
  gvisor: { episodes: 0, totalMs: 0, agentMs: 0, verifyMs: 0, scores: [] },
};

function add(r: Runtime, label: string, v: Verdict): void {
  for (const s of v.scenarios) {
    sums[r].episodes++;
    sums[r].totalMs += s.timings.totalMs;
    sums[r].agentMs += s.timings.agentMs;
    sums[r].verifyMs += s.timings.verifyMs;
  }
  sums[r].scores.push(`${label} ${v.score}`);
}

/**
 * EPISODE_RUNTIME=runsc resolves the engine's runtime named `runsc`; another registration
 * (`--gvisor runsc-kvm`) is measured by giving its name to the sandbox the environment opened.
 */
async function evaluateUnder(r: Runtime, round: number, logDir: string): Promise<void> {
  const { config } = simulatorConfig(`bench-runtime-${r}-`, values["latency-scale"], {
    EPISODE_RUNTIME: r === "runc" ? "runc" : "runsc",
  });
  const log = createLogger({
    level: "info",
    destination: (await import("pino")).default.destination(join(logDir, `${r}-${round}.log`)),
  });
  const env = await openEnvironment(config, { log });
  try {
    const got = env.sandbox.episodeRuntime;
    if (r === "gvisor" && values.gvisor !== "runsc")
      env.sandbox.useEpisodeRuntime({ setting: "runsc", name: values.gvisor!, gvisor: true });
    process.stdout.write(
      `round ${round}, ${r}: episode containers under ${r === "gvisor" ? values.gvisor : got?.name}\n`,
    );
    const req = {
      suite: values.suite!,
      ...(values.scenarios ? { scenarios: values.scenarios.split(",") } : {}),
    };
    await env.bench.prepare(resolveRequest(env, req));
    for (const file of values.packs!.split(",")) {
      const res = await evaluatePack(env, {
        pack: loadPack(readFileSync(file)),
        label: file,
        source: "local",
        concurrency: 1,
        ...req,
      });
      if (res.kind !== "verdict") throw new Error(`${r} ${file}: ${res.kind}`);
      add(r, file, res.verdict);
    }
  } finally {
    await env.close();
  }
}

/** Memory an idle sandbox holds: the sidecar's Python with aiohttp and httpx imported, asleep. */
async function idleMemory(runtime: { name: string; gvisor: boolean }): Promise<number> {
  const docker = connectDocker();
  const image = await new ProjectImages(docker, { repoRoot: REPO_ROOT }).sidecar();
  const name = `trajrl-bench-mem-${runtime.name}-${process.pid}`;
  const spec = {
    name,
    image: image.ref,
    entrypoint: ["python3", "-c", "import aiohttp, httpx, asyncio, time; time.sleep(120)"],
    labels: { [LABEL.role]: "sidecar", [LABEL.session]: `bench-${process.pid}` },
    limits: { cpus: 1, memoryBytes: 1024 ** 3, pidsLimit: 256 },
    network: { kind: "none" as const },
  };
  try {
    await startContainer(await docker.createContainer(createOptions(spec, runtime)));
    await new Promise((r) => setTimeout(r, 8000));
    const stats = (await docker.getContainer(name).stats({ stream: false })) as {
      memory_stats: { usage?: number; stats?: { cache?: number; total_inactive_file?: number } };
    };
    const m = stats.memory_stats;
    // What counts against the container's limit, page cache of files aside.
    return ((m.usage ?? 0) - (m.stats?.total_inactive_file ?? m.stats?.cache ?? 0)) / 1024 / 1024;
  } finally {
    await removeContainer(docker, name);
  }
}

const ratio = (a: number, b: number) => (b > 0 ? `${(a / b).toFixed(2)}×` : "–");
const mean = (s: Sums, k: "totalMs" | "agentMs" | "verifyMs") => (s.episodes ? s[k] / s.episodes / 1000 : 0);
const orchestration = (s: Sums) =>
  s.episodes ? (s.totalMs - s.agentMs - s.verifyMs) / s.episodes / 1000 : 0;

async function main(): Promise<void> {
  const logDir = mkdtempSync(join(tmpdir(), "bench-runtime-"));
  const rounds = Number(values.rounds);
  for (let k = 1; k <= rounds; k++) {
    // Interleaved, and the order flipped each round, so drift in the machine's load is shared.
    const order: Runtime[] = k % 2 ? ["runc", "gvisor"] : ["gvisor", "runc"];
    for (const r of order) await evaluateUnder(r, k, logDir);
  }
  const [a, b] = [sums.runc, sums.gvisor];
  const row = (what: string, x: number, y: number) =>
    process.stdout.write(
      `${what.padEnd(34)}${x.toFixed(2).padStart(9)}${y.toFixed(2).padStart(11)}${ratio(y, x).padStart(9)}\n`,
    );
  process.stdout.write(
    `\nper episode (s), ${a.episodes} + ${b.episodes} episodes      runc     gVisor    ratio\n`,
  );
  row("episode wall time", mean(a, "totalMs"), mean(b, "totalMs"));
  row("  agent", mean(a, "agentMs"), mean(b, "agentMs"));
  row("  verifier", mean(a, "verifyMs"), mean(b, "verifyMs"));
  row("  orchestration (the rest)", orchestration(a), orchestration(b));
  const memA = await idleMemory({ name: "runc", gvisor: false });
  const memB = await idleMemory({ name: values.gvisor!, gvisor: true });
  row("idle sidecar memory (MB, cgroup)", memA, memB);
  process.stdout.write(`\nscores runc:   ${a.scores.join(", ")}\nscores gVisor: ${b.scores.join(", ")}\n`);
  process.stdout.write(`same scores: ${a.scores.join() === b.scores.join() ? "yes" : "NO"}\n`);
  process.stdout.write(`goal: gVisor ≤ 1.5× the episode wall time of runc\nlogs: ${logDir}\n`);
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? err}\n`);
  process.exitCode = 1;
});
