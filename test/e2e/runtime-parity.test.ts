/**
 * Same scores under gVisor (issue 33): `eval` as an operator runs it, once with every episode
 * container under runc and once under gVisor (EPISODE_RUNTIME=auto, runsc here), gives identical verdicts —
 * every example pack over the built-in suite's `quick` set, and `pin` over the other seven
 * scenarios, so every scenario's agent, sidecar and grader run under both runtimes. Each run's log
 * says which runtime its episodes got. The simulator is seeded and at latency 0: any difference is
 * the runtime's.
 */
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { loadCatalogue, resolveSuite } from "../../src/scenarios/index.js";
import { leftoversOf } from "../helpers/cli.js";
import { requireDocker } from "../helpers/docker.js";
import { REPO_ROOT, SCENARIOS_DIR } from "../helpers/episode.js";
import { runEvalCli } from "../helpers/eval-cli.js";

const PACKS = readdirSync(join(REPO_ROOT, "examples/packs"))
  .filter((f) => f.endsWith(".json"))
  .sort()
  .map((f) => `examples/packs/${f}`);

type JsonResult = Array<{
  label: string;
  kind: string;
  verdict?: {
    score: number;
    qualified: boolean;
    scenarios: Array<{ scenario: string; quality: number; passed: number; tests: number }>;
  };
}>;

/** What a vote is made of, per pack and scenario. */
const essence = (r: JsonResult) =>
  r.map((x) => ({
    label: x.label,
    kind: x.kind,
    score: x.verdict?.score,
    qualified: x.verdict?.qualified,
    scenarios: x.verdict?.scenarios.map((s) => [s.scenario, s.quality, s.passed, s.tests]),
  }));

/** The runtime the run's sandbox resolved (its `sandbox.episode_runtime` log line). */
function runtimeLogged(dataDir: string): string[] {
  const dir = join(dataDir, "logs");
  return readdirSync(dir)
    .flatMap((f) => readFileSync(join(dir, f), "utf8").split("\n"))
    .filter((l) => l.includes('"sandbox.episode_runtime"'))
    .map((l) => (JSON.parse(l) as { runtime: string }).runtime);
}

async function evaluate(runtime: "runc" | "runsc", packs: string[], scenarios: string[]) {
  const dataDir = mkdtempSync(join(tmpdir(), `parity-${runtime}-`));
  const r = await runEvalCli(
    dataDir,
    [...packs, "--scenarios", scenarios.join(","), "--concurrency", "3", "--json"],
    // gVisor as production gets it: `auto` on an engine with runsc (this project's precondition), so a
    // scenario that declares it cannot run there (bounded-async-runner) runs under runc, as it would.
    { env: { EPISODE_RUNTIME: runtime === "runsc" ? "auto" : "runc" } },
  );
  expect(r.code, r.stderr.slice(-3000)).toBe(0);
  expect(runtimeLogged(dataDir)).toEqual([runtime]);
  expect(await leftoversOf([r.pid])).toBe(0);
  console.log(
    `${runtime}: ${packs.length} pack(s) × ${scenarios.length} scenarios in ${Math.round(r.ms / 1000)} s`,
  );
  return JSON.parse(r.stdout) as JsonResult;
}

describe("verdicts under runc and under gVisor", () => {
  let quick: string[];
  let rest: string[];

  beforeAll(async () => {
    await requireDocker();
    const catalogue = await loadCatalogue(SCENARIOS_DIR);
    quick = resolveSuite(catalogue, "quick").scenarios.map((s) => s.name);
    rest = resolveSuite(catalogue, "builtin")
      .scenarios.map((s) => s.name)
      .filter((n) => !quick.includes(n));
  });

  it("every example pack on the quick set: the same verdict, scenario by scenario", async () => {
    expect(PACKS.length).toBeGreaterThanOrEqual(5);
    const runc = await evaluate("runc", PACKS, quick);
    const gvisor = await evaluate("runsc", PACKS, quick);
    expect(runc.every((x) => x.kind === "verdict")).toBe(true);
    expect(essence(gvisor)).toEqual(essence(runc));
    // Not a vacuous match: the packs are told apart.
    expect(new Set(runc.map((x) => x.verdict!.score)).size).toBeGreaterThan(1);
  }, 1_800_000);

  it("pin on the other scenarios of the built-in suite: the same verdict, scenario by scenario", async () => {
    expect(rest.length).toBe(7);
    const runc = await evaluate("runc", ["examples/packs/pin.json"], rest);
    const gvisor = await evaluate("runsc", ["examples/packs/pin.json"], rest);
    expect(essence(gvisor)).toEqual(essence(runc));
    expect(runc[0]!.verdict!.scenarios.some((s) => s.quality > 0)).toBe(true);
  }, 1_800_000);
});
