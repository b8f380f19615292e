/**
 * What upstream's harness leaves in the policy sidecar's /policy for a pack, worked out without
 * Docker. Upstream (`sandbox_harness.py` `_start_policy_sidecar`) builds a Python `tarfile` (PAX)
 * of `policy/sdk/trajrl_policy.py` (its runtime) followed by `policy/<name>` for every policy file
 * in the pack's order, and the engine's `put_archive` unpacks it into the container's root. Names
 * upstream's pack rules accept can still be written oddly or not at all: this module replays that
 * unpacking (measured on Python 3.11's tarfile and Docker 20.10: README.md) and says which
 * files end up where, or why the sidecar could not be set up (upstream then scores the scenario 0
 * and skips the verifier). Pure. Every path it returns is a clean relative path inside /policy.
 */

import { PolicyError } from "../errors.js";
import { compareCodePoints } from "./pyjson.js";

/** Where upstream's runtime sits in /policy; a pack file of the same name replaces it. */
export const UPSTREAM_RUNTIME_PATH = "sdk/trajrl_policy.py";

/** Linux NAME_MAX and PATH_MAX (the engine opens `/policy/<path>`, ≤ 4095 bytes with its NUL). */
const NAME_MAX_BYTES = 255;
const PATH_MAX_BYTES = 4095;
/** Python's tarfile keeps an ASCII name of ≤ 100 characters in the ustar header, else a PAX record. */
const USTAR_NAME_CHARS = 100;

export interface PolicyTreeFile {
  /** Relative to /policy: no leading slash, no empty, `.` or `..` segment, no NUL. */
  path: string;
  content: string;
  /** The pack's file name that produced it (null for the runtime). */
  from: string | null;
}

export type PolicyTree =
  | {
      ok: true;
      /** Every regular file in /policy, in path order (the runtime's own file included when kept). */
      files: PolicyTreeFile[];
      /** Every directory under /policy (not /policy itself), in path order. */
      dirs: string[];
      /** Whether a pack file took the runtime's place ("none" when no runtime was given). */
      runtime: "kept" | "replaced" | "none";
      /** Pack names written under another path (`a//b` → `a/b`, `x\0y` → `x`), and names that left no file. */
      moved: Array<{ name: string; path: string | null }>;
    }
  | { ok: false; reason: string };

type Node = { kind: "dir" } | { kind: "file"; content: string; from: string | null };

/**
 * Replay upstream's unpacking of `entries` (pack order) into /policy. With `runtime`, its file is
 * written first at UPSTREAM_RUNTIME_PATH, as upstream does, and must still be a file at the end
 * (upstream's sidecar runs it). Without, /policy starts as an empty directory.
 */
export function sidecarPolicyTree(
  entries: Iterable<readonly [name: string, content: string]>,
  opts: { runtime?: string } = {},
): PolicyTree {
  // Keys are paths relative to the container's root after Go's filepath.Clean; "policy" is /policy.
  const fs = new Map<string, Node>([["policy", { kind: "dir" }]]);
  const moved: Array<{ name: string; path: string | null }> = [];
  const all: Array<[string, string, string | null]> = [];
  if (opts.runtime !== undefined) all.push([UPSTREAM_RUNTIME_PATH, opts.runtime, null]);
  for (const [name, content] of entries) all.push([name, content, name]);

  for (const [name, content, from] of all) {
    const header = tarHeaderName(`policy/${name}`);
    if ("error" in header) return { ok: false, reason: `policy file ${show(name)}: ${header.error}` };
    const path = goClean(header.name);
    if (path === ".." || path.startsWith("../"))
      return { ok: false, reason: `policy file ${show(name)} unpacks outside the sidecar's root` };
    if (path === ".") {
      // The container's root itself, a directory: the engine skips the entry.
      if (from !== null) moved.push({ name: from, path: null });
      continue;
    }
    const tooLong = lengthProblem(path);
    if (tooLong) return { ok: false, reason: `policy file ${show(name)}: ${tooLong}` };
    // Parents: created when missing; a file on the way makes the write fail (ENOTDIR).
    const segs = path.split("/");
    for (let k = 1; k < segs.length; k++) {
      const p = segs.slice(0, k).join("/");
      const node = fs.get(p);
      if (node?.kind === "file")
        return { ok: false, reason: `policy file ${show(name)}: ${show(p)} is a file, not a directory` };
      if (!node) fs.set(p, { kind: "dir" });
    }
    // Whatever is there already (a file, or a whole directory) is removed and replaced.
    if (fs.has(path))
      for (const key of [...fs.keys()]) if (key === path || key.startsWith(`${path}/`)) fs.delete(key);
    fs.set(path, { kind: "file", content, from });
    if (from !== null && path !== `policy/${from}`) moved.push({ name: from, path: relative(path) });
  }

  const root = fs.get("policy");
  if (root?.kind !== "dir")
    return {
      ok: false,
      reason: "the pack's files leave /policy a file, not a directory: the sidecar cannot start",
    };
  let runtime: "kept" | "replaced" | "none" = "none";
  if (opts.runtime !== undefined) {
    const r = fs.get(`policy/${UPSTREAM_RUNTIME_PATH}`);
    if (r?.kind !== "file")
      return {
        ok: false,
        reason: `the pack's files remove the runtime /policy/${UPSTREAM_RUNTIME_PATH}: the sidecar cannot start`,
      };
    runtime = r.from === null ? "kept" : "replaced";
  }
  const files: PolicyTreeFile[] = [];
  const dirs: string[] = [];
  for (const [key, node] of fs) {
    if (key === "policy" || !key.startsWith("policy/")) continue;
    if (node.kind === "dir") dirs.push(relative(key));
    else files.push({ path: relative(key), content: node.content, from: node.from });
  }
  dirs.sort(compareCodePoints);
  files.sort((a, b) => compareCodePoints(a.path, b.path));
  return { ok: true, files, dirs, runtime, moved };
}

/**
 * The name the engine reads back from Python's tar header for `full` (`policy/<name>`). ASCII of
 * ≤ 100 characters: the ustar field, which the reader ends at the first NUL. Otherwise a PAX
 * `path` record: Python encodes it as UTF-8 (lone surrogates U+DC80–U+DCFF as the bytes 0x80–0xFF
 * via surrogateescape, any other lone surrogate fails the whole tar), and Go's reader refuses a
 * path holding NUL (the upload fails). Lone surrogates stay in the returned name as one "byte" each.
 */
function tarHeaderName(full: string): { name: string } | { error: string } {
  if (/^[\x00-\x7f]*$/.test(full) && full.length <= USTAR_NAME_CHARS) {
    const nul = full.indexOf("\u0000");
    return { name: nul < 0 ? full : full.slice(0, nul) };
  }
  for (let i = 0; i < full.length; i++) {
    const c = full.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = full.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        i++;
        continue;
      }
      return { error: "a lone surrogate in the name cannot be encoded in the tar (UnicodeEncodeError)" };
    }
    if (c >= 0xdc00 && c <= 0xdfff && (c < 0xdc80 || c > 0xdcff))
      return { error: "a lone surrogate in the name cannot be encoded in the tar (UnicodeEncodeError)" };
  }
  if (full.includes("\u0000"))
    return { error: "a NUL in a long or non-ASCII name: the engine refuses the tar" };
  return { name: full };
}

/** Go's filepath.Clean on a relative path (the engine cleans every tar name before using it). */
function goClean(p: string): string {
  const out: string[] = [];
  for (const seg of p.split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") {
      if (out.length > 0 && out[out.length - 1] !== "..") out.pop();
      else out.push("..");
      continue;
    }
    out.push(seg);
  }
  return out.length === 0 ? "." : out.join("/");
}

function lengthProblem(path: string): string | null {
  for (const seg of path.split("/"))
    if (byteLength(seg) > NAME_MAX_BYTES) return `a path segment longer than ${NAME_MAX_BYTES} bytes`;
  if (byteLength(path) + 1 > PATH_MAX_BYTES)
    return `the path /${path} is longer than ${PATH_MAX_BYTES} bytes`;
  return null;
}

/** Bytes on disk: UTF-8, a surrogate-escaped lone surrogate (U+DC80–U+DCFF) being one raw byte. */
function byteLength(s: string): number {
  let n = 0;
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c >= 0xdc80 && c <= 0xdcff ? 1 : c < 0x10000 ? 3 : 4;
  }
  return n;
}

const relative = (key: string) => key.slice("policy/".length);
const show = (s: string) => JSON.stringify(s);

/**
 * Room /policy needs for any pack within the fetch limit, if it is a tmpfs: every non-empty file
 * takes at least one 4 KiB page, and 64 KiB of JSON holds at most ~8 200 non-empty files
 * (`"k":"v",` is 8 bytes), so ≤ 8 210 pages (32 MiB) plus the runtime. Upstream writes into the
 * container's own filesystem, where a pack of many small files always fits: ours must too.
 */
export const POLICY_DIR_TMPFS_BYTES = 40 * 1024 * 1024;

/** A tar entry for the sidecar's /policy (the shape of src/sandbox's TarEntry). */
export interface PolicyTarEntry {
  name: string;
  type?: "directory";
  data?: string;
  mode: number;
}

/**
 * The pack's files for the sidecar's /policy as tar entries (directories first), from upstream's
 * unpacking (`pack.policyTree`). The runtime's own file is left out: the sidecar image has its
 * runtime; a pack file that replaced it is written where it landed. Throws PolicyError when
 * upstream's harness could not set the episode up for this pack (its sidecar fails to start, or
 * SKILL.md cannot be encoded): upstream then scores the scenario 0 without running the verifier.
 */
export function policyTarEntries(pack: { policyTree: PolicyTree; skillMd: string }): PolicyTarEntry[] {
  if (!pack.skillMd.isWellFormed())
    throw new PolicyError(
      "skill_md_unwritable",
      "SKILL.md holds a lone surrogate: upstream cannot encode it into the scenario (UnicodeEncodeError)",
    );
  const tree = pack.policyTree;
  if (!tree.ok) throw new PolicyError("policy_files_unwritable", tree.reason);
  return [
    ...tree.dirs.map((d): PolicyTarEntry => ({ name: `${d}/`, type: "directory", mode: 0o755 })),
    ...tree.files
      .filter((f) => f.from !== null)
      .map((f): PolicyTarEntry => ({ name: f.path, data: f.content, mode: 0o644 })),
  ];
}
