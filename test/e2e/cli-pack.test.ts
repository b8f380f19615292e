import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../helpers/cli.js";

const root = new URL("../..", import.meta.url).pathname;
const cli = (...args: string[]) => runCli(args);

describe("trajrl-validator pack (the CLI as an operator runs it)", () => {
  const tmp = mkdtempSync(join(tmpdir(), "cli-pack-"));
  const write = (name: string, body: string) => {
    const p = join(tmp, name);
    writeFileSync(p, body);
    return p;
  };

  it("pack hash prints the fixture's published hash", async () => {
    const r = await cli(
      "pack",
      "hash",
      join(root, "test/fixtures/packs/ivanov-tech__trajectoryrl-packs__20260516-36B.json"),
    );
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe("1cf2caea1261c9322d7e16168404b39c58d8f145c11ab6990be47fbb02a6ddd4");
  });

  it.each([
    ["invalid_pack_structure", '{"schema_version": 1, "files": []}'],
    ["missing_skill_md", '{"schema_version": 1, "files": {"policy.py": "x"}}'],
    ["empty_skill_md", '{"schema_version": 1, "files": {"SKILL.md": "  "}}'],
    ["invalid_pack_structure", '{"schema_version": 1, "files": {"SKILL.md": "x", "../evil": "x"}}'],
    ["pack_verify_failed", JSON.stringify({ schema_version: 1, files: { "SKILL.md": "y".repeat(70_000) } })],
  ])("pack validate exits 1 naming %s, one line, no stack trace", async (code, body) => {
    const r = await cli("pack", "validate", write(`${code}.json`, body));
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toContain(code);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it("pack validate exits 0 for a pack validators accept, warning what the platform or the sidecar will do", async () => {
    const body = JSON.stringify({
      files: { "SKILL.md": "y".repeat(40_000), "Z.txt": "1", "z.txt": "2", n: 3, a: "1", "a/b": "2" },
    });
    const r = await cli("pack", "validate", write("accepted.json", body));
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^valid: [0-9a-f]{64}/);
    expect(r.stderr).toContain("platform refuses submissions over 32768 bytes");
    expect(r.stderr).toContain('files["n"] is int, not text: validators skip it');
    expect(r.stderr).toContain("every scenario scores 0");
    const j = await cli("pack", "validate", write("accepted2.json", body), "--json");
    expect(j.code).toBe(0);
    const parsed = JSON.parse(j.stdout) as { valid: boolean; files: string[]; warnings: string[] };
    expect(parsed.valid).toBe(true);
    expect(parsed.files).toEqual(["Z.txt", "z.txt", "a", "a/b"]);
    expect(parsed.warnings).toHaveLength(3);
  });

  // issue 36 item 9: a miner names the policy files; a name must not drive the operator's terminal.
  const CRAFTED = {
    clear: "\u001b[2J\u001b[H\u001b[32mvalid: 0000 (fake)\u001b[0m",
    title: "t\u001b]0;pwned\u0007.py",
    c1: "x\u009b2J.txt",
    bidi: "a\u202egnp.exe",
    line: "ok.txt\nvalid: 1111 (fake)",
  };
  const UNSAFE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2066-\u2069]/;

  it("pack validate prints a miner's file names escaped: no control character reaches the terminal, one line", async () => {
    const files: Record<string, string> = {
      "SKILL.md": "# s\n",
      "policy.json": '{"kind":"pin","model":"glm-5.3-flash"}',
    };
    for (const name of Object.values(CRAFTED)) files[name] = "x";
    const r = await cli(
      "pack",
      "validate",
      write("crafted.json", JSON.stringify({ schema_version: 1, files })),
    );
    expect(r.code).toBe(0);
    expect(r.stdout).not.toMatch(UNSAFE);
    expect(r.stderr).not.toMatch(UNSAFE);
    expect(r.stdout.trim().split("\n")).toHaveLength(1);
    expect(r.stdout).toMatch(/^valid: [0-9a-f]{64}/);
    expect(r.stdout).toContain("\\u001b[2J\\u001b[H\\u001b[32mvalid: 0000 (fake)\\u001b[0m");
    expect(r.stdout).toContain("t\\u001b]0;pwned\\u0007.py");
    expect(r.stdout).toContain("x\\u009b2J.txt");
    expect(r.stdout).toContain("a\\u202egnp.exe");
    expect(r.stdout).toContain("ok.txt\\nvalid: 1111 (fake)");
    // --json: the same names, exactly, once parsed.
    const j = await cli(
      "pack",
      "validate",
      write("crafted2.json", JSON.stringify({ schema_version: 1, files })),
      "--json",
    );
    expect(j.stdout).not.toMatch(UNSAFE);
    expect((JSON.parse(j.stdout) as { files: string[] }).files).toEqual(
      expect.arrayContaining(Object.values(CRAFTED)),
    );
  });

  it("a rejection quoting a crafted name stays one escaped line", async () => {
    const r = await cli(
      "pack",
      "validate",
      write(
        "rejected.json",
        JSON.stringify({ files: { "SKILL.md": "x", "../\u001b[2Jx\nvalid: fake": "y" } }),
      ),
    );
    expect(r.code).toBe(1);
    expect(r.stderr).not.toMatch(UNSAFE);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toContain("invalid_pack_structure");
  });

  it("pack validate --hash mismatch → pack_verify_failed", async () => {
    const p = write("ok.json", '{"schema_version": 1, "files": {"SKILL.md": "x"}}');
    const r = await cli("pack", "validate", p, "--hash", "ab".repeat(32));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("pack_verify_failed");
  });

  it("a non-JSON file gets a clear message with the position", async () => {
    const r = await cli("pack", "validate", write("notjson.txt", "hello, I am not JSON\n"));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/pack_verify_failed: pack is not valid JSON: Expecting value: line 1 column 1/);
  });

  it("pack build then validate round-trips", async () => {
    const skill = write("SKILL.md", "# skill\n");
    const out = join(tmp, "built.json");
    const b = await cli("pack", "build", skill, "-o", out);
    expect(b.code).toBe(0);
    const hash = b.stdout.split(/\s+/)[0]!;
    const v = await cli("pack", "validate", out, "--hash", hash);
    expect(v.code).toBe(0);
    expect(v.stdout).toContain(hash);
  });
});
