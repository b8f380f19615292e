/**
 * Evidence of the subnet's benchmark path: the offline trajrl-bench pushed to the loopback registry
 * (its local references removed), `eval --bench REF` scores a pack through it, and `verify`
 * re-grades each episode with the registry bench's verifier — the tests taken again from the bench
 * image, by the digest the evidence names (pulled by that digest), matched against the recorded
 * digest of `tests_files_b64`. Tests that are not the ones that graded it are not reproducible.
 *
 * Network: the registry listens on loopback; the verifier runs on `none` (VERIFIER_NETWORK=none).
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BenchBuildResult } from "../../src/bench/index.js";
import { type Manifest, manifestBytes, signManifest, type VerifyReport } from "../../src/evidence/index.js";
import { requireDocker } from "../helpers/docker.js";
import { runEvalCli } from "../helpers/eval-cli.js";
import { repack, runVerifyCli, testSigner, unpack } from "../helpers/evidence.js";
import { pushOfflineBench, REGISTRY, untag } from "../helpers/registry.js";

const RUN = randomBytes(4).toString("hex");
const TARGET = `${REGISTRY}/trajrl-evidence`;
const TAG = `v${RUN}`;
const SCENARIOS = ["access-log-regex", "binary-flag-hunt"];
const SPEC = 90_002;

let docker: Docker;
let built: BenchBuildResult;
let evidencePath: string;
const tmp = mkdtempSync(join(tmpdir(), "evidence-bench-"));

beforeAll(async () => {
  docker = await requireDocker();
  built = await pushOfflineBench(docker, { target: TARGET, tag: TAG, scenarios: SCENARIOS });
  const specs = join(tmp, "subnet-specs.json");
  writeFileSync(specs, JSON.stringify({ specs: { [SPEC]: { scenarios: SCENARIOS, episode_cap_usd: 0.3 } } }));
  const r = await runEvalCli(
    join(tmp, "data"),
    [
      "examples/packs/pin.json",
      "--bench",
      `${TARGET}/sandbox-agent:${TAG}`,
      "--spec",
      String(SPEC),
      "--json",
    ],
    { env: { NETWORK: "local", SUBNET_SPECS_FILE: specs, VERIFIER_NETWORK: "none" } },
  );
  expect(r.code, r.stderr).toBe(0);
  evidencePath = (JSON.parse(r.stdout) as Array<{ evidence: { path: string } }>)[0]!.evidence.path;
}, 1_200_000);

afterAll(async () => {
  for (const ref of [built?.base.ref, ...(built?.scenarios ?? []).map((s) => s.ref)])
    if (ref) await untag(docker, ref);
});

describe("evidence of the registry bench (e2e)", () => {
  it("verify re-grades with the bench's verifier and the bench image's own tests, by digest", async () => {
    const m = JSON.parse(
      (await unpack(readFileSync(evidencePath))).get("manifest.json")!.toString("utf8"),
    ) as Manifest;
    expect(m.bench).toMatchObject({ source: "registry", benchImageHash: expect.stringMatching(/^sha256:/) });
    expect(m.episodes.map((e) => [e.grading?.grader, e.grading?.tests.kind, e.grading?.network])).toEqual(
      SCENARIOS.map(() => ["bench", "tests_files", "none"]),
    );
    const r = await runVerifyCli([evidencePath, "--json"]);
    expect(r.code, r.stderr).toBe(0);
    const [report] = JSON.parse(r.stdout) as VerifyReport[];
    for (const s of report!.scenarios)
      expect([s.scenario, s.result, s.regraded]).toEqual([s.scenario, "reproduced", [s.posted]]);
  }, 600_000);

  it("tests other than the ones that graded it are not reproducible, and say so", async () => {
    const liar = await testSigner(4);
    const edited = await repack(readFileSync(evidencePath), (files) => {
      const m = JSON.parse(files.get("manifest.json")!.toString("utf8")) as Manifest;
      m.episodes[0]!.grading!.tests.digest = "0".repeat(64);
      m.validator.hotkey = liar.ss58;
      const bytes = manifestBytes(m);
      files.set("manifest.json", bytes);
      files.set("signature.json", Buffer.from(JSON.stringify(signManifest(bytes, liar, Date.now()))));
    });
    const file = join(tmp, "edited.tar.gz");
    writeFileSync(file, edited);
    const r = await runVerifyCli([file, "--json"]);
    const [report] = JSON.parse(r.stdout) as VerifyReport[];
    expect(report!.scenarios[0]).toMatchObject({
      result: "not_reproducible",
      why: `the bench image's tests of ${SCENARIOS[0]} are not the ones that graded it (digest differs)`,
    });
    expect(report!.scenarios[1]!.result).toBe("reproduced");
    expect(r.code).toBe(0);
  }, 600_000);
});
