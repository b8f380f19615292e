/**
 * A content digest per scenario, recorded with every score for provenance: what the agent's
 * image was built from (environment/), what graded it (tests/) and the task's limits
 * (task.toml). instruction.md and solution/ are deliberately outside it: rewording a prompt or
 * a reference solution does not change what a score was measured against.
 */
import { createHash } from "node:crypto";
import { lstat, readdir, readFile, readlink } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { sha256Hex } from "../hash.js";

export interface DigestEntry {
  /** Path relative to the scenario folder, '/'-separated. */
  path: string;
  kind: "file" | "symlink";
  /** Any execute bit set (Docker COPY keeps it, so it changes the image). */
  executable: boolean;
  /** sha256 of the content (of the link target for symlinks). */
  sha256: string;
}

/** Files that are byproducts of running the graders locally, never inputs. */
const IGNORED = (name: string) => name === "__pycache__" || name.endsWith(".pyc") || name === ".DS_Store";

/** Pure: one line per entry, sorted by the bytes of the path, hashed. */
export function digestOf(entries: readonly DigestEntry[]): string {
  const sorted = [...entries].sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));
  const h = createHash("sha256");
  h.update("trajrl-scenario-digest-v1\n");
  for (const e of sorted)
    h.update(`${e.kind === "symlink" ? "l" : e.executable ? "x" : "f"} ${e.sha256} ${e.path}\n`);
  return h.digest("hex");
}

async function collect(root: string, at: string, out: DigestEntry[]): Promise<void> {
  const st = await lstat(at);
  const rel = relative(root, at).split(sep).join("/");
  if (st.isSymbolicLink()) {
    out.push({ path: rel, kind: "symlink", executable: false, sha256: sha256Hex(await readlink(at)) });
  } else if (st.isDirectory()) {
    for (const name of (await readdir(at)).sort()) {
      if (!IGNORED(name)) await collect(root, join(at, name), out);
    }
  } else if (st.isFile()) {
    out.push({
      path: rel,
      kind: "file",
      executable: (st.mode & 0o111) !== 0,
      sha256: sha256Hex(await readFile(at)),
    });
  }
}

/**
 * The identity of a bench scenario's hidden tests (trajrl-bench's `tests_files_b64`, decoded): one
 * line per file, sorted by the bytes of its name, hashed under its own domain. Pure.
 */
export function testFilesDigest(files: Readonly<Record<string, Uint8Array>>): string {
  const names = Object.keys(files).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  const h = createHash("sha256");
  h.update("trajrl-tests-files-v1\n");
  for (const n of names) h.update(`${sha256Hex(files[n]!)} ${n}\n`);
  return h.digest("hex");
}

/** The digest of a scenario folder: environment/, tests/ and task.toml. */
export async function scenarioDigest(dir: string): Promise<string> {
  const entries: DigestEntry[] = [];
  for (const part of ["environment", "tests", "task.toml"]) await collect(dir, join(dir, part), entries);
  return digestOf(entries);
}
