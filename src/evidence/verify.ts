/**
 * `verify`: an evidence archive (or a log archive carrying one) checked and re-graded. The checks
 * that need no Docker come first (audit.ts); then every graded episode is re-graded (regrade.ts)
 * and compared with what was posted. A report per evidence: the checks, one row per scenario, and
 * `ok` — true only when every check that could run agrees.
 */
import { readFile } from "node:fs/promises";
import { InputError } from "../errors.js";
import { round4 } from "../precision.js";
import { type OpenedEvidence, openEvidence } from "./archive.js";
import { type Audit, auditEvidence, type Check } from "./audit.js";
import type { EvidenceEpisode, Manifest } from "./manifest.js";
import type { RegradeOutcome, Regrader } from "./regrade.js";
import { reportQuality } from "./report-score.js";
import { signatureCheckReady } from "./signature.js";

export type ScenarioResult = "reproduced" | "differs" | "not_reproducible" | "not_graded" | "not_checked";

export interface ScenarioRow {
  scenario: string;
  /** The score posted for it (the payload's scenario_results). */
  posted: number | null;
  /** What the grader's report in the evidence gives. */
  report: number | null;
  /** Each re-grade's quality, rounded as the wire rounds. */
  regraded: number[];
  result: ScenarioResult;
  why: string;
  /** sha256 of the graded deliverable (compare two validators' evidence by it). */
  deliverable: string | null;
}

export interface VerifyReport {
  source: string;
  /** sha256 of manifest.json. */
  id: string | null;
  signer: { ss58: string; kind: string } | null;
  packHash: string | null;
  spec: number | null;
  suite: string | null;
  evaluation: Manifest["evaluation"] | null;
  checks: Check[];
  scenarios: ScenarioRow[];
  ok: boolean;
}

export interface VerifyOptions {
  /** Absent: the checks alone, no re-grade. */
  regrader?: Regrader;
  /** Re-grades per episode (2 or more measure the grader's determinism). */
  repeat?: number;
  /** Require this signer. */
  expectSigner?: string;
  /** The re-grade's network when it differs from the recorded one (explains a difference). */
  network?: "none" | "bridge" | undefined;
  signal?: AbortSignal;
  onScenario?: (row: ScenarioRow) => void;
}

const OMITTED_WHY: Record<string, string> = {
  over_budget: "the deliverable was over the evidence's size budget: its digest alone",
  upload_cap: "the deliverable was left out to fit the log archive's 10 MB cap: its digest alone",
};

/** The deliverable's bytes for a re-grade, or why there are none. */
function deliverableOf(e: EvidenceEpisode, audit: Audit): { data: Buffer | undefined } | { why: string } {
  if (e.grading?.deliverable.kind !== "file") return { data: undefined };
  const ref = e.files.deliverable;
  if (!ref) return { why: "the deliverable is not in the evidence" };
  if (!ref.stored)
    return { why: OMITTED_WHY[ref.omitted ?? ""] ?? "the deliverable is named by digest alone" };
  const data = audit.good.get(ref.sha256);
  return data ? { data } : { why: "the deliverable in the archive is not the one graded (see files)" };
}

function compare(e: EvidenceEpisode, row: ScenarioRow, out: RegradeOutcome, o: VerifyOptions): ScenarioRow {
  if (out.kind === "not_reproducible") return { ...row, result: "not_reproducible", why: out.why };
  const regraded = out.qualities.map(round4);
  const expected = e.score_rule === "grade" ? row.posted : round4(e.grading?.grade?.quality ?? 0);
  const notes = [...out.notes];
  const spread = Math.max(...regraded) - Math.min(...regraded);
  if (spread > 0)
    notes.unshift(
      `the grader gave ${regraded.join(", ")} on the same deliverable (spread ${round4(spread)})`,
    );
  else if (regraded[0] !== expected)
    notes.unshift(
      `re-graded ${regraded[0]}, ${e.score_rule === "grade" ? "posted" : "the recorded grade"} ${expected}`,
    );
  const same = spread === 0 && regraded[0] === expected;
  const offline = e.grading?.network === "bridge" && (o.network ?? e.grading.network) === "none";
  if (!same && offline)
    return {
      ...row,
      regraded,
      result: "not_reproducible",
      why: ["the grader ran with network access (bridge); re-graded offline", ...notes].join("; "),
    };
  return { ...row, regraded, result: same ? "reproduced" : "differs", why: notes.join("; ") };
}

async function scenarioRow(
  m: Manifest,
  e: EvidenceEpisode,
  audit: Audit,
  o: VerifyOptions,
): Promise<ScenarioRow> {
  const ctrf = e.files["ctrf.json"];
  const ctrfText = ctrf && audit.good.get(ctrf.sha256)?.toString("utf8");
  const q = e.grading ? reportQuality(e.grading, ctrfText) : undefined;
  const row: ScenarioRow = {
    scenario: e.scenario,
    posted: audit.payload?.challenger.scenario_results?.[e.scenario]?.score ?? null,
    report: q === undefined ? null : round4(q),
    regraded: [],
    result: "not_checked",
    why: "",
    deliverable: e.grading?.deliverable.sha256 ?? null,
  };
  if (!e.grading?.graded)
    return { ...row, result: "not_graded", why: e.failure?.code ?? "the episode was not graded" };
  if (!o.regrader) return { ...row, why: "re-grade not asked for" };
  const d = deliverableOf(e, audit);
  if ("why" in d) return { ...row, result: "not_reproducible", why: d.why };
  return compare(e, row, await o.regrader.regrade(m, e, d.data, Math.max(1, o.repeat ?? 1), o.signal), o);
}

function signerCheck(audit: Audit, expect: string | undefined): Check | undefined {
  if (expect === undefined || audit.signature === null) return undefined;
  return audit.signature.signer === expect
    ? { name: "signature", status: "ok", detail: `signed by ${expect}, as expected` }
    : {
        name: "signature",
        status: "failed",
        detail: `signed by ${audit.signature.signer}, expected ${expect}`,
      };
}

export async function verifyOpened(
  source: string,
  ev: OpenedEvidence,
  o: VerifyOptions = {},
): Promise<VerifyReport> {
  await signatureCheckReady();
  const audit = auditEvidence(ev);
  const m = audit.manifest;
  const checks = [...audit.checks, ...[signerCheck(audit, o.expectSigner)].filter((c) => c !== undefined)];
  const scenarios: ScenarioRow[] = [];
  for (const e of m?.episodes ?? []) {
    o.signal?.throwIfAborted();
    const row = await scenarioRow(m!, e, audit, o);
    o.onScenario?.(row);
    scenarios.push(row);
  }
  return {
    source,
    id: m ? audit.manifestId : null,
    signer: audit.signature ? { ss58: audit.signature.signer, kind: audit.signature.kind } : null,
    packHash: m?.pack_hash ?? null,
    spec: m?.spec ?? null,
    suite: m?.suite ?? null,
    evaluation: m?.evaluation ?? null,
    checks,
    scenarios,
    ok: checks.every((c) => c.status !== "failed") && scenarios.every((s) => s.result !== "differs"),
  };
}

/** Every evidence in the file (one, or each a log archive carries), verified. */
export async function verifyFile(path: string, o: VerifyOptions = {}): Promise<VerifyReport[]> {
  let data: Buffer;
  try {
    data = await readFile(path);
  } catch (err) {
    throw new InputError(
      "evidence_unreadable",
      `${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  const found = await openEvidence(data, path);
  const out: VerifyReport[] = [];
  for (const f of found) out.push(await verifyOpened(f.name, f.evidence, o));
  return out;
}
