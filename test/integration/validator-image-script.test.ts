/**
 * scripts/validator-image.mjs on a host whose npm cache lacks the image's packages (a fresh host
 * that skipped `npm ci`, or a cleaned cache): one short line that says what to run, before anything
 * is staged — not a line naming every package of the lockfile.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const root = new URL("../..", import.meta.url).pathname;
const cache = mkdtempSync(join(tmpdir(), "empty-npm-cache-"));
afterAll(() => rmSync(cache, { recursive: true, force: true }));

describe("validator-image.mjs with an empty npm cache", () => {
  it("fails in one short line naming `npm ci`, and stages nothing", async () => {
    const r = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
      execFile(
        process.execPath,
        [join(root, "scripts/validator-image.mjs"), "stage"],
        { cwd: root, env: { ...process.env, npm_config_cache: cache }, timeout: 60_000 },
        (err, stdout, stderr) =>
          resolve({ code: err ? (typeof err.code === "number" ? err.code : 1) : 0, stdout, stderr }),
      ),
    );
    expect(r.code).toBe(1);
    const lines = r.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]!.length).toBeLessThan(300);
    expect(lines[0]).toMatch(
      /^\[validator-image\] ERROR: (\d+) of the image's \1 npm packages are not in this host's npm cache \(.+, …\): run `npm ci` in \S+ first$/,
    );
    // Checked before anything was copied: no "node … from …" staging line.
    expect(r.stdout + r.stderr).not.toMatch(/staged|npm from/);
  }, 90_000);
});
