/**
 * Episode orchestration benchmark:
 *   npx tsx benchmarks/episode.ts [--rounds 5]
 *
 * "ours": runEpisode of an episode whose agent and verifier do nothing (the agent writes an empty
 * deliverable and exits; the verifier writes a one-test ctrf.json), with the real sidecar (pin
 * policy: its Python runtime boots to health), the real meter and the episode firewall.
 * "floor": the same Docker work done by the plain docker CLI in the same run: two internal
 * networks created and removed, the sidecar run detached until GET /health answers, then a bare
 * `docker run --rm` of the scenario image for the agent and one for the verifier, then removal.
 * Rounds alternate ours/floor (the machine is shared: medians and best of the rounds are shown).
 * Set-up = networks + sidecar healthy + agent started (ours: measured inside runEpisode).
 * The docker CLI is used here only as the baseline; product code talks to the engine via dockerode.
 */
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { ProjectImages } from "../src/bench/index.js";
import { startEngySim } from "../src/engy-sim/index.js";
import type { EpisodeScenario } from "../src/episode/index.js";
import { runEpisode } from "../src/episode/index.js";
import { loadAllowlist, loadPriceTable, Meter } from "../src/meter/index.js";
import { loadPack } from "../src/pack/index.js";
import { Sandbox } from "../src/sandbox/sandbox.js";

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "..");
const rounds = (() => {
  const k = process.argv.indexOf("--rounds");
  return k > 0 ? Number(process.argv[k + 1]) : 5;
})();

const docker = (...args: string[]) => run("docker", args, { maxBuffer: 16 * 1024 * 1024 });

function healthy(url: string): Promise<boolean> {
  return new Promise((res) => {
    const r = request(url, { timeout: 1000, agent: false }, (x) => {
      x.resume();
      res((x.statusCode ?? 500) < 300);
    });
    r.on("error", () => res(false));
    r.on("timeout", () => r.destroy());
    r.end();
  });
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const fmt = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

async function main(): Promise<void> {
  // A do-nothing scenario: the agent base image as is, a grader that passes one test at once.
  const dir = await mkdtemp(join(tmpdir(), "trajrl-bench-scenario-"));
  await mkdir(join(dir, "environment"), { recursive: true });
  await mkdir(join(dir, "tests"), { recursive: true });
  await writeFile(
    join(dir, "environment", "Dockerfile"),
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a Dockerfile ARG reference, not a JS template
    "ARG AGENT_BASE=trajrl/agent-base:latest\nFROM ${AGENT_BASE}\n",
  );
  await writeFile(
    join(dir, "tests", "test.sh"),
    `mkdir -p /logs/verifier\necho '{"results":{"tool":{"name":"bench"},"tests":[{"name":"noop","status":"passed","duration":0}]}}' > /logs/verifier/ctrf.json\necho 1 > /logs/verifier/reward.txt\n`,
  );
  const scenario: EpisodeScenario = {
    name: "bench-noop",
    dir,
    instruction: "Do nothing.\n",
    task: { agent: { timeout_sec: 60 }, verifier: { timeout_sec: 60, agent_output_path: "/app/out.txt" } },
  };
  const packed = loadPack(
    Buffer.from(
      JSON.stringify({
        schema_version: 1,
        files: { "SKILL.md": "# bench\n", "policy.json": JSON.stringify({ kind: "pin", model: "kimi-k3" }) },
      }),
    ),
  );
  if (!packed.ok) throw new Error(packed.rejection.message);

  const sim = await startEngySim({ port: 0, latencyScale: 0, scenariosDir: join(ROOT, "scenarios") });
  const meter = new Meter({
    upstreamUrl: sim.url,
    apiKey: "sim",
    allowlist: loadAllowlist(),
    prices: loadPriceTable(),
  });
  const sandbox = await Sandbox.open({ reapIntervalMs: 0, episodeRuntime: "runc" });
  const images = new ProjectImages(sandbox.docker, { repoRoot: ROOT });
  const [sidecarImg, scenarioImg] = await Promise.all([images.sidecar(), images.scenario(scenario)]);
  const outDir = await mkdtemp(join(tmpdir(), "trajrl-bench-out-"));

  const ours = {
    total: [] as number[],
    setup: [] as number[],
    agent: [] as number[],
    verify: [] as number[],
  };
  const floor = { total: [] as number[], networks: [] as number[], sidecar: [] as number[] };

  const episodeOnce = async () => {
    const r = await runEpisode({
      sandbox,
      images,
      meter,
      pack: packed.pack,
      scenario,
      capUsd: 0.01,
      outDir,
      defaultModel: "kimi-k3",
      agentCommand: "/bin/sh -c ': > /app/out.txt'",
    });
    if (r.status !== "scored" || r.quality !== 1)
      throw new Error(`bench episode: ${JSON.stringify(r.failure)}`);
    ours.total.push(r.timings.total_ms - r.timings.images_ms);
    ours.setup.push(r.timings.setup_ms);
    ours.agent.push(r.timings.agent_ms);
    ours.verify.push(r.timings.verify_ms);
  };

  const floorOnce = async (k: number) => {
    const tag = `trajrl-bench-${process.pid}-${k}`;
    const t0 = performance.now();
    await docker("network", "create", "--internal", "--label", "trajrl.bench=1", `${tag}-a`);
    await docker("network", "create", "--internal", "--label", "trajrl.bench=1", `${tag}-m`);
    const tn = performance.now() - t0;
    const ts = performance.now();
    const { stdout } = await docker(
      "run",
      "-d",
      "--rm",
      "--label",
      "trajrl.bench=1",
      "--name",
      `${tag}-sidecar`,
      "--network",
      `${tag}-a`,
      "--read-only",
      "--tmpfs",
      "/tmp",
      "-e",
      "DEFAULT_MODEL=kimi-k3",
      "-e",
      "EPISODE_TOKEN=x",
      sidecarImg.ref,
    );
    const id = stdout.trim();
    const ip = (
      await docker("inspect", "-f", `{{(index .NetworkSettings.Networks "${tag}-a").IPAddress}}`, id)
    ).stdout.trim();
    while (!(await healthy(`http://${ip}:8800/health`))) await new Promise((r) => setTimeout(r, 25));
    const tsd = performance.now() - ts;
    await docker(
      "run",
      "--rm",
      "--label",
      "trajrl.bench=1",
      "--network",
      `${tag}-a`,
      scenarioImg.ref,
      "true",
    );
    await docker("run", "--rm", "--label", "trajrl.bench=1", "--network", "none", scenarioImg.ref, "true");
    await docker("rm", "-f", id);
    await docker("network", "rm", `${tag}-a`, `${tag}-m`);
    floor.total.push(performance.now() - t0);
    floor.networks.push(tn);
    floor.sidecar.push(tsd);
  };

  try {
    await episodeOnce(); // warm-up (first use of the images, firewall, meter)
    ours.total.length = ours.setup.length = ours.agent.length = ours.verify.length = 0;
    for (let k = 0; k < rounds; k++) {
      await episodeOnce();
      await floorOnce(k);
    }
  } finally {
    await sandbox.close();
    await meter.stop();
    await sim.close();
    await rm(dir, { recursive: true, force: true });
    await rm(outDir, { recursive: true, force: true });
    await docker("image", "rm", "-f", scenarioImg.ref).catch(() => undefined);
  }

  const load = (await import("node:os")).loadavg()[0]!.toFixed(1);
  const lines = [
    `episode orchestration benchmark (${rounds} rounds, load average ${load} on ${(await import("node:os")).cpus().length} CPUs)`,
    `                          median      best`,
    `ours   episode total      ${fmt(median(ours.total)).padEnd(10)}  ${fmt(Math.min(...ours.total))}`,
    `       set-up             ${fmt(median(ours.setup)).padEnd(10)}  ${fmt(Math.min(...ours.setup))}   (networks + sidecar healthy + agent started)`,
    `       agent phase        ${fmt(median(ours.agent)).padEnd(10)}  ${fmt(Math.min(...ours.agent))}`,
    `       verify phase       ${fmt(median(ours.verify)).padEnd(10)}  ${fmt(Math.min(...ours.verify))}`,
    `floor  docker CLI total   ${fmt(median(floor.total)).padEnd(10)}  ${fmt(Math.min(...floor.total))}`,
    `       2 networks         ${fmt(median(floor.networks)).padEnd(10)}  ${fmt(Math.min(...floor.networks))}`,
    `       sidecar to health  ${fmt(median(floor.sidecar)).padEnd(10)}  ${fmt(Math.min(...floor.sidecar))}`,
    `ratio  ours / floor       ${(median(ours.total) / median(floor.total)).toFixed(2)}x (median)  ${(Math.min(...ours.total) / Math.min(...floor.total)).toFixed(2)}x (best)`,
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
}

await main();
