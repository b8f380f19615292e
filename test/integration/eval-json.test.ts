/**
 * `eval --json` prints the JSON alone on stdout, whatever else happens: `eval --json | jq .` works.
 * Lines for people go to stderr, and only when stderr is a terminal or `--progress` asks. The packs
 * here are rejected before any episode (no image is built), so this runs in seconds: the real
 * command as a child process, the real environment (SQLite, the simulator, the Docker sandbox).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requireDocker } from "../helpers/docker.js";
import { runEvalCli } from "../helpers/eval-cli.js";

const dir = mkdtempSync(join(tmpdir(), "eval-json-"));
const BROKEN = join(dir, "broken.json");

beforeAll(async () => {
  await requireDocker();
  writeFileSync(BROKEN, '{"schema_version": 1, "files": {}}');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("eval --json", () => {
  it("stdout is one JSON document and nothing else; stderr (not a terminal) stays quiet", async () => {
    const r = await runEvalCli(join(dir, "a"), [BROKEN, "--suite", "quick", "--json"]);
    // A rejected pack is a verdict, and the run exits 1.
    expect(r.code, r.stderr).toBe(1);
    const results = JSON.parse(r.stdout) as Array<{
      label: string;
      kind: string;
      verdict: { spec: number; rejected: boolean; provenance: { suite?: string } };
    }>;
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ label: "broken", kind: "verdict" });
    expect(results[0]!.verdict).toMatchObject({ spec: 0, rejected: true, provenance: { suite: "quick" } });
    expect(r.stderr).toBe("");
  }, 120_000);

  it("--progress puts the lines for people on stderr, never on stdout", async () => {
    const r = await runEvalCli(join(dir, "b"), [BROKEN, "--json", "--progress"]);
    expect(r.code, r.stderr).toBe(1);
    expect(() => JSON.parse(r.stdout)).not.toThrow();
    expect(r.stderr).toMatch(
      /^Engy simulator \(no LLM_API_KEY set\) · built-in suite · suite builtin · 10 scenarios/,
    );
    expect(r.stderr).toMatch(/\nlogs: .*eval-.*\.log\n/);
    expect(r.stdout).not.toMatch(/logs: |Engy simulator/);
  }, 120_000);

  it("without --json the same lines and the verdict are the output, on stdout", async () => {
    const r = await runEvalCli(join(dir, "c"), [BROKEN, "--suite", "quick"]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toMatch(
      /^Engy simulator \(no LLM_API_KEY set\) · built-in suite · suite quick · 3 scenarios/,
    );
    expect(r.stdout).toMatch(/\nbroken: REJECTED \w+: /);
    expect(r.stderr).toBe("");
  }, 120_000);
});
