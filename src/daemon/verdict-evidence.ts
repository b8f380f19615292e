/**
 * Every verdict the daemon queues gets its evidence (src/evidence): signed by the hotkey, kept under
 * DATA_DIR/evidence, listed on the status page, and carried in the evaluation's log archive within
 * the upload's cap. Loaded lazily, as the pipeline is: a weight-only daemon never loads it.
 */
import type { Hotkey } from "../chain/index.js";
import type { RecordedEvidence } from "../evidence/index.js";
import type { Logger } from "../log.js";
import type { Db } from "../store/index.js";
import type { FinishedEvaluation } from "./eval-loop.js";
import type { ArchiveEntry } from "./log-archive.js";

/** What the evidence may take of the log archive's 10 MB; the rest is the logs' and artifacts'. */
export const EVIDENCE_UPLOAD_BYTES = 8 * 1024 * 1024;

export interface VerdictEvidenceDeps {
  db: Db;
  hotkey: Pick<Hotkey, "ss58" | "sign">;
  dataDir: string;
  log: Logger;
}

/** The verdict's evidence, recorded; undefined (and logged) when it could not be. */
export async function recordVerdictEvidence(
  d: VerdictEvidenceDeps,
  f: FinishedEvaluation,
): Promise<RecordedEvidence | undefined> {
  const { recordEvidence, hotkeySigner } = await import("../evidence/index.js");
  try {
    return await recordEvidence({
      db: d.db,
      evaluationId: f.evaluationId,
      payload: f.verdict,
      context: { packHash: f.plan.packHash, epochId: f.plan.epochId, source: "epoch" },
      signer: hotkeySigner(d.hotkey),
      dir: d.dataDir,
      log: d.log,
    });
  } catch (err) {
    d.log.error(
      { epoch: f.plan.epochId, evaluation: f.evaluationId, err: (err as Error).message },
      "evidence.failed",
    );
    return undefined;
  }
}

/** The evidence as the log archive carries it (`evidence/<id>.tar.gz`, never cut), within its share of the cap. */
export async function evidenceEntry(rec: RecordedEvidence, log: Logger): Promise<ArchiveEntry | undefined> {
  const { evidenceForUpload } = await import("../evidence/index.js");
  const e = await evidenceForUpload(rec, EVIDENCE_UPLOAD_BYTES);
  if (!e.fits) {
    log.warn({ evidence: rec.id.slice(0, 16), bytes: e.data.length }, "evidence.upload_too_large");
    return undefined;
  }
  if (e.omitted > 0)
    log.info({ evidence: rec.id.slice(0, 16), omitted: e.omitted }, "evidence.upload_trimmed");
  return { name: e.name, data: e.data };
}
