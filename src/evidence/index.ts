/**
 * Verdicts anyone can check (issue 34): every verdict's evidence — the graded deliverables, the
 * tests' and images' identities, the graders' reports, the meter's receipts hash-chained, the
 * payload as posted — signed, content-addressed, kept and uploaded; and `verify`, which checks it
 * and re-grades it offline at $0. README.md is the map.
 */
export { LOG_ARCHIVE_EVIDENCE, type OpenedEvidence, openEvidence, packEvidence, readTar } from "./archive.js";
export { type Audit, auditEvidence, type Check } from "./audit.js";
export { collectEvidence, type EvidenceContext } from "./collect.js";
export {
  type BlobRef,
  EVIDENCE_SCHEMA,
  type EvidenceEpisode,
  type GradingRecordJson,
  type Manifest,
  manifestBytes,
  manifestSchema,
  type SignatureFile,
} from "./manifest.js";
export { chainReceipts, checkChain, type ReceiptRow, receiptRow } from "./receipts-chain.js";
export { type EvidenceRequest, evidenceForUpload, type RecordedEvidence, recordEvidence } from "./record.js";
export { DockerRegrader, type RegradeOutcome, type Regrader } from "./regrade.js";
export { renderComparison, renderReport, summaryOf } from "./render.js";
export { reportQuality } from "./report-score.js";
export {
  type CollectedEpisode,
  type CollectedEvidence,
  DEFAULT_BUDGETS,
  fitEvidence,
  scoreRuleOf,
  sealEvidence,
} from "./seal.js";
export { EVIDENCE_PREFIX, type EvidenceSigner, evidenceMessage, signManifest } from "./signature.js";
export { EVIDENCE_DIR, evalSigner, hotkeySigner, localSigner } from "./signer.js";
export {
  type ScenarioRow,
  type VerifyOptions,
  type VerifyReport,
  verifyFile,
  verifyOpened,
} from "./verify.js";
