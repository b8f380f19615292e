/**
 * The checks of an evidence archive that need no Docker (pure): the manifest parses, its signature
 * holds, every stored file is the one the manifest names, the receipts' chain is whole and re-sums
 * to the posted costs, the payload adds up, and each grader's report gives the posted score. Each
 * failed check names the part that was changed.
 */
import { z } from "zod";
import { sha256Hex } from "../hash.js";
import { round4 } from "../precision.js";
import type { OpenedEvidence } from "./archive.js";
import {
  type BlobRef,
  type EvidenceEpisode,
  type Manifest,
  manifestSchema,
  type SignatureFile,
  signatureSchema,
} from "./manifest.js";
import { checkChain, type ReceiptRow, sumPico } from "./receipts-chain.js";
import { reportQuality } from "./report-score.js";
import { signatureProblem } from "./signature.js";

export type CheckStatus = "ok" | "failed" | "skipped";
export interface Check {
  name: "manifest" | "signature" | "files" | "receipts" | "costs" | "payload" | "reports";
  status: CheckStatus;
  detail: string;
}

const postedScenario = z
  .object({
    score: z.number(),
    judge: z.object({ cost_usd: z.number().nullable().optional() }).passthrough().optional(),
  })
  .passthrough();
const postedPayload = z
  .object({
    spec_number: z.number(),
    challenger: z
      .object({
        score: z.number(),
        qualified: z.boolean(),
        rejected: z.boolean().optional(),
        scenario_results: z.record(z.string(), postedScenario).optional(),
      })
      .passthrough(),
  })
  .passthrough();
export type PostedPayload = z.infer<typeof postedPayload>;

export interface Audit {
  /** sha256 of manifest.json: the evidence's id. */
  manifestId: string;
  manifest: Manifest | null;
  signature: SignatureFile | null;
  payload: PostedPayload | null;
  checks: Check[];
  /** Stored files whose bytes are the manifest's (a changed one is absent here). */
  good: Map<string, Buffer>;
}

const ok = (name: Check["name"], detail: string): Check => ({ name, status: "ok", detail });
const failed = (name: Check["name"], detail: string): Check => ({ name, status: "failed", detail });
const skipped = (name: Check["name"], detail: string): Check => ({ name, status: "skipped", detail });
const usd6 = (x: number) => Math.round(x * 1e6) / 1e6;

function parseJson(bytes: Buffer | undefined): unknown {
  if (bytes === undefined) return undefined;
  try {
    return JSON.parse(bytes.toString("utf8"));
  } catch {
    return undefined;
  }
}

/** Every file the manifest names, with what it is for people. */
function namedFiles(m: Manifest): Array<{ what: string; ref: BlobRef }> {
  return [
    { what: "receipts.jsonl", ref: m.receipts.file },
    ...m.episodes.flatMap((e) =>
      Object.entries(e.files).map(([n, ref]) => ({ what: `${n} of ${e.scenario}`, ref })),
    ),
  ];
}

function checkFiles(m: Manifest, blobs: ReadonlyMap<string, Buffer>, good: Map<string, Buffer>): Check {
  const problems: string[] = [];
  let stored = 0;
  let digestOnly = 0;
  for (const { what, ref } of namedFiles(m)) {
    if (!ref.stored) {
      digestOnly++;
      continue;
    }
    stored++;
    const data = blobs.get(ref.sha256);
    if (data === undefined) problems.push(`${what}: missing from the archive`);
    else if (data.length !== ref.bytes || sha256Hex(data) !== ref.sha256)
      problems.push(`${what}: its bytes are not the ones the manifest names (changed)`);
    else good.set(ref.sha256, data);
  }
  if (problems.length) return failed("files", problems.join("; "));
  return ok(
    "files",
    `${stored} files match their digests${digestOnly ? `, ${digestOnly} named by digest alone` : ""}`,
  );
}

/** The chain walked over receipts.jsonl as it is in the archive (a changed one too: to name the line). */
function checkReceipts(
  m: Manifest,
  text: string | undefined,
  verified: boolean,
): { check: Check; rows: ReceiptRow[] | null } {
  if (text === undefined)
    return { check: failed("receipts", "receipts.jsonl is not in the archive"), rows: null };
  const chain = checkChain(text);
  if (!chain.ok) {
    const where = chain.episode ? ` (episode ${chain.episode}, seq ${chain.seq})` : "";
    return {
      check: failed("receipts", `receipts.jsonl line ${chain.line}${where}: ${chain.problem}`),
      rows: null,
    };
  }
  if (!verified)
    return { check: failed("receipts", "receipts.jsonl is not the file the manifest names"), rows: null };
  if (chain.head !== m.receipts.head)
    return {
      check: failed(
        "receipts",
        "the chain's head is not the manifest's (receipts added, dropped or reordered)",
      ),
      rows: null,
    };
  for (const e of m.episodes) {
    const rows = chain.rows.filter((r) => r.episode_id === e.episode_id);
    if (rows.length !== e.receipts.count || sumPico(rows).toString() !== e.receipts.usd_pico)
      return {
        check: failed(
          "receipts",
          `${e.scenario}: ${rows.length} receipts summing ${sumPico(rows)} pico, the manifest says ${e.receipts.count} and ${e.receipts.usd_pico}`,
        ),
        rows: null,
      };
  }
  return {
    check: ok("receipts", `${chain.rows.length} receipts, chain head ${chain.head.slice(0, 16)}…`),
    rows: chain.rows,
  };
}

function checkCosts(m: Manifest, rows: ReceiptRow[] | null, p: PostedPayload | null): Check {
  if (rows === null) return skipped("costs", "the receipts did not check");
  const problems: string[] = [];
  const partial: string[] = [];
  for (const e of m.episodes) {
    const usd = Number(sumPico(rows.filter((r) => r.episode_id === e.episode_id))) / 1e12;
    if (e.receipts.dropped > 0) {
      partial.push(`${e.scenario} (${e.receipts.dropped} receipts past the meter's bound)`);
      continue;
    }
    const posted = p?.challenger.scenario_results?.[e.scenario]?.judge?.cost_usd;
    if (usd6(usd) !== usd6(e.cost_usd))
      problems.push(`${e.scenario}: receipts sum $${usd6(usd)}, the verdict says $${usd6(e.cost_usd)}`);
    else if (typeof posted === "number" && usd6(posted) !== usd6(usd))
      problems.push(`${e.scenario}: receipts sum $${usd6(usd)}, posted cost_usd $${posted}`);
  }
  if (problems.length) return failed("costs", problems.join("; "));
  const note = partial.length ? `; not summed: ${partial.join(", ")}` : "";
  return ok("costs", `Σ receipts = posted cost for ${m.episodes.length - partial.length} scenarios${note}`);
}

function checkPayload(m: Manifest, p: PostedPayload | null): Check {
  if (p === null)
    return failed("payload", "the payload is not a verdict payload (challenger.score, qualified)");
  const c = p.challenger;
  if (c.rejected) {
    if (c.score !== 0 || c.qualified || m.episodes.length > 0)
      return failed("payload", "a rejected verdict must be score 0, not qualified, with no episodes");
    return ok("payload", "a rejection: score 0");
  }
  const posted = c.scenario_results ?? {};
  const names = m.episodes.map((e) => e.scenario);
  const extra = Object.keys(posted).filter((n) => !names.includes(n));
  const missing = names.filter((n) => !(n in posted));
  if (extra.length || missing.length)
    return failed(
      "payload",
      `scenarios posted and in the evidence differ (${[...extra, ...missing].join(", ")})`,
    );
  const problems: string[] = [];
  for (const e of m.episodes) {
    const s = posted[e.scenario]!.score;
    if (s !== round4(e.quality))
      problems.push(`${e.scenario}: posted ${s}, the verdict's quality ${round4(e.quality)}`);
  }
  const sum = round4(m.episodes.reduce((a, e) => a + round4(e.quality), 0));
  if (c.score !== sum)
    problems.push(`challenger.score ${c.score} is not the sum of the scenarios' scores ${sum}`);
  const qualified = m.episodes.some((e) => e.quality > 0);
  if (c.qualified !== qualified) problems.push(`qualified ${c.qualified}, the scores say ${qualified}`);
  if (p.spec_number !== m.spec) problems.push(`spec_number ${p.spec_number}, the evidence's spec ${m.spec}`);
  if (problems.length) return failed("payload", problems.join("; "));
  return ok("payload", `score ${c.score} = Σ ${m.episodes.length} scenario scores, qualified ${c.qualified}`);
}

/** Each grader's report gives the recorded grade, and the posted score follows from it. */
function checkReports(m: Manifest, good: ReadonlyMap<string, Buffer>): Check {
  const problems: string[] = [];
  let checked = 0;
  for (const e of m.episodes) {
    const why = reportProblem(e, good);
    if (why === undefined) continue;
    checked++;
    if (why) problems.push(`${e.scenario}: ${why}`);
  }
  if (problems.length) return failed("reports", problems.join("; "));
  return checked
    ? ok("reports", `${checked} grader reports give the posted scores`)
    : skipped("reports", "no graded episode");
}

/** undefined: nothing to check; "": consistent; else what is wrong. */
function reportProblem(e: EvidenceEpisode, good: ReadonlyMap<string, Buffer>): string | undefined {
  const g = e.grading;
  if (e.score_rule === "zero")
    return e.quality === 0 ? (g?.graded ? "" : undefined) : `scored ${e.quality} under the zero rule`;
  if (!g?.grade) return "scored by a grade that is not in the evidence";
  const ctrf = e.files["ctrf.json"];
  const text = ctrf && good.has(ctrf.sha256) ? good.get(ctrf.sha256)!.toString("utf8") : undefined;
  const q = reportQuality(g, text);
  if (q === undefined) return undefined;
  if (round4(q) !== round4(g.grade.quality))
    return `the grader's report gives ${round4(q)}, the grade says ${round4(g.grade.quality)}`;
  if (round4(e.quality) !== round4(q))
    return `the report gives ${round4(q)}, the verdict's quality is ${round4(e.quality)}`;
  return "";
}

export function auditEvidence(ev: OpenedEvidence): Audit {
  const good = new Map<string, Buffer>();
  const parsed = manifestSchema.safeParse(parseJson(ev.manifest));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return {
      manifestId: sha256Hex(ev.manifest ?? Buffer.alloc(0)),
      manifest: null,
      signature: null,
      payload: null,
      good,
      checks: [
        failed(
          "manifest",
          `manifest.json is not an evidence manifest (${issue?.path.join(".")}: ${issue?.message})`,
        ),
      ],
    };
  }
  const m = parsed.data;
  const sig = signatureSchema.safeParse(parseJson(ev.signature));
  const sigCheck = !sig.success
    ? failed("signature", "signature.json is missing or malformed")
    : ((problem) =>
        problem
          ? failed("signature", problem)
          : ok("signature", `manifest.json signed by ${sig.data.signer} (${sig.data.kind})`))(
        signatureProblem(ev.manifest, sig.data, m.validator.hotkey),
      );
  const files = checkFiles(m, ev.blobs, good);
  const receiptsFile = ev.blobs.get(m.receipts.file.sha256);
  const receipts = checkReceipts(m, receiptsFile?.toString("utf8"), good.has(m.receipts.file.sha256));
  const payload = postedPayload.safeParse(m.payload);
  const p = payload.success ? payload.data : null;
  return {
    manifestId: sha256Hex(ev.manifest),
    manifest: m,
    signature: sig.success ? sig.data : null,
    payload: p,
    good,
    checks: [
      ok("manifest", `${m.schema}, ${m.episodes.length} episodes`),
      sigCheck,
      files,
      receipts.check,
      checkCosts(m, receipts.rows, p),
      checkPayload(m, p),
      checkReports(m, good),
    ],
  };
}
