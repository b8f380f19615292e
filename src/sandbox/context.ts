/**
 * Build contexts assembled from repository paths, and their content hash. The hash is the image's
 * tag: the same files (+ build args + base image id) give the same tag, so an unchanged image is
 * never rebuilt and every score can name exactly what it ran on.
 */
import { createHash } from "node:crypto";
import { readdir, readFile, stat } from "node:fs/promises";
import { join, posix, relative, sep } from "node:path";
import { InfraError } from "../errors.js";
import { sha256Hex } from "../hash.js";
import type { TarEntry } from "./tar.js";

/** Never part of a context: VCS data, dependency trees and byte-code caches. */
export const DEFAULT_EXCLUDES = [
  ".git",
  "**/.git",
  "node_modules",
  "**/node_modules",
  "**/__pycache__",
  "**/*.pyc",
];

export interface ContextSource {
  /** Absolute host path: a directory (its contents) or a single file. */
  from: string;
  /** Where it lands inside the context ("" = the root). */
  to: string;
}

export interface ContextFile {
  path: string;
  /** Only the executable bit survives: 0o755 or 0o644, so a checkout's umask cannot change the hash. */
  mode: number;
  data: Buffer;
}

export interface BuildContext {
  files: ContextFile[];
  /** sha256 hex over paths, modes and contents (see contextHash). */
  filesHash: string;
}

/** A tiny .dockerignore dialect: `*` within a segment, `**` across segments, `?`, a leading `!` re-includes. */
export function globToRegExp(pattern: string): RegExp {
  let p = pattern.trim().replace(/^\/+/, "").replace(/\/+$/, "");
  if (p.startsWith("./")) p = p.slice(2);
  let re = "";
  for (let i = 0; i < p.length; i++) {
    const c = p[i]!;
    if (c === "*") {
      if (p[i + 1] === "*") {
        // "**/" matches zero or more whole segments; a trailing "**" matches the rest.
        if (p[i + 2] === "/") {
          re += "(?:.*/)?";
          i += 2;
        } else {
          re += ".*";
          i += 1;
        }
      } else re += "[^/]*";
    } else if (c === "?") re += "[^/]";
    else re += c.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  // A pattern naming a directory excludes everything below it too.
  return new RegExp(`^${re}(?:/.*)?$`);
}

export interface IgnoreRule {
  re: RegExp;
  negate: boolean;
}

export function parseIgnore(lines: readonly string[]): IgnoreRule[] {
  const rules: IgnoreRule[] = [];
  for (const raw of lines) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const negate = line.startsWith("!");
    rules.push({ re: globToRegExp(negate ? line.slice(1) : line), negate });
  }
  return rules;
}

/** Last matching rule wins, as in Docker's own matcher. */
export function isIgnored(path: string, rules: readonly IgnoreRule[]): boolean {
  let ignored = false;
  for (const r of rules) if (r.re.test(path)) ignored = !r.negate;
  return ignored;
}

async function walk(dir: string, rules: readonly IgnoreRule[], out: string[], root: string): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true });
  for (const e of entries) {
    const abs = join(dir, e.name);
    const rel = relative(root, abs).split(sep).join("/");
    if (isIgnored(rel, rules)) continue;
    if (e.isDirectory()) await walk(abs, rules, out, root);
    // Symlinks and special files are left out: a context is plain files only.
    else if (e.isFile()) out.push(abs);
  }
}

/** Read every source into one context, applying DEFAULT_EXCLUDES + `exclude` + each directory's .dockerignore. */
export async function assembleContext(
  sources: readonly ContextSource[],
  exclude: readonly string[] = [],
): Promise<BuildContext> {
  const byPath = new Map<string, ContextFile>();
  for (const src of sources) {
    let st: Awaited<ReturnType<typeof stat>>;
    try {
      st = await stat(src.from);
    } catch {
      throw new InfraError("image_context_missing", `build context source ${src.from} does not exist`, {
        retryable: false,
      });
    }
    const to = src.to.replace(/^\/+/, "").replace(/\/+$/, "");
    if (st.isFile()) {
      const data = await readFile(src.from);
      byPath.set(to, { path: to, mode: st.mode & 0o111 ? 0o755 : 0o644, data });
      continue;
    }
    let ignoreLines: string[] = [];
    try {
      ignoreLines = (await readFile(join(src.from, ".dockerignore"), "utf8")).split(/\r?\n/);
    } catch {
      // no .dockerignore: defaults only
    }
    const rules = parseIgnore([...DEFAULT_EXCLUDES, ...exclude, ...ignoreLines]);
    const files: string[] = [];
    await walk(src.from, rules, files, src.from);
    for (const abs of files) {
      const rel = relative(src.from, abs).split(sep).join("/");
      const path = to ? posix.join(to, rel) : rel;
      const fst = await stat(abs);
      byPath.set(path, { path, mode: fst.mode & 0o111 ? 0o755 : 0o644, data: await readFile(abs) });
    }
  }
  const files = [...byPath.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const h = createHash("sha256");
  for (const f of files) {
    h.update(`${f.path}\0${f.mode.toString(8)}\0${sha256Hex(f.data)}\n`);
  }
  return { files, filesHash: h.digest("hex") };
}

/** The image identity: context files + Dockerfile path + build args + the id of any base image passed in. */
export function imageHash(
  filesHash: string,
  dockerfile: string,
  buildArgs: Readonly<Record<string, string>>,
  baseImageIds: readonly string[] = [],
): string {
  const h = createHash("sha256");
  h.update(`files ${filesHash}\ndockerfile ${dockerfile}\n`);
  for (const k of Object.keys(buildArgs).sort()) h.update(`arg ${k}=${buildArgs[k]}\n`);
  for (const id of [...baseImageIds].sort()) h.update(`base ${id}\n`);
  return h.digest("hex");
}

export function contextTarEntries(ctx: BuildContext): TarEntry[] {
  return ctx.files.map((f) => ({ name: f.path, data: f.data, mode: f.mode }));
}
