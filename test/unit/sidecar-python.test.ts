/**
 * The sidecar's Python unit tests (sidecar/tests, stdlib unittest: signals, session keys, SSE,
 * policy.json validation), run with the same interpreter the host-side runtime uses.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { findPython } from "../../src/policy/index.js";

describe("sidecar python unit tests", () => {
  it("pass", () => {
    const python = findPython(loadConfig().policy.python).path;
    const r = spawnSync(python, ["-B", "-m", "unittest", "discover", "-s", "sidecar/tests"], {
      cwd: fileURLToPath(new URL("../../", import.meta.url)),
      encoding: "utf8",
      timeout: 60_000,
    });
    const summary = r.stderr.trim().split("\n").slice(-3).join("\n");
    expect(r.status, r.stderr).toBe(0);
    expect(summary).toMatch(/^Ran \d+ tests/m);
    expect(summary).toMatch(/OK$/);
  });
});
