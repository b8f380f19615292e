import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { buildPack, loadPack, packHashOf, pyJsonParse, type RejectionCode } from "../../src/pack/index.js";

const enc = (v: unknown) => Buffer.from(typeof v === "string" ? v : JSON.stringify(v));

function rejectionOf(v: unknown, hash?: string): RejectionCode | "ok" {
  const r = loadPack(enc(v), hash);
  return r.ok ? "ok" : r.rejection.code;
}

describe("pack validation rejects with the protocol's codes", () => {
  const good = {
    schema_version: 1,
    files: { "SKILL.md": "# Be careful\n", "policy.json": '{"kind":"pin","model":"glm-5.3-flash"}' },
  };

  it("accepts a good pack and finds its entry point", () => {
    const r = loadPack(enc(good));
    expect(r.ok).toBe(true);
    if (r.ok) {
      expect(r.pack.entryPoint).toBe("policy.json");
      expect(Object.keys(r.pack.policyFiles)).toEqual(["policy.json"]);
      expect(r.pack.hash).toBe(packHashOf(pyJsonParse(JSON.stringify(good))));
    }
  });

  it("policy.py wins over policy.json; neither means pin", () => {
    const both = loadPack(enc({ schema_version: 1, files: { ...good.files, "policy.py": "print(1)" } }));
    expect(both.ok && both.pack.entryPoint).toBe("policy.py");
    const none = loadPack(enc({ schema_version: 1, files: { "SKILL.md": "x" } }));
    expect(none.ok && none.pack.entryPoint).toBe("pin");
  });

  it.each<[string, unknown, RejectionCode]>([
    ["not JSON", "{nope", "invalid_pack_structure"],
    ["root is a list", [1, 2], "invalid_pack_structure"],
    ["files missing", { schema_version: 1 }, "invalid_pack_structure"],
    ["files is a list", { schema_version: 1, files: ["SKILL.md"] }, "invalid_pack_structure"],
    ["no SKILL.md", { schema_version: 1, files: { "policy.py": "x" } }, "missing_skill_md"],
    ["blank SKILL.md", { schema_version: 1, files: { "SKILL.md": " \n\t\u3000" } }, "empty_skill_md"],
    ["SKILL.md not a string", { schema_version: 1, files: { "SKILL.md": 5 } }, "empty_skill_md"],
    ["schema_version 2", { schema_version: 2, files: { "SKILL.md": "x" } }, "invalid_pack_structure"],
    ["schema_version missing", { files: { "SKILL.md": "x" } }, "invalid_pack_structure"],
    ["too large", { schema_version: 1, files: { "SKILL.md": "x".repeat(33_000) } }, "pack_too_large"],
    [
      "absolute name",
      { schema_version: 1, files: { "SKILL.md": "x", "/etc/passwd": "x" } },
      "invalid_policy_files",
    ],
    ["dot-dot", { schema_version: 1, files: { "SKILL.md": "x", "a/../../b": "x" } }, "invalid_policy_files"],
    ["backslash", { schema_version: 1, files: { "SKILL.md": "x", "a\\b": "x" } }, "invalid_policy_files"],
    [
      "binary content",
      { schema_version: 1, files: { "SKILL.md": "x", "w.bin": "\u0000\u0001" } },
      "invalid_policy_files",
    ],
    ["non-text value", { schema_version: 1, files: { "SKILL.md": "x", "n.txt": 3 } }, "invalid_policy_files"],
    [
      "file and dir clash",
      { schema_version: 1, files: { "SKILL.md": "x", a: "1", "a/b": "2" } },
      "invalid_policy_files",
    ],
  ])("%s → %s", (_name, value, code) => {
    expect(rejectionOf(value)).toBe(code);
  });

  it("a lone surrogate escape is not text", () => {
    expect(rejectionOf('{"schema_version": 1, "files": {"SKILL.md": "x", "p.txt": "\\ud800"}}')).toBe(
      "invalid_policy_files",
    );
  });

  it("a hash mismatch is pack_verify_failed, checked before structure", () => {
    expect(rejectionOf(good, "0".repeat(64))).toBe("pack_verify_failed");
    expect(rejectionOf([1], "0".repeat(64))).toBe("pack_verify_failed");
    expect(rejectionOf("{bad", "0".repeat(64))).toBe("pack_verify_failed");
  });

  it("fetch limit: over 64 KiB of raw bytes is too large", () => {
    expect(rejectionOf(" ".repeat(70_000))).toBe("pack_too_large");
  });
});

describe("pack build", () => {
  const tmp = () => mkdtempSync(join(tmpdir(), "pack-build-"));

  it("collects text files, skips caches, and writes the canonical form", async () => {
    const d = tmp();
    writeFileSync(join(d, "SKILL.md"), "# skill\n");
    const p = join(d, "policy");
    mkdirSync(join(p, "__pycache__"), { recursive: true });
    mkdirSync(join(p, "prompts"));
    writeFileSync(join(p, "policy.py"), "print('hi')\n");
    writeFileSync(join(p, "prompts", "adviser.txt"), "be brief — really\n");
    writeFileSync(join(p, "__pycache__", "policy.cpython-311.pyc"), Buffer.from([0, 1, 2]));
    writeFileSync(join(p, "x.pyc"), Buffer.from([0, 1, 2]));
    const built = await buildPack(join(d, "SKILL.md"), p);
    expect(Object.keys(built.pack.policyFiles)).toEqual(["policy.py", "prompts/adviser.txt"]);
    expect(built.skipped).toEqual(["__pycache__/", "x.pyc"]);
    expect(built.json).toContain("\\u2014");
    const again = loadPack(Buffer.from(built.json), built.pack.hash);
    expect(again.ok).toBe(true);
  });

  it("refuses binary and non-UTF-8 files with a clear message", async () => {
    const d = tmp();
    writeFileSync(join(d, "SKILL.md"), "# skill\n");
    mkdirSync(join(d, "p"));
    writeFileSync(join(d, "p", "blob.dat"), Buffer.from([0xff, 0xfe, 0x00]));
    await expect(buildPack(join(d, "SKILL.md"), join(d, "p"))).rejects.toThrow(/blob\.dat: not UTF-8 text/);
    writeFileSync(join(d, "p", "blob.dat"), "a\u0000b");
    await expect(buildPack(join(d, "SKILL.md"), join(d, "p"))).rejects.toThrow(/blob\.dat: contains NUL/);
  });

  it("refuses a blank SKILL.md with its rejection code", async () => {
    const d = tmp();
    writeFileSync(join(d, "SKILL.md"), "   \n");
    await expect(buildPack(join(d, "SKILL.md"))).rejects.toMatchObject({ code: "empty_skill_md" });
  });
});
