/**
 * What the subnet's benchmark costs before an agent runs, against the built-in suite, on a warm
 * cache (images already local):
 *   npx tsx benchmarks/bench-source.ts [--rounds 3] [--scenarios a,b]
 *
 * "prepare": per scenario, the registry bench's pull (a manifest check when nothing changed) and
 * its two probes (throw-away containers of the bench image), vs the built-in suite's image
 * resolution (hashing each build context, an inspect). "set-up": per episode, images + networks +
 * sidecar healthy + agent started — the built-in runtime (our agent held at a stdin gate, our
 * sidecar image) vs the bench runtime (the scenario image's own entrypoint, /workspace prepared
 * with root steps, the sidecar from the bench image running our SDK file, Hermes exec'd).
 * Needs the Docker engine and the local registry (`npm run setup`). Rounds alternate the two
 * paths; medians are shown with the ratio bench/builtin.
 */
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import {
  BuiltinBench,
  OfflineBench,
  ProjectImages,
  PUBLISHED_SPECS,
  RegistryBench,
} from "../src/bench/index.js";
import { startEngySim } from "../src/engy-sim/index.js";
import { runEpisode } from "../src/episode/index.js";
import { loadAllowlist, loadPriceTable, Meter } from "../src/meter/index.js";
import { loadPack } from "../src/pack/index.js";
import { sdkSingleFile } from "../src/policy/index.js";
import { Sandbox } from "../src/sandbox/index.js";
import { loadCatalogue } from "../src/scenarios/index.js";

const ROOT = resolve(import.meta.dirname, "..");
const arg = (name: string) => {
  const k = process.argv.indexOf(name);
  return k > 0 ? process.argv[k + 1] : undefined;
};
const rounds = Number(arg("--rounds") ?? 3);
const scenarios = (arg("--scenarios") ?? "binary-flag-hunt,access-log-regex").split(",");
const REGISTRY = `127.0.0.1:${process.env.TRAJRL_REGISTRY_PORT ?? "5000"}`;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const ms = (x: number) => `${Math.round(x)} ms`;

async function main(): Promise<void> {
  const sandbox = await Sandbox.open({ reapIntervalMs: 0, episodeRuntime: "runc" });
  const sim = await startEngySim({
    port: 0,
    seed: 11,
    scenariosDir: join(ROOT, "scenarios"),
    latencyScale: 0,
  });
  const meter = new Meter({
    upstreamUrl: sim.url,
    apiKey: "sim",
    allowlist: loadAllowlist(),
    prices: loadPriceTable(),
  });
  try {
    const built = await new OfflineBench(sandbox.docker, { repoRoot: ROOT }).build({
      target: `${REGISTRY}/trajrl-benchmark`,
      tag: "warm",
      scenarios,
      push: true,
    });
    const catalogue = await loadCatalogue(join(ROOT, "scenarios"));
    const project = new ProjectImages(sandbox.docker, { repoRoot: ROOT });
    const builtin = new BuiltinBench(catalogue, project, { episodeCapUsd: 0.3 });
    const sdk = sdkSingleFile();
    const registry = new RegistryBench({
      docker: sandbox.docker,
      session: sandbox.session,
      ref: built.base.ref,
      specs: { local: 1, specs: new Map([[1, { scenarios, episodeCapUsd: 0.3 }], ...PUBLISHED_SPECS.specs]) },
      sdk: { entry: sdk.name, files: [{ path: sdk.name, data: sdk.content }] },
      verifierNetwork: "none",
    });
    const pack = loadPack(
      Buffer.from(JSON.stringify({ files: { "SKILL.md": "# Notes\n\nDo the task.\n" } })),
    );
    if (!pack.ok) throw new Error(pack.rejection.message);
    const out = await mkdtemp(join(tmpdir(), "bench-source-"));

    // Warm both caches once.
    const rb = registry.resolve({ specNumber: 1 });
    const bb = builtin.resolve({ scenarios });
    await registry.prepare(rb);
    await builtin.prepare(bb);

    const prep = { registry: [] as number[], builtin: [] as number[] };
    const setup = { registry: [] as number[], builtin: [] as number[] };
    for (let r = 0; r < rounds; r++) {
      let t = performance.now();
      const preparedR = await registry.prepare(rb);
      prep.registry.push((performance.now() - t) / scenarios.length);
      t = performance.now();
      const preparedB = await builtin.prepare(bb);
      prep.builtin.push((performance.now() - t) / scenarios.length);
      for (const [kind, p] of [
        ["registry", preparedR],
        ["builtin", preparedB],
      ] as const) {
        const res = await runEpisode({
          sandbox,
          images: p.images,
          runtime: p.runtime,
          meter,
          pack: pack.pack,
          scenario: p.scenarios[0]!,
          capUsd: 0.3,
          outDir: join(out, `${kind}-${r}`),
          defaultModel: "glm-5.3-flash",
          timeouts: { agentMs: 1, stopGraceMs: 1_000 },
        });
        setup[kind].push(res.timings.images_ms + res.timings.setup_ms);
      }
    }
    const row = (name: string, a: number[], b: number[]) =>
      console.log(
        `${name.padEnd(34)} bench ${ms(median(a)).padStart(8)}   built-in ${ms(median(b)).padStart(8)}   ratio ${(median(a) / median(b)).toFixed(2)}×`,
      );
    console.log(`warm cache, ${scenarios.length} scenarios, ${rounds} rounds (medians)`);
    row("prepare per scenario (pull+probe)", prep.registry, prep.builtin);
    row("episode set-up (images..agent up)", setup.registry, setup.builtin);
  } finally {
    await meter.stop();
    await sim.close();
    await sandbox.close();
  }
}

await main();
