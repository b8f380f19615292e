import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/hash.js";
import {
  buildPack,
  loadPack,
  MAX_FETCH_BYTES,
  MAX_POLICY_FILES_BYTES,
  PLATFORM_MAX_PACK_BYTES,
  packHashOf,
  pyJsonParse,
  type RejectionCode,
  validatePackValue,
} from "../../src/pack/index.js";

const enc = (v: unknown) => Buffer.from(JSON.stringify(v));

const bytes = (v: unknown) => (typeof v === "string" ? Buffer.from(v) : enc(v));
const value = (v: unknown) => pyJsonParse(typeof v === "string" ? v : JSON.stringify(v));

// upstream: tests/test_policy.py (020768bd) "pack extraction", on extract_policy_files.
describe("upstream's extract_policy_files vectors", () => {
  it("a SKILL.md-only pack has no policy files: the default pin policy", () => {
    const r = validatePackValue(value({ schema_version: 1, files: { "SKILL.md": "# hi" } }));
    expect(r.ok && { files: r.pack.policyFiles, entry: r.pack.entryPoint }).toEqual({
      files: {},
      entry: "pin",
    });
  });

  it("keeps everything but SKILL.md; a non-text value is skipped, not rejected", () => {
    const files = { "SKILL.md": "# hi", "policy.py": "print(1)", "prompts/a.txt": "x", n: 3 };
    const r = validatePackValue(value({ schema_version: 1, files }));
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect({ ...r.pack.policyFiles }).toEqual({ "policy.py": "print(1)", "prompts/a.txt": "x" });
    expect(r.pack.skippedFiles).toEqual([{ name: "n", type: "int" }]);
    expect(r.pack.entryPoint).toBe("policy.py");
  });

  it("rejects traversal and size (invalid_pack_structure)", () => {
    const traversal = validatePackValue(value({ files: { "SKILL.md": "x", "../evil.py": "y" } }));
    expect(!traversal.ok && traversal.rejection.code).toBe("invalid_pack_structure");
    const big = validatePackValue(
      value({ files: { "SKILL.md": "x", "big.txt": "a".repeat(MAX_POLICY_FILES_BYTES + 1) } }),
    );
    expect(!big.ok && big.rejection.code).toBe("invalid_pack_structure");
    const fits = validatePackValue(
      value({ files: { "SKILL.md": "x", "big.txt": "a".repeat(MAX_POLICY_FILES_BYTES) } }),
    );
    expect(fits.ok).toBe(true);
  });
});

describe("rejection order: root → files → SKILL.md present → policy files → SKILL.md non-blank", () => {
  it.each<[string, unknown, RejectionCode | "ok"]>([
    ["root is a list", [1, 2], "invalid_pack_structure"],
    ["root is a string", '"pack"', "invalid_pack_structure"],
    ["files missing", { schema_version: 1 }, "invalid_pack_structure"],
    ["files is a list", { files: ["SKILL.md"] }, "invalid_pack_structure"],
    ["no SKILL.md, bad name too", { files: { "../x": "y" } }, "missing_skill_md"],
    ["blank SKILL.md with a bad name", { files: { "SKILL.md": " ", "/abs": "y" } }, "invalid_pack_structure"],
    ["blank SKILL.md", { files: { "SKILL.md": " \n\t\u3000\u001c" } }, "empty_skill_md"],
    ["SKILL.md not a string", { files: { "SKILL.md": 5 } }, "empty_skill_md"],
    ["SKILL.md null, bad name", { files: { "SKILL.md": null, "a/../b": "y" } }, "invalid_pack_structure"],
    ["a bad name on a skipped non-text value", { files: { "SKILL.md": "x", "../x": 3 } }, "ok"],
    [
      "lone surrogate in a policy file",
      '{"files": {"SKILL.md": "x", "p.txt": "\\ud800"}}',
      "invalid_pack_structure",
    ],
    [
      "lone surrogate in a policy file, blank SKILL.md",
      '{"files": {"SKILL.md": "", "p": "\\udfff"}}',
      "invalid_pack_structure",
    ],
  ])("%s → %s", (_name, v, code) => {
    const r = loadPack(bytes(v));
    expect(r.ok ? "ok" : r.rejection.code).toBe(code);
  });
});

describe("packs upstream accepts are accepted (no rule upstream lacks)", () => {
  it.each<[string, Record<string, unknown>]>([
    ["names differing only in case", { "z.txt": "1", "Z.txt": "2" }],
    ["no schema_version", {}],
    ["empty name", { "": "x" }],
    ["'.' and empty segments", { "./a": "1", "b//c": "2", "d/.": "3", "e/": "4" }],
    ["backslash and control characters", { "a\\b": "1", "t\u0001\nb": "2" }],
    ["NUL in a name", { "p\u0000q": "1" }],
    ["a lone surrogate in a name", { "\udcff": "1", "\ud800": "2" }],
    ["a 300-character name", { ["n".repeat(300)]: "1" }],
    ["a file and a directory of the same name", { a: "1", "a/b": "2" }],
    ["NUL bytes in a file", { "w.bin": "\u0000\u0001" }],
    ["SKILL.md with NUL", { "SKILL.md": "a\u0000b" }],
  ])("%s", (_name, files) => {
    const r = loadPack(enc({ files: { "SKILL.md": "x", ...files } }));
    expect(r.ok ? "ok" : r.rejection.message).toBe("ok");
  });

  it("schema_version of any value", () => {
    for (const v of [2, "1", null, [], 1.5])
      expect(loadPack(enc({ schema_version: v, files: { "SKILL.md": "x" } })).ok).toBe(true);
  });

  it("over 32 KiB canonical but within the 64 KiB fetch limit (the platform's submission cap is not a verdict)", () => {
    const r = loadPack(enc({ schema_version: 1, files: { "SKILL.md": "x".repeat(60_000) } }));
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.pack.canonicalBytes).toBeGreaterThan(PLATFORM_MAX_PACK_BYTES);
  });

  it("hashes case-distinct names as Python does", () => {
    const raw = '{"schema_version": 1, "files": {"SKILL.md": "x", "Z.txt": "1", "z.txt": "2"}}';
    const r = loadPack(Buffer.from(raw), "9c3b7870f2f40d1a571eae230efca721ec6c409e762948dd2d6c131ca46b6eb9");
    expect(r.ok).toBe(true);
  });

  it("undecodable UTF-8 is replaced as httpx's resp.text does, and hashes as Python does", () => {
    const raw = Buffer.concat([
      Buffer.from('{"files": {"SKILL.md": "caf'),
      Buffer.from([0xe9, 0x20, 0xed, 0xa0, 0x80]),
      Buffer.from(' ok"}}'),
    ]);
    const r = loadPack(raw, "621657b42e93ab30e918d51a9f170c95a4f7a7a4c55615328d460936dfd9f7e6");
    expect(r.ok && r.pack.skillMd).toBe("caf\ufffd \ufffd\ufffd\ufffd ok");
  });

  it("policy files keep the pack's order (the order upstream writes them)", () => {
    const r = loadPack(
      Buffer.from('{"files": {"z": "1", "SKILL.md": "x", "10": "2", "a": "3", "2": "4", "z": "5"}}'),
    );
    expect(r.ok && r.pack.policyFileOrder).toEqual(["z", "10", "a", "2"]);
    expect(r.ok && r.pack.policyFiles.z).toBe("5");
  });
});

describe("verification: every failure before the structure rules is pack_verify_failed", () => {
  const good = { schema_version: 1, files: { "SKILL.md": "# Be careful\n" } };
  it.each<[string, Buffer, string | undefined]>([
    ["not JSON", Buffer.from("{nope"), undefined],
    ["a UTF-8 BOM (json.loads refuses it)", Buffer.from(`\ufeff${JSON.stringify(good)}`), undefined],
    ["over the 64 KiB fetch limit", Buffer.from(" ".repeat(MAX_FETCH_BYTES + 1)), undefined],
    ["a hash mismatch", enc(good), "0".repeat(64)],
    ["a hash mismatch on a bad structure", enc([1]), "0".repeat(64)],
    ["not JSON, whatever the hash", Buffer.from("{bad"), sha256Hex(Buffer.from("{bad"))],
  ])("%s", (_name, raw, hash) => {
    const r = loadPack(raw, hash);
    expect(r.ok ? "ok" : r.rejection.code).toBe("pack_verify_failed");
  });

  it("the hash is of Python's canonical form", () => {
    const r = loadPack(enc(good), packHashOf(pyJsonParse(JSON.stringify(good))));
    expect(r.ok).toBe(true);
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
