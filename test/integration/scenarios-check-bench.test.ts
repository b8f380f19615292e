/**
 * `scenarios check --bench REF` proves every pushed scenario from the pulled images: the offline
 * trajrl-bench is built and pushed to the real registry on loopback (Debian's docker-registry,
 * scripts/registry-up.sh), the local references removed, then the command pulls the bench image,
 * lists its scenarios with the bench's own probe, pulls each scenario image by `image_repo:TAG`,
 * runs the reference solution from the sources (never in an image) in it as the agent user, and
 * grades with the registry bench's verifier (upstream's /test.sh + /tests/ from `scenario-info`,
 * VERIFIER_NETWORK=none here): all tests pass, the empty deliverable scores its null floor — the
 * same figures as the built-in check on images built from the sources. Sources that disagree with
 * the pushed images fail, on the pulled images.
 *
 * Network: the registry listens on loopback; the solve and verifier containers get no network.
 */
import { randomBytes } from "node:crypto";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BenchBuildResult } from "../../src/bench/index.js";
import type { CheckRow } from "../../src/episode/index.js";
import { loadCatalogue } from "../../src/scenarios/index.js";
import { leftoversOf, startCli } from "../helpers/cli.js";
import { requireDocker } from "../helpers/docker.js";
import { SCENARIOS_DIR } from "../helpers/episode.js";
import { pushOfflineBench, REGISTRY, untag } from "../helpers/registry.js";

const RUN = randomBytes(4).toString("hex");
const TARGET = `${REGISTRY}/trajrl-check`;
const TAG = `c${RUN}`;
const SCENARIOS = ["access-log-regex", "binary-flag-hunt"];
const BASE = `${TARGET}/sandbox-agent:${TAG}`;

let docker: Docker;
let built: BenchBuildResult;
const pids: number[] = [];
const tmp = mkdtempSync(join(tmpdir(), "check-bench-"));

/** `trajrl-validator scenarios check ARGS` as a child process (stderr a pipe, not a terminal). */
async function check(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const p = startCli(["scenarios", "check", ...args], {
    env: { VERIFIER_NETWORK: "none", DATA_DIR: join(tmp, "data") },
  });
  pids.push(p.child.pid!);
  const { code, stdout, stderr } = await p.done;
  return { code, stdout, stderr };
}

const rowsOf = (stdout: string): CheckRow[] =>
  stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as CheckRow)
    .sort((a, b) => (a.scenario < b.scenario ? -1 : 1));

beforeAll(async () => {
  docker = await requireDocker();
  // Everything the check runs comes from the registry.
  built = await pushOfflineBench(docker, { target: TARGET, tag: TAG, scenarios: SCENARIOS });
}, 900_000);

afterAll(async () => {
  for (const ref of [built?.base.ref, ...(built?.scenarios ?? []).map((s) => s.ref)])
    if (ref) await untag(docker, ref);
  rmSync(tmp, { recursive: true, force: true });
});

describe("scenarios check --bench (real registry on loopback)", () => {
  it("proves every pushed scenario from the pulled images, with the same figures as the built-in check", async () => {
    const catalogue = await loadCatalogue(SCENARIOS_DIR);
    const r = await check(["--bench", BASE, "--json"]);
    expect(r.code, r.stderr).toBe(0);
    const rows = rowsOf(r.stdout);
    // Every scenario the bench lists, and only those.
    expect(rows.map((x) => x.scenario)).toEqual(SCENARIOS);
    for (const row of rows) {
      const source = catalogue.byName(row.scenario)!;
      expect(row.problems, row.scenario).toEqual([]);
      expect(row.ok).toBe(true);
      // The pulled image, by the probe's image_repo and the bench's tag.
      expect(row.image).toBe(`${TARGET}/scenario-${row.scenario}:${TAG}`);
      expect(row.reference).toEqual({
        quality: 1,
        tests: source.task.metadata.tests,
        passed: source.task.metadata.tests,
      });
      expect(row.empty!.quality).toBe(source.task.metadata.null_floor);
      expect(row.nullFloor).toBe(source.task.metadata.null_floor);
      // The hostile probe belongs to the built-in suite's signed report channel.
      expect(row.hostile).toBeUndefined();
      // Proven under gVisor (this file runs in the `gvisor` test project).
      expect(row.runtime).toBe("runsc");
    }
    // With --json and stderr not a terminal, no progress lines for people.
    expect(r.stderr).not.toMatch(/^(ok|FAIL) /m);
    // Pulled back: the scenario images are present again under their references.
    for (const s of built.scenarios) expect((await docker.getImage(s.ref).inspect()).Id).toBe(s.id);

    const local = await check([...SCENARIOS, "--json"]);
    expect(local.code, local.stderr).toBe(0);
    const figures = (rs: CheckRow[]) => rs.map((x) => [x.scenario, x.reference, x.empty, x.nullFloor]);
    expect(figures(rows)).toEqual(figures(rowsOf(local.stdout)));
    expect(await leftoversOf(pids)).toBe(0);
  }, 900_000);

  it("sources that disagree with the pushed images fail on the pulled images: a wrong solution, a wrong null floor, a scenario the sources lack", async () => {
    // The sources hold binary-flag-hunt only, with a solution that delivers a script finding
    // nothing and a null floor the empty deliverable does not score.
    const dir = join(tmp, "sources");
    cpSync(join(SCENARIOS_DIR, "binary-flag-hunt"), join(dir, "binary-flag-hunt"), { recursive: true });
    writeFileSync(
      join(dir, "suites.json"),
      JSON.stringify({ default: "all", suites: { all: ["binary-flag-hunt"] } }),
    );
    writeFileSync(
      join(dir, "binary-flag-hunt", "solution", "solve.sh"),
      "#!/usr/bin/env bash\nprintf '#!/bin/sh\\necho nothing\\n' > /app/findflag.sh\n",
    );
    const toml = join(dir, "binary-flag-hunt", "task.toml");
    writeFileSync(toml, readFileSync(toml, "utf8").replace(/^null_floor = .*$/m, "null_floor = 0.5"));

    const r = await check(["--bench", BASE, "--dir", dir]);
    expect(r.code, r.stderr).toBe(1);
    const table = r.stdout;
    expect(table).toMatch(/^binary-flag-hunt\s+0\/6 \(0\)\s+0\/6 \(0\)\s+-\s+0\.5\s+FAIL/m);
    expect(table).toContain("binary-flag-hunt: reference scored 0/6, expected all tests to pass");
    expect(table).toContain("binary-flag-hunt: empty deliverable scored 0, task.toml null_floor is 0.5");
    expect(table).toMatch(/^access-log-regex\s+-\s+0\/7 \(0\)\s+-\s+-\s+FAIL/m);
    expect(table).toContain("access-log-regex: not in the sources (no reference solution)");
    // Progress lines for people go to stderr when not --json.
    expect(r.stderr).toMatch(/^FAIL binary-flag-hunt /m);
    expect(await leftoversOf(pids)).toBe(0);
  }, 900_000);
});
