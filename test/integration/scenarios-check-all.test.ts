/**
 * Every shipped scenario proves itself on every CI run: its reference solution scores tests/tests in a
 * fresh verifier and its empty deliverable scores exactly the recorded null floor (`scenarios check`),
 * under gVisor, the runtime episodes get by default (this file runs in the `gvisor` test project).
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadCatalogue } from "../../src/scenarios/index.js";
import { runCli } from "../helpers/cli.js";
import { requireDocker } from "../helpers/docker.js";

const root = new URL("../..", import.meta.url).pathname;

describe("scenarios check (the whole shipped suite)", () => {
  it("passes for every scenario: reference = tests/tests, empty deliverable = null floor", async () => {
    await requireDocker();
    const catalogue = await loadCatalogue(join(root, "scenarios"));
    expect(catalogue.length).toBeGreaterThanOrEqual(10);
    const r = await runCli(["scenarios", "check", "--json", "--concurrency", "2"], {
      timeoutMs: 1_500_000,
      // The product's default: gVisor (this project's engine has it), runc where a scenario declares it must.
      env: { EPISODE_RUNTIME: "auto" },
    });
    expect(r.code, r.stderr.slice(-4000)).toBe(0);
    // One JSON object per scenario, one per line.
    const rows = r.stdout
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { scenario: string; ok: boolean; problems: string[]; runtime: string });
    expect(rows.map((x) => x.scenario).sort()).toEqual(catalogue.map((s) => s.name).sort());
    expect(rows.filter((x) => !x.ok)).toEqual([]);
    // Under gVisor (the `gvisor` test project), but for a scenario that declares it cannot run there.
    for (const x of rows) {
      const declared = catalogue.byName(x.scenario)!.task.metadata.not_under_gvisor;
      expect([x.scenario, x.runtime]).toEqual([x.scenario, declared ? "runc" : "runsc"]);
    }
  }, 1_600_000);
});
