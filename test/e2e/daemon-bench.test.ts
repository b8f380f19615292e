/**
 * `trajrl-validator run` evaluating an epoch on the subnet's benchmark: the offline trajrl-bench
 * pushed to a real registry on loopback (local copies removed), EVAL_ENABLED=1, the fake platform
 * opening an epoch whose spec this validator does not know — upstream's rule: evaluate the local
 * spec and say so — and the subtensor test node. The posted verdict carries the registry's digests,
 * the resolved spec and upstream's scenario_results. The built-in suite never votes on a real
 * network: asking for it there holds the start (the process stays up) with the fix named.
 *
 * Network: registry, simulator, platform and chain on loopback; episode containers on their own
 * internal networks, the verifier on none.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Docker from "dockerode";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { BenchBuildResult } from "../../src/bench/index.js";
import { FakePlatform } from "../fakes/platform.js";
import { leftoversOf, startCli } from "../helpers/cli.js";
import { startSubnet, testEnv, until, writeWallet } from "../helpers/daemon.js";
import { requireDocker } from "../helpers/docker.js";
import { REPO_ROOT } from "../helpers/episode.js";
import { pushOfflineBench, REGISTRY, untag } from "../helpers/registry.js";

const RUN = randomBytes(4).toString("hex");
const TARGET = `${REGISTRY}/trajrl-e2e`;
const TAG = `d${RUN}`;
const SCENARIOS = ["binary-flag-hunt", "access-log-regex"];
const LOCAL_SPEC = 90_002;

let docker: Docker;
let built: BenchBuildResult;
let specsFile: string;
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => {});
});

const startRun = (env: Record<string, string>) => startCli(["run", "--no-status"], { env });

async function world(extra: Record<string, string>) {
  const dir = mkdtempSync(join(tmpdir(), "daemon-bench-"));
  const wallet = await writeWallet(dir);
  const subnet = await startSubnet(wallet.ss58);
  cleanups.push(() => subnet.node.stop());
  const fake = await FakePlatform.start({ validators: [wallet.ss58] });
  cleanups.push(() => fake.close());
  const env = testEnv({
    dataDir: join(dir, "data"),
    wallet,
    platformUrl: fake.url,
    chainUrl: subnet.node.url,
    env: { LLM_API_KEY: "", ENGY_SIM_SEED: "11", ENGY_SIM_LATENCY_SCALE: "0", ...extra },
  });
  return { subnet, fake, env };
}

beforeAll(async () => {
  docker = await requireDocker();
  // The local copies go: everything the evaluation runs comes from the registry.
  built = await pushOfflineBench(docker, { target: TARGET, tag: TAG, scenarios: SCENARIOS });
  specsFile = join(mkdtempSync(join(tmpdir(), "daemon-specs-")), "subnet-specs.json");
  writeFileSync(
    specsFile,
    JSON.stringify({
      local: LOCAL_SPEC,
      specs: { [LOCAL_SPEC]: { scenarios: SCENARIOS, episode_cap_usd: 0.3 } },
    }),
  );
}, 900_000);

afterAll(async () => {
  for (const ref of [built?.base.ref, ...(built?.scenarios ?? []).map((s) => s.ref)])
    if (ref) await untag(docker, ref);
});

describe("the daemon on the subnet's benchmark", () => {
  it("evaluates an epoch on trajrl-bench pulled from a registry; an unknown spec evaluates the local spec, and the verdict says so", async () => {
    const w = await world({
      EVAL_ENABLED: "1",
      // The fake chain answers any genesis on a local network; the bench is chosen explicitly.
      NETWORK: "local",
      BENCH_SOURCE: "registry",
      BENCH_IMAGE: built.base.ref,
      SUBNET_SPECS_FILE: specsFile,
      VERIFIER_NETWORK: "none",
    });
    const pack = Buffer.from(
      await (await import("node:fs/promises")).readFile(join(REPO_ROOT, "examples/packs/pin.json")),
    );
    const epoch = w.fake.openEpoch({
      packBytes: pack,
      challengerHotkey: w.subnet.challenger,
      challengerUid: w.subnet.uids.challenger,
      specNumber: 99,
    });
    const run = startRun(w.env);
    cleanups.push(async () => run.child.kill("SIGKILL"));
    await until(
      () => (w.fake.scores.get(epoch.challenge_epoch_id)?.length ?? 0) >= 1,
      600_000,
      "the verdict",
    );
    const body = w.fake.scores.get(epoch.challenge_epoch_id)![0]! as Record<string, unknown> & {
      challenger: {
        qualified: boolean;
        scenario_results: Record<string, { judge: Record<string, unknown> }>;
      };
    };
    expect(body).toMatchObject({
      spec_number: LOCAL_SPEC,
      bench_image_hash: built.base.digest,
      harness_image_hash: SCENARIOS.map((n) => built.scenarios.find((s) => s.name === n)!.digest).join(":"),
      bench_version: built.version,
      llm_model: "policy:auto (default qwen3.8-27b)",
    });
    expect(Object.keys(body.challenger.scenario_results)).toEqual(SCENARIOS);
    expect(body.challenger.qualified).toBe(true);
    for (const r of Object.values(body.challenger.scenario_results))
      expect(r.judge).toMatchObject({ harness: "trajrl-bench", sandbox_version: built.version });
    // The fallback was logged with the spec the platform asked for.
    const lines = run
      .output()
      .split("\n")
      .flatMap((l) => {
        try {
          return [JSON.parse(l) as { msg?: string; requested?: unknown; using?: number }];
        } catch {
          return [];
        }
      });
    expect(lines.find((l) => l.msg === "evaluation.unknown_spec")).toMatchObject({
      requested: 99,
      using: LOCAL_SPEC,
    });
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
    // Nothing of the episodes is left.
    expect(await leftoversOf([run.child.pid!], { docker, thisHost: true })).toBe(0);
  }, 900_000);

  it("holds the start on a real network with the built-in suite or on the simulator, naming the fix", async () => {
    for (const [extra, refusal] of [
      [
        { EVAL_ENABLED: "1", NETWORK: "finney", BENCH_SOURCE: "builtin", LLM_API_KEY: "sk-trajrl-test" },
        /BENCH_SOURCE=builtin cannot vote on finney/,
      ],
      [{ EVAL_ENABLED: "1", NETWORK: "finney" }, /EVAL_ENABLED is on for finney but LLM_API_KEY is not set/],
    ] as const) {
      const w = await world(extra);
      const run = startRun(w.env);
      cleanups.push(async () => run.child.kill("SIGKILL"));
      await until(() => run.output().includes('"msg":"daemon.start_held"'), 120_000, "the held start");
      expect(run.output()).toMatch(refusal);
      expect(run.output()).not.toMatch(/\n\s+at /);
      // Held, not exited (a supervisor would loop on an exit); SIGTERM ends it cleanly.
      expect(run.child.exitCode).toBeNull();
      run.child.kill("SIGTERM");
      expect(await run.exited).toBe(0);
    }
  }, 300_000);
});
