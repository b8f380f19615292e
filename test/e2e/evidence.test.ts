/**
 * Verdicts anyone can check, end to end on real Docker: `eval` of an example pack over the built-in
 * suite's ten scenarios writes the verdict's evidence (under the 10 MB upload cap), `verify`
 * re-grades every episode at $0 with no model call and reproduces every posted score; a changed
 * deliverable, a consistent lie signed again, a scenario whose sources moved on and a verifier
 * image that is gone are each told apart.
 */
import { cp, mkdtemp, readFile, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { ProjectImages } from "../../src/bench/index.js";
import {
  DockerRegrader,
  type EvidenceEpisode,
  type Manifest,
  manifestBytes,
  openEvidence,
  type Regrader,
  signManifest,
  type VerifyReport,
  verifyOpened,
} from "../../src/evidence/index.js";
import { sha256Hex } from "../../src/hash.js";
import { silentLogger } from "../../src/log.js";
import { MAX_LOG_ARCHIVE_BYTES } from "../../src/platform/index.js";
import { Sandbox } from "../../src/sandbox/index.js";
import { loadCatalogue } from "../../src/scenarios/index.js";
import { requireDocker } from "../helpers/docker.js";
import { REPO_ROOT } from "../helpers/episode.js";
import { runEvalCli } from "../helpers/eval-cli.js";
import { repack, runVerifyCli, testSigner, unpack } from "../helpers/evidence.js";

interface EvalJson {
  kind: string;
  evaluationId: string;
  verdict: { score: number; scenarios: Array<{ scenario: string; quality: number }> };
  payload: { challenger: { scenario_results: Record<string, { score: number }> } };
  evidence: { id: string; path: string };
}

let evidencePath: string;
let evidence: Buffer;
let posted: Record<string, number>;

beforeAll(async () => {
  await requireDocker();
  const data = await mkdtemp(join(tmpdir(), "evidence-e2e-"));
  const r = await runEvalCli(data, ["examples/packs/pin.json", "--suite", "builtin", "--json"]);
  expect(r.code, r.stderr).toBe(0);
  const [result] = JSON.parse(r.stdout) as EvalJson[];
  expect(result!.kind).toBe("verdict");
  evidencePath = result!.evidence.path;
  evidence = await readFile(evidencePath);
  posted = Object.fromEntries(
    Object.entries(result!.payload.challenger.scenario_results).map(([n, s]) => [n, s.score]),
  );
  expect(Object.keys(posted)).toHaveLength(10);
}, 1_200_000);

async function manifestOf(gz: Buffer): Promise<Manifest> {
  return JSON.parse((await unpack(gz)).get("manifest.json")!.toString("utf8")) as Manifest;
}

/** The evidence with its manifest edited and signed again, by a key that is not the validator's. */
async function relabel(edit: (m: Manifest) => void): Promise<Buffer> {
  const liar = await testSigner(3);
  return repack(evidence, (files) => {
    const m = JSON.parse(files.get("manifest.json")!.toString("utf8")) as Manifest;
    edit(m);
    m.validator = { ...m.validator, hotkey: liar.ss58, signer: "hotkey" };
    const bytes = manifestBytes(m);
    files.set("manifest.json", bytes);
    files.set("signature.json", Buffer.from(JSON.stringify(signManifest(bytes, liar, Date.now()))));
  });
}

/** The real re-grade for the named scenarios only (the others: not re-graded here, to save minutes). */
async function regradeOnly(names: string[], dir = join(REPO_ROOT, "scenarios")) {
  const sandbox = await Sandbox.open({
    firewall: "off",
    reapIntervalMs: 0,
    episodeRuntime: "runc",
    log: silentLogger,
  });
  const real = new DockerRegrader({
    sandbox,
    images: new ProjectImages(sandbox.docker, { repoRoot: REPO_ROOT }),
    catalogue: await loadCatalogue(dir),
    log: silentLogger,
  });
  const regrader: Regrader = {
    regrade: (m: Manifest, e: EvidenceEpisode, d: Buffer | undefined, n: number, s?: AbortSignal) =>
      names.includes(e.scenario)
        ? real.regrade(m, e, d, n, s)
        : Promise.resolve({ kind: "not_reproducible", why: "skipped" }),
  };
  return { regrader, close: () => sandbox.close() };
}

async function verifyWith(gz: Buffer, names: string[], dir?: string): Promise<VerifyReport> {
  const { regrader, close } = await regradeOnly(names, dir);
  try {
    const [found] = await openEvidence(gz, "edited");
    return await verifyOpened("edited", found!.evidence, { regrader });
  } finally {
    await close();
  }
}

describe("evidence of eval, verified (e2e)", () => {
  it("fits the log archive's 10 MB cap and `verify` reproduces every scenario's posted score at $0", async () => {
    expect((await stat(evidencePath)).size).toBeLessThan(MAX_LOG_ARCHIVE_BYTES);
    const m = await manifestOf(evidence);
    expect(m.episodes).toHaveLength(10);
    expect(m.validator.signer).toBe("local");

    const r = await runVerifyCli([evidencePath, "--json"]);
    expect(r.code, r.stderr).toBe(0);
    const [report] = JSON.parse(r.stdout) as VerifyReport[];
    expect(report!.ok).toBe(true);
    expect(report!.checks.every((c) => c.status === "ok")).toBe(true);
    for (const s of report!.scenarios) {
      expect(s.posted, s.scenario).toBe(posted[s.scenario]);
      // A deliverable the grader ran: re-graded to the posted score. Not graded: the posted 0 of a missing one.
      if (s.result === "not_graded") expect(s.posted).toBe(0);
      else expect([s.scenario, s.result, s.regraded]).toEqual([s.scenario, "reproduced", [s.posted]]);
    }
    expect(report!.scenarios.filter((s) => s.result === "reproduced").length).toBeGreaterThanOrEqual(8);
    // The HTML report names it; the table for people says who signed.
    const text = await runVerifyCli([evidencePath, "--no-regrade"]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/a local key: an eval without a wallet/);
  }, 900_000);

  it("a changed deliverable fails, naming the file and its scenario", async () => {
    const m = await manifestOf(evidence);
    const e = m.episodes.find((x) => x.files.deliverable?.stored)!;
    const bad = await repack(evidence, (files) =>
      files.set(`blobs/${e.files.deliverable!.sha256}`, Buffer.from("#!/bin/sh\nexit 0\n")),
    );
    const file = join(await mkdtemp(join(tmpdir(), "evidence-bad-")), "bad.tar.gz");
    await writeFile(file, bad);
    const r = await runVerifyCli([file, "--no-regrade"]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(
      `FAIL  files      deliverable of ${e.scenario}: its bytes are not the ones the manifest names (changed)`,
    );
    expect(r.stdout).toMatch(/^FAILED: files/m);
  }, 120_000);

  it("a lie told consistently (report, grade and posted score, signed again) is caught by the re-grade", async () => {
    const m0 = await manifestOf(evidence);
    const target = m0.episodes.find(
      (e) => e.score_rule === "grade" && e.quality < 1 && e.grading?.grader === "harness",
    )!;
    const tests = target.grading!.grade!.tests;
    const ctrf = Buffer.from(JSON.stringify({ results: { summary: { tests, passed: tests }, tests: [] } }));
    const lie = await relabel((m) => {
      const e = m.episodes.find((x) => x.scenario === target.scenario)!;
      e.files["ctrf.json"] = { sha256: sha256Hex(ctrf), bytes: ctrf.length, stored: true, omitted: null };
      e.quality = 1;
      e.grading!.grade = { ...e.grading!.grade!, quality: 1, passed: tests };
      const c = m.payload.challenger as {
        score: number;
        scenario_results: Record<string, { score: number }>;
      };
      c.score = Math.round((c.score - (posted[target.scenario] ?? 0) + 1) * 1e4) / 1e4;
      c.scenario_results[target.scenario]!.score = 1;
    });
    const withReport = await repack(lie, (f) => f.set(`blobs/${sha256Hex(ctrf)}`, ctrf));
    const r = await verifyWith(withReport, [target.scenario]);
    expect(r.checks.filter((c) => c.status === "failed")).toEqual([]);
    const row = r.scenarios.find((s) => s.scenario === target.scenario)!;
    expect(row).toMatchObject({ posted: 1, result: "differs", regraded: [posted[target.scenario]] });
    expect(r.ok).toBe(false);
  }, 300_000);

  it("a verifier image that is gone is rebuilt from the matching sources; sources that moved on are not reproducible", async () => {
    const m0 = await manifestOf(evidence);
    const name = m0.episodes.find((e) => e.score_rule === "grade")!.scenario;
    const gone = await relabel((m) => {
      m.episodes.find((e) => e.scenario === name)!.grading!.image.id = `sha256:${"0".repeat(64)}`;
    });
    const rebuilt = await verifyWith(gone, [name]);
    const row = rebuilt.scenarios.find((s) => s.scenario === name)!;
    expect(row).toMatchObject({ result: "reproduced", regraded: [posted[name]] });
    expect(row.why).toMatch(/^image rebuilt from the matching sources/);

    const dir = await mkdtemp(join(tmpdir(), "evidence-scenarios-"));
    await cp(join(REPO_ROOT, "scenarios"), dir, { recursive: true });
    await writeFile(
      join(dir, name, "tests", "test.sh"),
      `${await readFile(join(dir, name, "tests", "test.sh"), "utf8")}\n# changed\n`,
    );
    const moved = await verifyWith(evidence, [name], dir);
    expect(moved.scenarios.find((s) => s.scenario === name)).toMatchObject({
      result: "not_reproducible",
      why: expect.stringMatching(
        new RegExp(`^this checkout's scenarios/${name} \\(digest \\w+…\\) is not what graded it`),
      ),
    });
    expect(moved.ok).toBe(true);
  }, 300_000);
});
