/**
 * From what an evaluation left (collect.ts) to a signed archive: the manifest (every file by
 * sha256, stored or named by digest alone with the reason), the receipts' hash chain, the
 * signature. `fitEvidence` leaves files out, biggest and least needed first (transcripts, session
 * exports, deliverables; never the manifest, the receipts or a grader's report), until the archive
 * fits a byte budget (the platform's 10 MB log archive). Pure but for the clock and gzip.
 */
import { sha256Hex } from "../hash.js";
import { round4 } from "../precision.js";
import { VERSION } from "../version.js";
import { packEvidence, type SealedEvidence } from "./archive.js";
import {
  type BlobRef,
  EPISODE_FILES,
  type EpisodeFileName,
  EVIDENCE_SCHEMA,
  type EvidenceEpisode,
  type GradingRecordJson,
  type Manifest,
  manifestBytes,
  OMISSION,
} from "./manifest.js";
import { chainReceipts, type ReceiptRow, sumPico } from "./receipts-chain.js";
import { type EvidenceSigner, signManifest } from "./signature.js";

const MiB = 1024 * 1024;

/** Above these a file is named by its digest alone ("above a size budget the digest alone"). */
export const DEFAULT_BUDGETS = { deliverable: 1 * MiB, file: 8 * MiB } as const;

export interface CollectedEpisode {
  scenario: string;
  episodeId: string;
  attempts: number;
  status: "scored" | "failed";
  failure: { class: string; code: string } | null;
  quality: number;
  costUsd: number;
  grading: GradingRecordJson | null;
  files: Partial<Record<EpisodeFileName, Buffer>>;
  receipts: ReceiptRow[];
  /** Receipts past the meter's per-episode bound, from meter.json's summary. */
  dropped: number;
}

export interface CollectedEvidence {
  evaluation: Manifest["evaluation"];
  packHash: string;
  spec: number;
  suite: string | null;
  bench: Record<string, unknown> | null;
  priceTableHash: string | null;
  payload: Record<string, unknown>;
  episodes: CollectedEpisode[];
}

export interface SealOptions {
  signer: EvidenceSigner;
  nowMs: number;
  budgets?: { deliverable: number; file: number };
  /** Files named by digest alone to fit an upload: `<scenario>/<file>`. */
  leaveOut?: ReadonlySet<string>;
}

export interface Sealed extends SealedEvidence {
  manifest: Manifest;
  /** `<scenario>/<file>` named by digest alone, and why. */
  omitted: Array<{ file: string; reason: string }>;
}

/** The verdict's quality is the grader's (rounded as the wire rounds), or a 0 something else decided. */
export function scoreRuleOf(e: Pick<CollectedEpisode, "quality" | "grading">): "grade" | "zero" {
  const g = e.grading?.grade;
  return e.grading?.graded && g && round4(g.quality) === round4(e.quality) ? "grade" : "zero";
}

function blobOf(
  key: string,
  name: EpisodeFileName,
  data: Buffer,
  o: SealOptions,
  blobs: Map<string, Buffer>,
): BlobRef {
  const sha256 = sha256Hex(data);
  const budgets = o.budgets ?? DEFAULT_BUDGETS;
  const budget = name === "deliverable" ? budgets.deliverable : budgets.file;
  const omitted = o.leaveOut?.has(key)
    ? OMISSION.uploadCap
    : data.length > budget
      ? OMISSION.overBudget
      : null;
  if (omitted === null) blobs.set(sha256, data);
  return { sha256, bytes: data.length, stored: omitted === null, omitted };
}

function episodeEntry(e: CollectedEpisode, o: SealOptions, blobs: Map<string, Buffer>): EvidenceEpisode {
  const files: EvidenceEpisode["files"] = {};
  for (const name of EPISODE_FILES) {
    const data = e.files[name];
    if (data !== undefined) files[name] = blobOf(`${e.scenario}/${name}`, name, data, o, blobs);
  }
  return {
    scenario: e.scenario,
    episode_id: e.episodeId,
    attempts: e.attempts,
    status: e.status,
    failure: e.failure,
    quality: e.quality,
    cost_usd: e.costUsd,
    score_rule: scoreRuleOf(e),
    grading: e.grading,
    files,
    receipts: { count: e.receipts.length, usd_pico: sumPico(e.receipts).toString(), dropped: e.dropped },
  };
}

export function buildManifest(
  c: CollectedEvidence,
  o: SealOptions,
): { manifest: Manifest; blobs: Map<string, Buffer> } {
  const blobs = new Map<string, Buffer>();
  const episodes = c.episodes.map((e) => episodeEntry(e, o, blobs));
  const chain = chainReceipts(c.episodes.flatMap((e) => e.receipts));
  const receiptsFile = Buffer.from(chain.text, "utf8");
  const receiptsSha = sha256Hex(receiptsFile);
  blobs.set(receiptsSha, receiptsFile);
  const manifest: Manifest = {
    schema: EVIDENCE_SCHEMA,
    created_at: new Date(o.nowMs).toISOString(),
    validator: { version: VERSION, hotkey: o.signer.ss58, signer: o.signer.kind },
    evaluation: c.evaluation,
    pack_hash: c.packHash,
    spec: c.spec,
    suite: c.suite,
    bench: c.bench,
    price_table_hash: c.priceTableHash,
    payload: c.payload,
    receipts: {
      file: { sha256: receiptsSha, bytes: receiptsFile.length, stored: true, omitted: null },
      count: c.episodes.reduce((n, e) => n + e.receipts.length, 0),
      head: chain.head,
    },
    episodes,
  };
  return { manifest, blobs };
}

export async function sealEvidence(c: CollectedEvidence, o: SealOptions): Promise<Sealed> {
  const { manifest, blobs } = buildManifest(c, o);
  const bytes = manifestBytes(manifest);
  const sealed = await packEvidence(bytes, signManifest(bytes, o.signer, o.nowMs), blobs);
  const omitted = manifest.episodes.flatMap((e) =>
    Object.entries(e.files)
      .filter(([, b]) => !b.stored)
      .map(([name, b]) => ({ file: `${e.scenario}/${name}`, reason: b.omitted ?? "" })),
  );
  return { ...sealed, manifest, omitted };
}

/** Left out first: what a re-grade does not need, biggest first; the deliverables last. */
const LEAVE_OUT_ORDER: Record<EpisodeFileName, number> = {
  "transcript.txt": 0,
  "turns.jsonl": 1,
  deliverable: 2,
  "ctrf.json": 3,
};

/**
 * The evidence within `maxBytes`: files named by digest alone (`upload_cap`) one at a time until it
 * fits; `fits` false when even the manifest, the receipts and the reports alone do not.
 */
export async function fitEvidence(
  c: CollectedEvidence,
  o: SealOptions,
  maxBytes: number,
): Promise<Sealed & { fits: boolean }> {
  let sealed = await sealEvidence(c, o);
  const candidates = c.episodes
    .flatMap((e) =>
      EPISODE_FILES.filter((n) => n !== "ctrf.json" && e.files[n] !== undefined).map((n) => ({
        key: `${e.scenario}/${n}`,
        rank: LEAVE_OUT_ORDER[n],
        bytes: e.files[n]!.length,
      })),
    )
    .sort((a, b) => a.rank - b.rank || b.bytes - a.bytes);
  const leaveOut = new Set(o.leaveOut ?? []);
  for (const cand of candidates) {
    if (sealed.gz.length <= maxBytes) break;
    leaveOut.add(cand.key);
    sealed = await sealEvidence(c, { ...o, leaveOut });
  }
  return { ...sealed, fits: sealed.gz.length <= maxBytes };
}
