/**
 * The static scan of a pack's policy files that upstream reports in every judge entry as `policy_scan`
 * (trajectoryrl/policy/__init__.py `scan_policy_files`; a shadow signal: reported, never scored). Pure,
 * and the same numbers as upstream's on the same input, which takes Python's semantics spelled out:
 * - the files are joined with "\n" in Python's key order (code points, not UTF-16 units);
 * - a scenario hit is a case-insensitive substring (`str.lower()` on both sides);
 * - a long literal is a quote, 40 or more characters on the same line that are not that quote, and the
 *   same quote again (`.` stops at "\n" only), counted without overlap;
 * - a b64 blob is a run of 200+ base64 characters with up to two "=" after it that Python's
 *   `b64decode` (padded to a multiple of 4, non-strict) accepts: it refuses exactly the runs whose
 *   count of base64 characters is 1 more than a multiple of 4;
 * - bytes is the UTF-8 length of the joined text. Python cannot encode a lone surrogate: upstream's
 *   scan raises there, and so does this one (PolicyScanUnencodable).
 */
import { InputError } from "../errors.js";

export interface PolicyScan {
  /** How many of the scenario names appear verbatim (case-insensitive) in the policy files. */
  scenario_hits: number;
  /** Which ones, in the order given, at most 10. */
  scenario_names: string[];
  /** String literals of 40+ characters. */
  long_literals: number;
  /** Base64-looking runs of 200+ characters. */
  b64_blobs: number;
  /** UTF-8 bytes of the files joined with "\n". */
  bytes: number;
}

/** Thrown where upstream's scan raises: a policy file holding a lone surrogate (not encodable as UTF-8). */
export class PolicyScanUnencodable extends InputError {
  constructor(file: string) {
    super("policy_scan_unencodable", `policy file ${JSON.stringify(file)} holds a lone surrogate`, {
      detail: { file },
    });
    this.name = "PolicyScanUnencodable";
  }
}

const MAX_NAMES = 10;
const B64_BLOB = /([A-Za-z0-9+/]{200,})={0,2}/g;
const LONG_LITERAL = /(['"])(?:(?!\1)[^\n]){40,}\1/gu;
const LONE_SURROGATE = /\p{Surrogate}/u;

/** Python's `str` ordering: by code point (JavaScript's default sort compares UTF-16 units). */
export function compareCodePoints(a: string, b: string): number {
  const x = a[Symbol.iterator]();
  const y = b[Symbol.iterator]();
  for (;;) {
    const p = x.next();
    const q = y.next();
    if (p.done || q.done) return p.done === q.done ? 0 : p.done ? -1 : 1;
    const d = p.value.codePointAt(0)! - q.value.codePointAt(0)!;
    if (d !== 0) return d;
  }
}

/** upstream's `scan_policy_files(files, scenario_names)`. */
export function scanPolicyFiles(
  files: Readonly<Record<string, string>>,
  scenarioNames: readonly string[],
): PolicyScan {
  const names = Object.keys(files).sort(compareCodePoints);
  for (const n of names) if (LONE_SURROGATE.test(files[n]!)) throw new PolicyScanUnencodable(n);
  const text = names.map((n) => files[n]!).join("\n");
  const low = text.toLowerCase();
  const hits = scenarioNames.filter((n) => low.includes(n.toLowerCase()));
  let blobs = 0;
  for (const m of text.matchAll(B64_BLOB)) if (m[1]!.length % 4 !== 1) blobs++;
  return {
    scenario_hits: hits.length,
    scenario_names: hits.slice(0, MAX_NAMES),
    long_literals: [...text.matchAll(LONG_LITERAL)].length,
    b64_blobs: blobs,
    bytes: Buffer.byteLength(text, "utf8"),
  };
}

/**
 * What upstream puts in the judge entry's `policy_scan`: the scan of the policy files (everything in
 * the pack but SKILL.md, non-string values skipped) over the evaluation's scenario names, or null for
 * a pack with no policy file.
 */
export function judgePolicyScan(
  policyFiles: Readonly<Record<string, string>>,
  scenarioNames: readonly string[],
): PolicyScan | null {
  if (Object.keys(policyFiles).length === 0) return null;
  return scanPolicyFiles(policyFiles, scenarioNames);
}
