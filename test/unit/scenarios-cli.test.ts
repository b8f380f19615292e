import { afterEach, describe, expect, it, vi } from "vitest";
import { main } from "../../src/cli.js";

const DIR = new URL("../../scenarios/", import.meta.url).pathname;

async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
    stdout += chunk.toString();
    return true;
  });
  vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
    stderr += chunk.toString();
    return true;
  });
  const code = await main(["node", "trajrl-validator", ...args]);
  vi.restoreAllMocks();
  return { code, stdout, stderr };
}

afterEach(() => {
  vi.restoreAllMocks();
  process.exitCode = undefined;
});

describe("trajrl-validator scenarios list", () => {
  it("prints one row per scenario with timeouts, deliverable, null floor and the suites listing it", async () => {
    const r = await cli("scenarios", "list", "--dir", DIR);
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^NAME\s+CATEGORY.*\s+SUITES$/);
    const git = lines.find((l) => l.startsWith("git-lost-commit-recovery"));
    expect(git).toMatch(/\s600s\s+180s\s+\/app\/recover\.sh\s+0\.1667\s+builtin,quick$/);
    const sqlite = lines.find((l) => l.startsWith("sqlite-wal-recovery"));
    expect(sqlite).toMatch(/\sbuiltin$/);
    expect(lines.at(-1)).toMatch(/^\d+ scenarios; suites: builtin \(\d+\) default, quick \(3\)$/);
    expect(r.stderr).toBe("");
  });

  it("--suite keeps the suite's order; --json prints one object per scenario, alone on stdout", async () => {
    const r = await cli("scenarios", "list", "--dir", DIR, "--suite", "quick", "--json");
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("");
    const rows = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(rows.map((x) => x.name)).toEqual([
      "binary-flag-hunt",
      "access-log-regex",
      "git-lost-commit-recovery",
    ]);
    expect(rows[0]).toMatchObject({
      deliverable: "/app/findflag.sh",
      null_floor: 0,
      suites: ["builtin", "quick"],
    });
    expect(rows[0].digest).toMatch(/^[0-9a-f]{64}$/);
  });

  it("an unknown suite is one line on stderr and exit 1; --spec is no longer a way to name built-in scenarios", async () => {
    const r = await cli("scenarios", "list", "--dir", DIR, "--suite", "900");
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('error: no suite "900" in suites.json (known: builtin, quick)\n');
    const spec = await cli("scenarios", "list", "--dir", DIR, "--spec", "27");
    expect(spec.code).toBe(1);
    expect(spec.stderr).toContain("unknown option '--spec'");
  });
});

describe("spec numbers belong to the subnet's bench, suite names to the built-in suite", () => {
  it("eval --spec without --bench, and --suite with --bench, are refused before any work", async () => {
    const spec = await cli("eval", "examples/packs/pin.json", "--spec", "27");
    expect(spec.code).toBe(1);
    expect(spec.stderr).toBe(
      "error: --spec 27 names a subnet spec: it needs --bench REF (the built-in suite has named sets: --suite NAME)\n",
    );
    expect(spec.stdout).toBe("");
    const suite = await cli("eval", "examples/packs/pin.json", "--suite", "quick", "--bench", "x/y:z");
    expect(suite.code).toBe(1);
    expect(suite.stderr).toMatch(/^error: --suite names a set of the built-in suite/);
  });

  it("scenarios check --spec without --bench, and two ways of naming scenarios, are refused before Docker", async () => {
    const spec = await cli("scenarios", "check", "--dir", DIR, "--spec", "27");
    expect(spec.code).toBe(1);
    expect(spec.stderr).toMatch(/^error: --spec 27 names a subnet spec: it needs --bench REF/);
    const both = await cli("scenarios", "check", "--dir", DIR, "--suite", "quick", "binary-flag-hunt");
    expect(both.code).toBe(1);
    expect(both.stderr).toBe("error: name the scenarios one way: NAMES, --suite or --spec\n");
  });
});
