/** Build a pack from a SKILL.md and a policy directory (the miner's side of the wire format). */
import { lstat, readdir, readFile } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { InputError } from "../errors.js";
import {
  canonicalJson,
  type Pack,
  PLATFORM_MAX_PACK_BYTES,
  policyFileNameProblem,
  SKILL_MD,
  validatePackValue,
} from "./pack.js";
import { fromJs } from "./pyjson.js";

/** The builder is stricter than a validator: a pack holds text files only (NUL bytes mean binary). */
function textProblem(content: string): string | null {
  return content.includes("\u0000") ? "contains NUL bytes (binary)" : null;
}

const SKIPPED_DIRS = new Set([
  "__pycache__",
  ".git",
  ".hg",
  ".svn",
  ".venv",
  "node_modules",
  ".mypy_cache",
  ".pytest_cache",
]);
const SKIPPED_FILES = new Set([".DS_Store", "Thumbs.db"]);
const SKIPPED_SUFFIXES = [".pyc", ".pyo"];

export interface BuiltPack {
  pack: Pack;
  /** The canonical JSON text; its sha256 is the pack hash. */
  json: string;
  /** Files skipped by rule (caches, VCS), relative to the policy dir. */
  skipped: string[];
}

async function readText(path: string, shown: string): Promise<string> {
  const bytes = await readFile(path);
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new InputError("binary_file", `${shown}: not UTF-8 text (binary files cannot go into a pack)`);
  }
  const problem = textProblem(text);
  if (problem) throw new InputError("binary_file", `${shown}: ${problem}`);
  return text;
}

async function walk(
  root: string,
  dir: string,
  files: Record<string, string>,
  skipped: string[],
): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true });
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const entry of entries) {
    const abs = join(dir, entry.name);
    const rel = relative(root, abs).split(sep).join("/");
    if (entry.isDirectory()) {
      if (SKIPPED_DIRS.has(entry.name)) {
        skipped.push(`${rel}/`);
        continue;
      }
      await walk(root, abs, files, skipped);
      continue;
    }
    if (SKIPPED_FILES.has(entry.name) || SKIPPED_SUFFIXES.some((s) => entry.name.endsWith(s))) {
      skipped.push(rel);
      continue;
    }
    const st = await lstat(abs);
    if (st.isSymbolicLink())
      throw new InputError("bad_policy_file", `${rel}: symbolic links are not allowed in a pack`);
    if (!st.isFile()) throw new InputError("bad_policy_file", `${rel}: not a regular file`);
    const problem = policyFileNameProblem(rel);
    if (problem) throw new InputError("bad_policy_file", `${JSON.stringify(rel)}: ${problem}`);
    if (rel === SKILL_MD) {
      throw new InputError(
        "bad_policy_file",
        `${rel}: the policy directory must not hold SKILL.md (pass it as the first argument)`,
      );
    }
    files[rel] = await readText(abs, rel);
  }
}

export async function buildPack(skillMdPath: string, policyDir?: string): Promise<BuiltPack> {
  const files: Record<string, string> = {};
  const skipped: string[] = [];
  files[SKILL_MD] = await readText(skillMdPath, skillMdPath);
  if (policyDir !== undefined) {
    const st = await lstat(policyDir).catch(() => null);
    if (!st?.isDirectory()) throw new InputError("bad_policy_dir", `${policyDir}: not a directory`);
    await walk(policyDir, policyDir, files, skipped);
  }
  const value = fromJs({ schema_version: 1, files });
  const result = validatePackValue(value);
  if (!result.ok)
    throw new InputError(result.rejection.code, `${result.rejection.code}: ${result.rejection.message}`);
  if (!result.pack.policyTree.ok)
    throw new InputError(
      "bad_policy_file",
      `the sidecar could not be set up: ${result.pack.policyTree.reason}`,
    );
  // Validators accept bigger packs, but the platform refuses the submission: say so before upload.
  if (result.pack.canonicalBytes > PLATFORM_MAX_PACK_BYTES)
    throw new InputError(
      "pack_too_large_for_platform",
      `the pack is ${result.pack.canonicalBytes} bytes; the platform refuses submissions over ${PLATFORM_MAX_PACK_BYTES}`,
    );
  return { pack: result.pack, json: canonicalJson(value), skipped };
}
