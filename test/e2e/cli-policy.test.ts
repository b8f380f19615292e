/**
 * `policy serve` passes on what the policy prints (issue 36 item 9): a miner's code, so its stdout
 * and stderr reach the terminal escaped (src/terminal-text.ts), as every other CLI output.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../helpers/cli.js";

const UNSAFE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u202a-\u202e]/;

describe("trajrl-validator policy serve (what a miner's policy prints)", () => {
  it("the policy's stdout and stderr come out escaped: no control character reaches the terminal", async () => {
    const dir = mkdtempSync(join(tmpdir(), "cli-policy-"));
    // Prints a window title, a screen clear, reversed text and a C1 CSI, then exits before serving.
    writeFileSync(
      join(dir, "policy.py"),
      [
        "import sys",
        'print("out \\x1b]0;pwned\\x07\\x1b[2J\\u202egnp fake\\x9b", flush=True)',
        'sys.stderr.write("err \\x1b[31mred\\x1b[0m \\u2028x\\n")',
        "sys.exit(3)",
        "",
      ].join("\n"),
    );
    const r = await runCli(["policy", "serve", dir, "--upstream", "http://127.0.0.1:9/v1"]);
    expect(r.code).toBe(1);
    expect(r.stdout).not.toMatch(UNSAFE);
    expect(r.stderr).not.toMatch(UNSAFE);
    expect(r.stdout).toBe("out \\u001b]0;pwned\\u0007\\u001b[2J\\u202egnp fake\\u009b\n");
    expect(r.stderr).toContain("err \\u001b[31mred\\u001b[0m \\u2028x\n");
    expect(r.stderr).toMatch(/error: the policy exited \(status 3\)/);
  });
});
