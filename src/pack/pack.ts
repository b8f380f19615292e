/**
 * The Season 2 pack: `{"schema_version": 1, "files": {"SKILL.md": ..., "policy.py"|"policy.json": ..., ...}}`.
 * Pure: hashing, verification and upstream's structure rules with upstream's rejection codes
 * (README.md here states them and where each comes from).
 */
import { sha256Hex } from "../hash.js";
import {
  isPyBlank,
  PyJsonError,
  type PyObject,
  type PyValue,
  pyJsonDumps,
  pyJsonParseBytes,
  pyTypeName,
} from "./pyjson.js";
import { type PolicyTree, sidecarPolicyTree } from "./sidecar-tree.js";

/** The platform refuses submissions whose canonical form is over 32 KB; validators do not check it. */
export const PLATFORM_MAX_PACK_BYTES = 32_768;
/** Upstream's bound on the policy files' UTF-8 bytes (`POLICY_FILES_MAX_BYTES`). */
export const MAX_POLICY_FILES_BYTES = 512 * 1024;
/** Upstream's fetch limit on the raw pack (github.py `_MAX_RESPONSE_BYTES`): the only size cap. */
export const MAX_FETCH_BYTES = 64 * 1024;
export const SKILL_MD = "SKILL.md";
export const POLICY_ENTRY_POINTS = ["policy.py", "policy.json"] as const;

/** Upstream's codes (miner_eval.py skip reasons; pack_verify → "pack_verify_failed" in validator.py). */
export type RejectionCode =
  | "pack_verify_failed"
  | "invalid_pack_structure"
  | "missing_skill_md"
  | "empty_skill_md";

export interface Rejection {
  code: RejectionCode;
  message: string;
}

export interface Pack {
  /** SKILL.md content: a str that is not blank by Python's `str.strip()`. */
  skillMd: string;
  /** Every text file but SKILL.md, by name (upstream's `extract_policy_files`). */
  policyFiles: Readonly<Record<string, string>>;
  /** The policy files' names in the pack's order (upstream's dict order: the order it writes them). */
  policyFileOrder: readonly string[];
  /** Entries of `files` that are not text, skipped as upstream skips them: name and Python type. */
  skippedFiles: ReadonlyArray<{ name: string; type: string }>;
  /** What upstream's harness leaves in the sidecar's /policy for these files (src/pack/sidecar-tree.ts). */
  policyTree: PolicyTree;
  /** Which entry point the sidecar finds in /policy; "pin" when neither policy.py nor policy.json. */
  entryPoint: "policy.py" | "policy.json" | "pin";
  /** sha256 hex of the canonical form. */
  hash: string;
  /** UTF-8 length of the canonical form (the platform refuses submissions over PLATFORM_MAX_PACK_BYTES). */
  canonicalBytes: number;
}

export type PackResult = { ok: true; pack: Pack } | { ok: false; rejection: Rejection };

const reject = (code: RejectionCode, message: string): PackResult => ({
  ok: false,
  rejection: { code, message },
});

/** The canonical form: Python `json.dumps(pack, sort_keys=True)`. */
export function canonicalJson(value: PyValue): string {
  return pyJsonDumps(value);
}

export function packHashOf(value: PyValue): string {
  return sha256Hex(Buffer.from(canonicalJson(value), "utf8"));
}

/**
 * Parse raw pack bytes as upstream reads them (httpx `resp.text`: UTF-8, undecodable bytes replaced,
 * then `json.loads`). Not JSON is pack_verify_failed: upstream's fetcher fails the pack before any
 * structure rule (github.py `verify_submission`).
 */
export function parsePackBytes(
  bytes: Uint8Array,
): { ok: true; value: PyValue } | { ok: false; rejection: Rejection } {
  try {
    return { ok: true, value: pyJsonParseBytes(bytes) };
  } catch (err) {
    const detail = err instanceof PyJsonError ? err.message : String(err);
    return {
      ok: false,
      rejection: { code: "pack_verify_failed", message: `pack is not valid JSON: ${detail}` },
    };
  }
}

/**
 * Upstream's only rules on a policy file's name (`extract_policy_files`): not absolute, no `..`
 * segment. Returns the reason, or null when upstream accepts it.
 */
export function policyFileNameProblem(name: string): string | null {
  if (name.startsWith("/")) return "absolute path";
  if (name.split("/").includes("..")) return "'..' segment";
  return null;
}

/**
 * Validate a parsed pack in upstream's order (miner_eval.py `evaluate_miner_s1`): root object,
 * `files` object, SKILL.md present, the policy-file rules (`extract_policy_files`: non-text values
 * skipped first, then names in pack order, then the UTF-8 size, which also fails on a lone
 * surrogate), SKILL.md a non-blank str. Nothing else: no schema_version, no canonical size.
 */
export function validatePackValue(value: PyValue): PackResult {
  const canonical = canonicalJson(value);
  const canonicalBytes = Buffer.byteLength(canonical, "utf8");
  const hash = sha256Hex(Buffer.from(canonical, "utf8"));

  if (!(value instanceof Map)) {
    return reject("invalid_pack_structure", `pack root is ${pyTypeName(value)}, expected object`);
  }
  const files = value.get("files");
  if (!(files instanceof Map)) {
    return reject("invalid_pack_structure", `'files' is ${pyTypeName(files)}, expected object`);
  }
  if (!files.has(SKILL_MD)) return reject("missing_skill_md", "pack has no SKILL.md in files");
  const policy = extractPolicyFiles(files);
  if ("problem" in policy) return reject("invalid_pack_structure", policy.problem);
  const skill = files.get(SKILL_MD);
  if (typeof skill !== "string" || isPyBlank(skill)) {
    return reject("empty_skill_md", `SKILL.md is ${typeof skill === "string" ? "blank" : pyTypeName(skill)}`);
  }

  const policyTree = sidecarPolicyTree(
    policy.order.map((n) => [n, policy.files[n]!] as const),
    { runtime: "" },
  );
  const has = (name: string) =>
    policyTree.ok
      ? policyTree.files.some((f) => f.path === name && f.from !== null)
      : policy.files[name] !== undefined;
  const entryPoint = has("policy.py") ? "policy.py" : has("policy.json") ? "policy.json" : "pin";
  return {
    ok: true,
    pack: {
      skillMd: skill,
      policyFiles: policy.files,
      policyFileOrder: policy.order,
      skippedFiles: policy.skipped,
      policyTree,
      entryPoint,
      hash,
      canonicalBytes,
    },
  };
}

/** Upstream's `extract_policy_files` over a parsed `files` object (pack order). */
function extractPolicyFiles(
  files: PyObject,
):
  | { files: Record<string, string>; order: string[]; skipped: Array<{ name: string; type: string }> }
  | { problem: string } {
  const out: Record<string, string> = Object.create(null);
  const order: string[] = [];
  const skipped: Array<{ name: string; type: string }> = [];
  for (const [name, content] of files) {
    if (name === SKILL_MD) continue;
    if (typeof content !== "string") {
      skipped.push({ name, type: pyTypeName(content) });
      continue;
    }
    const problem = policyFileNameProblem(name);
    if (problem) return { problem: `bad policy file name ${JSON.stringify(name)}: ${problem}` };
    out[name] = content;
    order.push(name);
  }
  let total = 0;
  for (const name of order) {
    const content = out[name]!;
    // Python's str.encode("utf-8") raises on a lone surrogate (a ValueError: the same rejection).
    if (!content.isWellFormed())
      return { problem: `policy file ${JSON.stringify(name)} cannot be encoded as UTF-8 (lone surrogate)` };
    total += Buffer.byteLength(content, "utf8");
  }
  if (total > MAX_POLICY_FILES_BYTES) {
    return { problem: `policy files too large: ${total} bytes (max ${MAX_POLICY_FILES_BYTES})` };
  }
  return { files: out, order, skipped };
}

/**
 * Parse, then validate; optionally verify against an expected hash. Upstream's fetcher refuses a
 * body over 64 KiB, then parses, then compares the hash: each a pack_verify_failed.
 */
export function loadPack(bytes: Uint8Array, expectedHash?: string): PackResult {
  if (bytes.byteLength > MAX_FETCH_BYTES) {
    return reject(
      "pack_verify_failed",
      `pack is ${bytes.byteLength} bytes, over the fetch limit of ${MAX_FETCH_BYTES}`,
    );
  }
  const parsed = parsePackBytes(bytes);
  if (!parsed.ok) return parsed;
  if (expectedHash !== undefined) {
    const got = packHashOf(parsed.value);
    if (got !== expectedHash.toLowerCase()) {
      return reject(
        "pack_verify_failed",
        `hash mismatch: expected ${expectedHash.slice(0, 12)}, got ${got.slice(0, 12)}`,
      );
    }
  }
  return validatePackValue(parsed.value);
}
