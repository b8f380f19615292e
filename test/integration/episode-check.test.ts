/**
 * `scenarios check` on the real engine: a shipped scenario passes; fixture scenarios of our own
 * prove the check can fail (a reference that does not pass every test, a wrong null floor, a
 * grader that runs the deliverable as root, which the hostile probe exposes) and that the
 * reference runs as the agent user without a network. The CLI exits 1 on a failure. The fixture
 * graders are plain bash on upstream's report contract ([verifier] report = "files").
 */
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProjectImages } from "../../src/bench/index.js";
import { checkScenario, checkScenarios } from "../../src/episode/scenario-check.js";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import { loadCatalogue } from "../../src/scenarios/index.js";
import { runCli } from "../helpers/cli.js";
import { REPO_ROOT, SCENARIOS_DIR } from "../helpers/episode.js";
import { countLabelled, openTestSandbox } from "../helpers/sandbox.js";

let sb: Sandbox;
let images: ProjectImages;
let tmp: string;
const builtRefs: string[] = [];

// The fixture grader: three tests on /app/answer.sh (run as the agent user, or — the mistake the
// hostile probe must expose — as root), one ctrf.json entry each.
const grader = (asRoot = false) =>
  [
    "#!/bin/bash",
    "mkdir -p /logs/verifier",
    `out=$(timeout 5 ${asRoot ? "" : "setpriv --reuid=10000 --regid=10000 --clear-groups "}bash /app/answer.sh 2>/dev/null)`,
    `t1=failed; [ "$(printf '%s' "$out" | head -n1)" = "42" ] && t1=passed`,
    "t2=failed; grep -q '^# uid 10000$' /app/answer.sh && t2=passed",
    "t3=failed; grep -q '^# nets lo$' /app/answer.sh && t3=passed",
    "p=0; for t in $t1 $t2 $t3; do [ $t = passed ] && p=$((p+1)); done",
    `printf '{"results":{"tool":{"name":"fixture"},"summary":{"tests":3,"passed":%d,"failed":%d},"tests":[{"name":"prints 42","status":"%s","duration":0},{"name":"built as the agent user","status":"%s","duration":0},{"name":"built without a network","status":"%s","duration":0}]}}' $p $((3-p)) $t1 $t2 $t3 > /logs/verifier/ctrf.json`,
    "[ $p = 3 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt",
    "",
  ].join("\n");

async function fixture(name: string, answer: string, nullFloor: number, asRoot = false): Promise<void> {
  const dir = join(tmp, name);
  for (const d of ["environment", "tests", "solution"]) await mkdir(join(dir, d), { recursive: true });
  await writeFile(
    join(dir, "environment", "Dockerfile"),
    "ARG AGENT_BASE=trajrl/agent-base:latest\nFROM $AGENT_BASE\n",
  );
  await writeFile(join(dir, "tests", "test.sh"), grader(asRoot));
  await writeFile(
    join(dir, "solution", "solve.sh"),
    [
      "#!/bin/bash",
      "set -e",
      `{ echo 'echo ${answer}'; echo "# uid $(id -u)"; echo "# nets $(ls /sys/class/net | tr '\\n' ' ' | sed 's/ $//')"; } > /app/answer.sh`,
      "",
    ].join("\n"),
  );
  await chmod(join(dir, "solution", "solve.sh"), 0o755);
  await writeFile(
    join(dir, "task.toml"),
    `[metadata]\ndifficulty = "easy"\ncategory = "fixture"\nnull_floor = ${nullFloor}\ntests = 3\n\n[agent]\ntimeout_sec = 60\n\n[verifier]\ntimeout_sec = 60\nagent_output_path = "/app/answer.sh"\nreport = "files"\n`,
  );
  await writeFile(join(dir, "instruction.md"), "Write /app/answer.sh printing 42.\n");
}

beforeAll(async () => {
  sb = await openTestSandbox({ firewall: "off" });
  images = new ProjectImages(sb.docker, { repoRoot: REPO_ROOT });
  tmp = await mkdtemp(join(tmpdir(), "trajrl-check-"));
  await fixture("fixture-good", "42", 0);
  await fixture("fixture-bad", "41", 0.5);
  await fixture("fixture-rooted", "42", 0, true);
  await writeFile(
    join(tmp, "suites.json"),
    JSON.stringify({ default: "all", suites: { all: ["fixture-good"] } }),
  );
}, 120_000);

afterAll(async () => {
  for (const ref of builtRefs)
    await sb.docker
      .getImage(ref)
      .remove({ force: true })
      .catch(() => undefined);
  if (sb) {
    expect(await countLabelled(sb.docker, sb.session.id)).toEqual({ containers: 0, networks: 0 });
    await sb.close();
  }
  await rm(tmp, { recursive: true, force: true });
});

describe("scenarios check", () => {
  it("passes a shipped scenario: reference tests/tests, empty deliverable at its null floor", async () => {
    const catalogue = await loadCatalogue(SCENARIOS_DIR);
    const s = catalogue.byName("access-log-regex")!;
    const row = await checkScenario(s, { sandbox: sb, images });
    expect(row.problems).toEqual([]);
    expect(row.ok).toBe(true);
    expect(row.reference!.passed).toBe(row.reference!.tests);
    expect(row.reference!.tests).toBeGreaterThanOrEqual(3);
    expect(row.empty!.quality).toBeCloseTo(s.task.metadata.null_floor, 4);
  }, 600_000);

  it("runs the reference as uid 10000 without a network, and fails what does not hold", async () => {
    const catalogue = await loadCatalogue(tmp);
    const rows = await checkScenarios([catalogue.byName("fixture-good")!, catalogue.byName("fixture-bad")!], {
      sandbox: sb,
      images,
    });
    for (const r of rows) if (r.image) builtRefs.push(r.image);
    const [good, bad] = rows;
    expect(good).toMatchObject({
      ok: true,
      reference: { tests: 3, passed: 3 },
      empty: { quality: 0 },
      hostile: { tests: 3, passed: 0 },
      problems: [],
    });
    expect(bad!.ok).toBe(false);
    expect(bad!.reference).toMatchObject({ tests: 3, passed: 2 });
    expect(bad!.problems).toEqual([
      "reference scored 2/3, expected all tests to pass",
      "empty deliverable scored 0, task.toml null_floor is 0.5",
    ]);
  }, 600_000);

  it("fails a grader that lets root run what the deliverable wrote (the hostile probe)", async () => {
    const catalogue = await loadCatalogue(tmp);
    const row = await checkScenario(catalogue.byName("fixture-rooted")!, { sandbox: sb, images });
    if (row.image) builtRefs.push(row.image);
    // Reference and empty deliverable are fine: only the probe shows the hole.
    expect(row.reference).toMatchObject({ tests: 3, passed: 3 });
    expect(row.empty).toMatchObject({ quality: 0 });
    expect(row.ok).toBe(false);
    // Run as root, the probe forged a one-test report and killed the grader: not the declared 3 tests.
    expect(row.problems).toEqual([
      "hostile probe: verifier_bad_report: ctrf.json has 1 tests, the scenario declares 3",
    ]);
  }, 600_000);

  it("the CLI prints the table and exits 1 when a scenario fails", async () => {
    const cli = (args: string[]) => runCli(["scenarios", "check", "--dir", tmp, ...args]);
    const ok = await cli(["fixture-good"]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(
      /^scenario\s+reference\s+empty\s+hostile\s+null_floor\s+result\s+seconds\s+runtime$/m,
    );
    // The runtime the scenario was proved under: this project's EPISODE_RUNTIME (vitest.config.ts).
    const runtime = process.env.EPISODE_RUNTIME === "runsc" ? "runsc" : "runc";
    expect(ok.stdout).toMatch(
      new RegExp(
        `^fixture-good\\s+3/3 \\(1\\)\\s+0/3 \\(0\\)\\s+0/3 \\(0\\)\\s+0\\s+ok\\s+[\\d.]+\\s+${runtime}$`,
        "m",
      ),
    );
    const bad = await cli(["fixture-bad"]);
    expect(bad.code).toBe(1);
    expect(bad.stdout).toMatch(/^fixture-bad\s+2\/3 .*FAIL/m);
    expect(bad.stdout).toContain("fixture-bad: reference scored 2/3");
    const unknown = await cli(["no-such-scenario"]);
    expect(unknown.code).toBe(1);
  }, 600_000);
});
