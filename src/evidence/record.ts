/**
 * One verdict's evidence, kept: collected (collect.ts), sealed (seal.ts), written to
 * DATA_DIR/evidence/<id>.tar.gz (atomically) and listed by evaluation (EvidenceIndex, for the status
 * page). `evidenceForUpload` seals the same collection again within the log archive's budget.
 */
import { randomBytes } from "node:crypto";
import { mkdir, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../log.js";
import { type Db, EvidenceIndex } from "../store/index.js";
import { collectEvidence, type EvidenceContext } from "./collect.js";
import { type CollectedEvidence, fitEvidence, sealEvidence } from "./seal.js";
import type { EvidenceSigner } from "./signature.js";
import { EVIDENCE_DIR } from "./signer.js";

export interface EvidenceRequest {
  db: Db;
  /** The evaluation that made the verdict (null: a rejection made without one, e.g. a pack not fetched). */
  evaluationId: string | null;
  /** The verdict payload as posted, or as `eval` prints it. */
  payload: Record<string, unknown>;
  context: EvidenceContext;
  signer: EvidenceSigner;
  /** The archive goes to <dir>/evidence/<id>.tar.gz (DATA_DIR, or `eval --out`). */
  dir: string;
  log: Logger;
  nowMs?: number;
}

export interface RecordedEvidence {
  id: string;
  path: string;
  bytes: number;
  omitted: Array<{ file: string; reason: string }>;
  collected: CollectedEvidence;
  signer: EvidenceSigner;
  nowMs: number;
}

export async function recordEvidence(req: EvidenceRequest): Promise<RecordedEvidence> {
  const nowMs = req.nowMs ?? Date.now();
  const collected = await collectEvidence(req);
  const sealed = await sealEvidence(collected, { signer: req.signer, nowMs });
  const dir = join(req.dir, EVIDENCE_DIR);
  await mkdir(dir, { recursive: true });
  const path = join(dir, `${sealed.id}.tar.gz`);
  const tmp = `${path}.${randomBytes(4).toString("hex")}.tmp`;
  await writeFile(tmp, sealed.gz);
  await rename(tmp, path);
  if (req.evaluationId)
    new EvidenceIndex(req.db).put(req.evaluationId, {
      id: sealed.id,
      path,
      bytes: sealed.gz.length,
      signer: req.signer.ss58,
      createdAt: new Date(nowMs).toISOString(),
    });
  req.log.info(
    {
      evaluation: req.evaluationId,
      evidence: sealed.id.slice(0, 16),
      bytes: sealed.gz.length,
      episodes: collected.episodes.length,
      omitted: sealed.omitted.length,
    },
    "evidence.recorded",
  );
  return {
    id: sealed.id,
    path,
    bytes: sealed.gz.length,
    omitted: sealed.omitted,
    collected,
    signer: req.signer,
    nowMs,
  };
}

/** The same evidence within `maxBytes`, as the log archive carries it (`evidence/<id>.tar.gz`). */
export async function evidenceForUpload(
  rec: RecordedEvidence,
  maxBytes: number,
): Promise<{ name: string; data: Buffer; fits: boolean; omitted: number }> {
  const fitted = await fitEvidence(rec.collected, { signer: rec.signer, nowMs: rec.nowMs }, maxBytes);
  return {
    name: `${EVIDENCE_DIR}/${fitted.id}.tar.gz`,
    data: fitted.gz,
    fits: fitted.fits,
    omitted: fitted.omitted.length,
  };
}
