/**
 * src/pack/sidecar-tree.ts against the real thing: vectors.json holds what Python's tarfile and the
 * engine's archive upload did with each list of names when laid out as upstream's harness does it
 * (test/fixtures/sidecar-tree/oracle.py, which says how to regenerate them). The model must give the
 * same files, directories and failures for every one, and never a path outside /policy for any name.
 */
import { readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ValidatorError } from "../../src/errors.js";
import {
  loadPack,
  POLICY_DIR_TMPFS_BYTES,
  policyTarEntries,
  sidecarPolicyTree,
  UPSTREAM_RUNTIME_PATH,
} from "../../src/pack/index.js";

type OracleResult =
  | { tar_error: string }
  | { put_error: number }
  | { root_is_file: boolean; files: Record<string, string>; dirs: string[] };
const oracle = JSON.parse(
  readFileSync(new URL("../fixtures/sidecar-tree/vectors.json", import.meta.url), "utf8"),
) as { python: string; docker: string; vectors: Array<{ names: string[]; result: OracleResult }> };

const model = (names: string[]) =>
  sidecarPolicyTree(
    names.map((n, i) => [n, `F${i}`] as const),
    { runtime: "RUNTIME" },
  );

describe(`upstream's sidecar layout (oracle: Python ${oracle.python}, Docker ${oracle.docker})`, () => {
  it("has vectors of every outcome", () => {
    const kinds = new Set(
      oracle.vectors.map(({ result: r }) =>
        "tar_error" in r ? "tar" : "put_error" in r ? "put" : r.root_is_file ? "root" : "ok",
      ),
    );
    expect([...kinds].sort()).toEqual(["ok", "put", "root", "tar"]);
    expect(oracle.vectors.length).toBeGreaterThan(400);
  });

  for (const [i, { names, result }] of oracle.vectors.entries()) {
    it(`#${i} ${JSON.stringify(names).slice(0, 80)}`, () => {
      const got = model(names);
      if ("tar_error" in result || "put_error" in result) {
        expect(got.ok, "upstream's sidecar set-up failed").toBe(false);
        return;
      }
      if (result.root_is_file) {
        expect(got.ok).toBe(false);
        if (!got.ok) expect(got.reason).toMatch(/\/policy a file/);
        return;
      }
      if (result.files[UPSTREAM_RUNTIME_PATH] === undefined) {
        expect(got.ok).toBe(false);
        if (!got.ok) expect(got.reason).toMatch(/remove the runtime/);
        return;
      }
      expect(got.ok).toBe(true);
      if (!got.ok) return;
      expect(Object.fromEntries(got.files.map((f) => [f.path, f.content]))).toEqual(result.files);
      expect(got.dirs).toEqual([...result.dirs].sort());
      expect(got.runtime).toBe(result.files[UPSTREAM_RUNTIME_PATH] === "RUNTIME" ? "kept" : "replaced");
    });
  }
});

describe("the sidecar can never be written outside /policy", () => {
  const nameArb = fc.oneof(
    fc.string({ unit: "binary", maxLength: 30 }),
    fc
      .array(fc.constantFrom("a", "/", ".", "..", "\u0000", "\udcff", "\ud800", "é", "sdk"), { maxLength: 8 })
      .map((a) => a.join("")),
  );
  it("every written path is a clean relative path, for any names (upstream's name rules applied)", () => {
    fc.assert(
      fc.property(fc.uniqueArray(nameArb, { maxLength: 6 }), (names) => {
        const accepted = names.filter((n) => !n.startsWith("/") && !n.split("/").includes(".."));
        const tree = model(accepted);
        if (!tree.ok) return;
        for (const p of [...tree.files.map((f) => f.path), ...tree.dirs]) {
          expect(p.length).toBeGreaterThan(0);
          expect(p.startsWith("/")).toBe(false);
          expect(p.includes("\u0000")).toBe(false);
          for (const seg of p.split("/")) expect(["", ".", ".."]).not.toContain(seg);
        }
        for (const e of policyTarEntries({ skillMd: "x", policyTree: tree }))
          expect(e.name.replace(/\/$/, "").split("/")).not.toContain("..");
      }),
      { seed: 20261203, numRuns: 5000 },
    );
  });
});

describe("what the episode writes", () => {
  const pack = (files: Record<string, unknown>, skill = "# skill") => {
    const r = loadPack(Buffer.from(JSON.stringify({ files: { "SKILL.md": skill, ...files } })));
    if (!r.ok) throw new Error(r.rejection.message);
    return r.pack;
  };

  it("directories first, then the pack's files; upstream's runtime file is the image's own", () => {
    expect(policyTarEntries(pack({ "policy.py": "p", "prompts/a.txt": "x" }))).toEqual([
      { name: "prompts/", type: "directory", mode: 0o755 },
      { name: "sdk/", type: "directory", mode: 0o755 },
      { name: "policy.py", data: "p", mode: 0o644 },
      { name: "prompts/a.txt", data: "x", mode: 0o644 },
    ]);
  });

  it("a name written elsewhere lands where upstream's engine puts it; the later of two wins", () => {
    const p = pack({ "a//b": "1", "a/b": "2", "c\u0000d": "3" });
    expect(policyTarEntries(p).filter((e) => e.data !== undefined)).toEqual([
      { name: "a/b", data: "2", mode: 0o644 },
      { name: "c", data: "3", mode: 0o644 },
    ]);
  });

  it("a layout upstream cannot set up fails the episode as the policy's fault", () => {
    for (const files of [
      { a: "1", "a/b": "2" },
      { "": "x" },
      { sdk: "x" },
      { [`${"n".repeat(93)}\u0000`]: "x" },
    ]) {
      const p = pack(files);
      expect(p.policyTree.ok, JSON.stringify(files)).toBe(false);
      expect(() => policyTarEntries(p)).toThrow(ValidatorError);
      try {
        policyTarEntries(p);
      } catch (err) {
        expect((err as ValidatorError).failureClass).toBe("policy");
        expect((err as ValidatorError).code).toBe("policy_files_unwritable");
      }
    }
    // The other order is fine upstream: the file replaces the directory.
    expect(pack({ "a/b": "2", a: "1" }).policyTree.ok).toBe(true);
  });

  it("a SKILL.md upstream cannot encode (a lone surrogate) fails the episode, not the pack", () => {
    const r = loadPack(Buffer.from('{"files": {"SKILL.md": "hi \\udc00"}}'));
    expect(r.ok).toBe(true);
    if (r.ok) expect(() => policyTarEntries(r.pack)).toThrow(/lone surrogate/);
  });

  it("/policy has room for the most files a 64 KiB pack can hold", () => {
    // Distinct two-character names, one byte each: as many non-empty files as the fetch limit allows.
    const files: Record<string, string> = {};
    const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
    let size = JSON.stringify({ files: { "SKILL.md": "s" } }).length;
    outer: for (const a of alphabet)
      for (const b of ` ${alphabet}`) {
        const name = (a + b).trim();
        size += JSON.stringify(name).length + 5; // , "ab": "x"
        if (size > 64 * 1024) break outer;
        files[name] = "x";
      }
    const p = pack(files, "s");
    expect(Buffer.byteLength(JSON.stringify({ files: { "SKILL.md": "s", ...files } }))).toBeLessThanOrEqual(
      64 * 1024,
    );
    expect(p.policyTree.ok).toBe(true);
    const pages = p.policyTree.ok
      ? p.policyTree.files.reduce(
          (n, f) => n + Math.max(1, Math.ceil(Buffer.byteLength(f.content) / 4096)),
          0,
        )
      : 0;
    expect(pages).toBeGreaterThan((2 * 1024 * 1024) / 4096); // the old 2 MiB tmpfs could not hold it
    expect(pages * 4096 + 64 * 1024).toBeLessThan(POLICY_DIR_TMPFS_BYTES);
  });
});
