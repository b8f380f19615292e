/**
 * The Season 2 pack: `{"schema_version": 1, "files": {"SKILL.md": ..., "policy.py"|"policy.json": ..., ...}}`.
 * Pure: hashing, verification and the structure rules, with the rejection codes of the wire protocol.
 */
import { createHash } from "node:crypto";
import {
  isPyBlank,
  PyJsonError,
  type PyObject,
  type PyValue,
  pyJsonDumps,
  pyJsonParseBytes,
  pyTypeName,
} from "./pyjson.js";

export const MAX_CANONICAL_BYTES = 32_768;
export const MAX_POLICY_FILES_BYTES = 512 * 1024;
/** The platform's fetch limit on the raw pack (the canonical form is checked separately). */
export const MAX_FETCH_BYTES = 64 * 1024;
export const SKILL_MD = "SKILL.md";
export const POLICY_ENTRY_POINTS = ["policy.py", "policy.json"] as const;

export type RejectionCode =
  | "pack_verify_failed"
  | "pack_too_large"
  | "invalid_pack_structure"
  | "missing_skill_md"
  | "empty_skill_md"
  | "invalid_policy_files";

export interface Rejection {
  code: RejectionCode;
  message: string;
}

export interface Pack {
  schemaVersion: 1;
  /** SKILL.md content, non-blank. */
  skillMd: string;
  /** Every file but SKILL.md, by relative name, in code-point order. */
  policyFiles: Record<string, string>;
  /** Which entry point the sidecar runs; "pin" when the pack has neither policy.py nor policy.json. */
  entryPoint: "policy.py" | "policy.json" | "pin";
  /** sha256 hex of the canonical form. */
  hash: string;
  /** UTF-8 length of the canonical form. */
  canonicalBytes: number;
}

export type PackResult = { ok: true; pack: Pack } | { ok: false; rejection: Rejection };

const reject = (code: RejectionCode, message: string): PackResult => ({
  ok: false,
  rejection: { code, message },
});

export function sha256Hex(data: string | Uint8Array): string {
  return createHash("sha256").update(data).digest("hex");
}

/** The canonical form: Python `json.dumps(pack, sort_keys=True)`. */
export function canonicalJson(value: PyValue): string {
  return pyJsonDumps(value);
}

export function packHashOf(value: PyValue): string {
  return sha256Hex(Buffer.from(canonicalJson(value), "utf8"));
}

/** Parse raw pack bytes; on failure, an invalid_pack_structure rejection naming where JSON broke. */
export function parsePackBytes(
  bytes: Uint8Array,
): { ok: true; value: PyValue } | { ok: false; rejection: Rejection } {
  try {
    return { ok: true, value: pyJsonParseBytes(bytes) };
  } catch (err) {
    const detail = err instanceof PyJsonError ? err.message : String(err);
    return {
      ok: false,
      rejection: { code: "invalid_pack_structure", message: `pack is not valid JSON: ${detail}` },
    };
  }
}

/**
 * A policy file name must be a plain relative path: no absolute path, no `..` or `.` segment,
 * no empty segment, no backslash, no control characters. Returns the reason, or null when fine.
 */
export function policyFileNameProblem(name: string): string | null {
  if (name.length === 0) return "empty file name";
  if (name.length > 255) return "file name longer than 255 characters";
  if (name.startsWith("/")) return "absolute path";
  if (name.includes("\\")) return "backslash in file name";
  if (/[\x00-\x1f\x7f]/.test(name)) return "control character in file name";
  for (const seg of name.split("/")) {
    if (seg === "") return "empty path segment";
    if (seg === "..") return "'..' segment";
    if (seg === ".") return "'.' segment";
  }
  return null;
}

/** Text only: a file that cannot be written as UTF-8 text (NUL bytes, lone surrogates) is binary to us. */
export function textProblem(content: string): string | null {
  if (content.includes("\u0000")) return "contains NUL bytes (binary)";
  if (!content.isWellFormed()) return "contains unpaired surrogates (not UTF-8 text)";
  return null;
}

/**
 * Validate a parsed pack. Order and meaning of the first four checks follow the Python validator:
 * root must be an object, `files` an object, SKILL.md present, SKILL.md a non-blank string.
 * Then the Season 2 rules: schema_version 1, canonical size, policy-file rules.
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
  const skill = files.get(SKILL_MD);
  if (typeof skill !== "string" || isPyBlank(skill)) {
    return reject("empty_skill_md", `SKILL.md is ${typeof skill === "string" ? "blank" : pyTypeName(skill)}`);
  }
  const version = value.get("schema_version");
  if (version !== 1n) {
    return reject(
      "invalid_pack_structure",
      `schema_version is ${version === undefined ? "missing" : pyJsonDumps(version)}, expected 1`,
    );
  }
  if (canonicalBytes > MAX_CANONICAL_BYTES) {
    return reject(
      "pack_too_large",
      `canonical pack is ${canonicalBytes} bytes, limit ${MAX_CANONICAL_BYTES}`,
    );
  }
  const policy = checkPolicyFiles(files);
  if ("problem" in policy) return reject("invalid_policy_files", policy.problem);

  const skillProblem = textProblem(skill);
  if (skillProblem) return reject("invalid_policy_files", `SKILL.md ${skillProblem}`);

  const entryPoint =
    policy.files["policy.py"] !== undefined
      ? "policy.py"
      : policy.files["policy.json"] !== undefined
        ? "policy.json"
        : "pin";
  return {
    ok: true,
    pack: { schemaVersion: 1, skillMd: skill, policyFiles: policy.files, entryPoint, hash, canonicalBytes },
  };
}

function checkPolicyFiles(files: PyObject): { files: Record<string, string> } | { problem: string } {
  const out: Record<string, string> = Object.create(null);
  let total = 0;
  const names = [...files.keys()].filter((k) => k !== SKILL_MD).sort();
  const seenLower = new Map<string, string>();
  for (const name of names) {
    const content = files.get(name)!;
    if (typeof content !== "string")
      return { problem: `file '${name}' is ${pyTypeName(content)}, expected text` };
    const nameProblem = policyFileNameProblem(name);
    if (nameProblem) return { problem: `file name ${JSON.stringify(name)}: ${nameProblem}` };
    const textIssue = textProblem(content);
    if (textIssue) return { problem: `file '${name}' ${textIssue}` };
    // A file and a directory of the same name cannot both exist in /policy.
    for (const prefix of prefixesOf(name)) {
      if (files.has(prefix)) return { problem: `'${prefix}' is both a file and a directory` };
    }
    const lower = name.toLowerCase();
    const clash = seenLower.get(lower);
    if (clash) return { problem: `'${name}' and '${clash}' differ only in case` };
    seenLower.set(lower, name);
    total += Buffer.byteLength(content, "utf8");
    out[name] = content;
  }
  if (total > MAX_POLICY_FILES_BYTES) {
    return { problem: `policy files total ${total} bytes, limit ${MAX_POLICY_FILES_BYTES}` };
  }
  return { files: out };
}

function prefixesOf(name: string): string[] {
  const segs = name.split("/");
  const out: string[] = [];
  for (let k = 1; k < segs.length; k++) out.push(segs.slice(0, k).join("/"));
  return out;
}

/** Parse, then validate; optionally verify against an expected hash (pack_verify_failed on mismatch). */
export function loadPack(bytes: Uint8Array, expectedHash?: string): PackResult {
  if (bytes.byteLength > MAX_FETCH_BYTES) {
    return reject("pack_too_large", `pack is ${bytes.byteLength} bytes, fetch limit ${MAX_FETCH_BYTES}`);
  }
  const parsed = parsePackBytes(bytes);
  if (!parsed.ok) {
    if (expectedHash !== undefined) {
      // Python hashes the raw text when it is not JSON; that can only match a plain-text S1 pack.
      const raw = sha256Hex(bytes);
      if (raw !== expectedHash.toLowerCase()) {
        return reject(
          "pack_verify_failed",
          `hash mismatch: expected ${expectedHash.slice(0, 12)}, got ${raw.slice(0, 12)}`,
        );
      }
    }
    return parsed;
  }
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
