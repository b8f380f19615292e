/**
 * The subnet's benchmark path end to end: the offline trajrl-bench (our scenarios in upstream's
 * image contract) pushed to a real registry on loopback (Debian's docker-registry,
 * scripts/registry-up.sh), the local copies removed, then `trajrl-validator eval --bench REF` pulls
 * it, probes it and scores a pack through Hermes (our `hermes`) in the scenario images, the sidecar
 * running from the bench image. Shown: the verdict's digests are the registry's; a second
 * evaluation pulls nothing new; a re-pushed tag is pulled and reported with its new digest; a
 * missing scenario image is an infra error (the run is discarded), not a score of 0; the provider
 * key reaches the provider (a simulator of this test that accepts only that key) and nothing else;
 * nothing of the episodes is left behind.
 *
 * Network: the registry and the simulator listen on loopback; episode containers get only their
 * own internal networks and the verifier none (VERIFIER_NETWORK=none).
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AGENT_VERSION } from "../../agent/contract.js";
import { type BenchBuildResult, OfflineBench } from "../../src/bench/index.js";
import { type EngySim, startEngySim } from "../../src/engy-sim/index.js";
import { packTar } from "../../src/sandbox/index.js";
import { leftoversOf } from "../helpers/cli.js";
import { requireDocker } from "../helpers/docker.js";
import { REPO_ROOT, SCENARIOS_DIR } from "../helpers/episode.js";
import { runEvalCli } from "../helpers/eval-cli.js";
import { pushOfflineBench, REGISTRY, untag } from "../helpers/registry.js";

const RUN = randomBytes(4).toString("hex");
const TARGET = `${REGISTRY}/trajrl-e2e`;
const TAG = `e${RUN}`;
const SCENARIOS = ["access-log-regex", "binary-flag-hunt"];
const SPEC = 90_001;
const MARKER = `engy-key-${randomBytes(8).toString("hex")}`;
const PACK = join(REPO_ROOT, "examples/packs/pin.json");

let docker: Docker;
let built: BenchBuildResult;
let sim: EngySim;
let specsFile: string;
const pids: number[] = [];

const baseRef = () => `${TARGET}/sandbox-agent:${TAG}`;
const digestOf = (name: string) => built.scenarios.find((s) => s.name === name)!.digest!;

interface EvalJson {
  label: string;
  kind: "verdict" | "discarded" | "aborted";
  code?: string;
  verdict?: {
    scenarios: Array<{ scenario: string; status: string; failure?: { class: string; code: string } }>;
    provenance: { bench?: { source: string; benchImageHash?: string; harnessImageHash: string } };
    costUsd: number;
  };
  payload?: Record<string, unknown> & {
    challenger: { score: number; scenario_results: Record<string, Record<string, unknown>> };
  };
}

/** The JSON array `eval --json` prints: stdout holds nothing else. */
function parseEval(stdout: string): EvalJson[] {
  return JSON.parse(stdout) as EvalJson[];
}

async function evalBench(ref: string) {
  const dataDir = mkdtempSync(join(tmpdir(), "bench-registry-"));
  const r = await runEvalCli(
    dataDir,
    // --progress: the pull lines on stderr (not a terminal here), which the tests read.
    [PACK, "--bench", ref, "--spec", String(SPEC), "--json", "--progress", "--concurrency", "2"],
    {
      env: {
        NETWORK: "local",
        SUBNET_SPECS_FILE: specsFile,
        VERIFIER_NETWORK: "none",
        LLM_API_KEY: MARKER,
        OFFLINE_LLM_BASE_URL: sim.url,
      },
    },
  );
  pids.push(r.pid);
  return { ...r, dataDir };
}

/** Every file under `dir` that holds `needle`. */
function filesHolding(dir: string, needle: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...filesHolding(p, needle));
    else if (e.isFile() && statSync(p).size < 64 * 1024 * 1024 && readFileSync(p).includes(needle))
      out.push(p);
  }
  return out;
}

beforeAll(async () => {
  docker = await requireDocker();
  // The local copies go: everything the evaluation runs comes from the registry.
  built = await pushOfflineBench(docker, { target: TARGET, tag: TAG, scenarios: SCENARIOS });
  specsFile = join(mkdtempSync(join(tmpdir(), "bench-specs-")), "subnet-specs.json");
  writeFileSync(
    specsFile,
    JSON.stringify({ local: SPEC, specs: { [SPEC]: { scenarios: SCENARIOS, episode_cap_usd: 0.3 } } }),
  );
  sim = await startEngySim({
    port: 0,
    seed: 11,
    scenariosDir: SCENARIOS_DIR,
    latencyScale: 0,
    apiKeys: [MARKER],
  });
}, 900_000);

afterAll(async () => {
  await sim?.close();
  for (const ref of [built?.base.ref, ...(built?.scenarios ?? []).map((s) => s.ref)])
    if (ref) await untag(docker, ref);
});

describe("eval --bench: trajrl-bench pulled from a registry", () => {
  it("scores the pulled bench through Hermes; the verdict carries the registry's digests in upstream's payload", async () => {
    const r = await evalBench(baseRef());
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const [result] = parseEval(r.stdout);
    expect(result?.kind).toBe("verdict");
    const v = result!.verdict!;
    // Every episode ran and was scored: no infra or provider failure anywhere.
    expect(v.scenarios.map((s) => s.scenario)).toEqual(SCENARIOS);
    for (const s of v.scenarios) {
      expect(s.status, JSON.stringify(s)).toBe("scored");
      expect(["infra", "upstream"]).not.toContain(s.failure?.class);
    }
    expect(v.costUsd).toBeGreaterThan(0);
    // The pin pack earns on the pulled bench what it earns on the built-in suite (0.5 + 1.0 with
    // seed 11): the deliverable crossed into upstream's verifier layout and was graded there.
    expect(result!.payload!.challenger.score).toBeGreaterThan(0);
    expect(result!.payload!.challenger).toMatchObject({ qualified: true });
    // The digests are the registry's (what `bench build --push` got back from it).
    expect(built.base.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    const p = result!.payload!;
    expect(p).toMatchObject({
      spec_number: SPEC,
      bench_image_hash: built.base.digest,
      harness_image_hash: SCENARIOS.map(digestOf).join(":"),
      harness_name: "trajrl-agent",
      harness_version: AGENT_VERSION,
      llm_model: "policy:auto (default qwen3.8-27b)",
    });
    expect(Object.keys(p.challenger.scenario_results)).toEqual(SCENARIOS);
    for (const entry of Object.values(p.challenger.scenario_results)) {
      expect(entry).toMatchObject({
        weight: 1,
        judge: { harness: "trajrl-bench", sandbox_version: built.version },
      });
      expect(Object.keys(entry.judge as object).sort()).toEqual(
        [
          "cost_by_model",
          "cost_usd",
          "harness",
          "meter_calls",
          "meter_refused",
          "overall_score",
          "policy_scan",
          "policy_setup_s",
          "policy_stalled",
          "provenance",
          "qualification_gate",
          "sandbox_version",
        ].sort(),
      );
    }
    // The key reached the provider (the simulator answers that key alone) and nothing else.
    expect(filesHolding(r.dataDir, MARKER)).toEqual([]);
    expect(r.stdout + r.stderr).not.toContain(MARKER);
    expect(await leftoversOf([r.pid])).toBe(0);
  }, 1_200_000);

  it("a second evaluation pulls nothing new; a re-pushed tag is pulled and reported with its new digest", async () => {
    const again = await evalBench(baseRef());
    expect(again.code, again.stderr.slice(-2000)).toBe(0);
    expect(again.stdout + again.stderr).not.toMatch(/pulled image/);
    expect(parseEval(again.stdout)[0]?.payload?.harness_image_hash).toBe(SCENARIOS.map(digestOf).join(":"));

    // Re-push one scenario's tag with a changed image (same content, one more label).
    const [changed] = SCENARIOS;
    const ref = built.scenarios.find((s) => s.name === changed)!.ref;
    const oldId = (await docker.getImage(ref).inspect()).Id;
    const ctx = await packTar([
      { name: "Dockerfile", data: `FROM ${ref}\nLABEL org.trajrl.test.repush="${RUN}"\n` },
    ]);
    const stream = await docker.buildImage(ctx as unknown as NodeJS.ReadableStream, { t: ref, pull: false });
    await new Promise((res, rej) =>
      docker.modem.followProgress(stream, (e) => (e ? rej(e) : res(undefined))),
    );
    const pushed = await new OfflineBench(docker, { repoRoot: REPO_ROOT }).push(ref);
    expect(pushed).not.toBe(digestOf(changed!));
    await untag(docker, ref);

    const third = await evalBench(baseRef());
    expect(third.code, third.stderr.slice(-2000)).toBe(0);
    expect(third.stdout + third.stderr).toMatch(new RegExp(`pulled image scenario/${changed}`));
    expect(parseEval(third.stdout)[0]?.payload?.harness_image_hash).toBe(
      SCENARIOS.map((n) => (n === changed ? pushed : digestOf(n))).join(":"),
    );
    // The image the tag used to name is not left dangling.
    const dangling = await docker.listImages({ filters: { dangling: ["true"] } });
    expect(dangling.map((i) => i.Id)).not.toContain(oldId);
    expect(await leftoversOf([again.pid, third.pid])).toBe(0);
  }, 1_800_000);

  it("a scenario image the registry does not have is an infra error: the run is discarded, never scored 0", async () => {
    // A bench whose tag has no scenario images pushed.
    const tag2 = `${TAG}-bare`;
    const bare = `${TARGET}/sandbox-agent:${tag2}`;
    await docker.getImage(built.base.cacheRef).tag({ repo: `${TARGET}/sandbox-agent`, tag: tag2 });
    await new OfflineBench(docker, { repoRoot: REPO_ROOT }).push(bare);
    const r = await evalBench(bare);
    await untag(docker, bare);
    expect(r.code).toBe(1);
    const [result] = parseEval(r.stdout);
    expect(result).toMatchObject({ kind: "discarded", code: "image_missing" });
    expect(result?.verdict).toBeUndefined();
    expect(await leftoversOf([r.pid])).toBe(0);
  }, 900_000);
});
