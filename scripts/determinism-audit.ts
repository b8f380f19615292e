/**
 * scripts/determinism-audit.ts — are the built-in suite's graders deterministic? Every example pack
 * (examples/packs/*.json) is evaluated over the built-in suite on the simulator (`eval`, one
 * command), and each verdict's evidence is verified with two re-grades per episode (`verify
 * --repeat 2`). A grader whose score changes between two re-grades of the same deliverable, or
 * that does not give the posted score again, is a bug in that grader: this prints every such
 * scenario with its measured spread, and exits 1 when there is one.
 *
 *   npx tsx scripts/determinism-audit.ts [--suite builtin] [--repeat 2] [--data DIR]
 *
 * Not part of `npm test` (ten minutes on two cores); the README records its last result.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { VerifyReport } from "../src/evidence/index.js";
import { REPO_ROOT } from "../src/repo.js";

const { values } = parseArgs({
  options: {
    suite: { type: "string", default: "builtin" },
    repeat: { type: "string", default: "2" },
    data: { type: "string" },
  },
});

function cli(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", join(REPO_ROOT, "src/cli.ts"), ...args], {
      cwd: REPO_ROOT,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "inherit"],
    });
    let stdout = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.on("close", (code) => resolve({ code, stdout }));
  });
}

const packs = readdirSync(join(REPO_ROOT, "examples/packs"))
  .filter((f) => f.endsWith(".json"))
  .sort()
  .map((f) => join("examples/packs", f));
const env = {
  DATA_DIR: values.data ?? mkdtempSync(join(tmpdir(), "determinism-")),
  LLM_API_KEY: "",
  ENGY_SIM_LATENCY_SCALE: "0",
};
const t0 = performance.now();
const evaluated = await cli(["eval", ...packs, "--suite", values.suite!, "--json", "--progress"], env);
const results = JSON.parse(evaluated.stdout) as Array<{ label: string; evidence?: { path: string } }>;
const files = results.flatMap((r) => (r.evidence ? [r.evidence.path] : []));
console.error(
  `evaluated ${packs.length} packs in ${((performance.now() - t0) / 1000).toFixed(0)} s; verifying ${files.length}`,
);
const t1 = performance.now();
const verified = await cli(["verify", ...files, "--repeat", values.repeat!, "--json", "--progress"], env);
const reports = JSON.parse(verified.stdout) as VerifyReport[];

const rows: string[] = [];
let regrades = 0;
const bad: string[] = [];
for (const [k, r] of reports.entries()) {
  for (const s of r.scenarios) {
    regrades += s.regraded.length;
    const spread = s.regraded.length ? Math.max(...s.regraded) - Math.min(...s.regraded) : 0;
    rows.push(
      [
        results[k]?.label ?? "?",
        s.scenario,
        s.posted?.toFixed(4) ?? "–",
        s.regraded.map((q) => q.toFixed(4)).join(" ") || "–",
        spread.toFixed(4),
        s.result,
      ].join("\t"),
    );
    if (s.result === "differs" || spread > 0) bad.push(`${results[k]?.label}/${s.scenario}: ${s.why}`);
  }
}
console.log(["pack\tscenario\tposted\tre-graded\tspread\tresult", ...rows].join("\n"));
console.log(
  `\n${reports.length} evidence, ${regrades} re-grades in ${((performance.now() - t1) / 1000).toFixed(0)} s; ${bad.length ? `NOT deterministic:\n  ${bad.join("\n  ")}` : "every grader gave the posted score again, every time"}`,
);
process.exitCode = bad.length || verified.code !== 0 ? 1 : 0;
