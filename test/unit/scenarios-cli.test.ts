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
  it("prints one row per scenario with timeouts, deliverable, null floor and specs", async () => {
    const r = await cli("scenarios", "list", "--dir", DIR);
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^NAME\s+CATEGORY/);
    const git = lines.find((l) => l.startsWith("git-lost-commit-recovery"));
    expect(git).toMatch(/\s600s\s+180s\s+\/app\/recover\.sh\s+0\.1667\s+27,900$/);
    expect(lines.at(-1)).toMatch(/^\d+ scenarios; specs: 27 \(\d+\) default, 900 \(3\)$/);
  });

  it("--spec keeps the spec's order; --json prints one object per scenario", async () => {
    const r = await cli("scenarios", "list", "--dir", DIR, "--spec", "900", "--json");
    expect(r.code).toBe(0);
    const rows = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(rows.map((x) => x.name)).toEqual([
      "binary-flag-hunt",
      "access-log-regex",
      "git-lost-commit-recovery",
    ]);
    expect(rows[0]).toMatchObject({ deliverable: "/app/findflag.sh", null_floor: 0, specs: [27, 900] });
    expect(rows[0].digest).toMatch(/^[0-9a-f]{64}$/);
  });

  it("an unknown spec or a bad flag is one line on stderr and exit 1", async () => {
    const r = await cli("scenarios", "list", "--dir", DIR, "--spec", "5");
    expect(r.code).toBe(1);
    expect(r.stderr).toBe("error: spec 5 is not in specs.json (known: 27, 900; default 27)\n");
    const bad = await cli("scenarios", "list", "--dir", DIR, "--spec", "x");
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("--spec x");
  });
});
