/**
 * The manifest's signature, in the platform's signed-message form (src/platform signing.ts):
 * `trajrl-evidence:<ss58>:<unix seconds>:<sha256 of manifest.json>`, sr25519 over its UTF-8 bytes,
 * "0x" + hex. Its own prefix, so it can never pass for a platform request.
 */
import { sha256Hex } from "../hash.js";
import { verifierReady, verifyMessage } from "../platform/index.js";
import type { SignatureFile } from "./manifest.js";

export const EVIDENCE_PREFIX = "trajrl-evidence";

/** Who signs evidence: the validator's hotkey, or a local key of a machine that ran `eval` without a wallet. */
export interface EvidenceSigner {
  readonly ss58: string;
  readonly kind: "hotkey" | "local";
  /** sr25519 over the UTF-8 bytes, "0x" + hex. */
  sign(message: string): string;
}

export function evidenceMessage(ss58: string, timestamp: number, manifestSha256: string): string {
  return [EVIDENCE_PREFIX, ss58, String(timestamp), manifestSha256].join(":");
}

export function signManifest(bytes: Buffer, signer: EvidenceSigner, nowMs: number): SignatureFile {
  const timestamp = Math.floor(nowMs / 1000);
  const message = evidenceMessage(signer.ss58, timestamp, sha256Hex(bytes));
  return { signer: signer.ss58, kind: signer.kind, timestamp, message, signature: signer.sign(message) };
}

/** The sr25519 backend is ready (once per process) before the first check. */
export const signatureCheckReady = verifierReady;

/** What is wrong with the signature over these manifest bytes, or null when it holds. */
export function signatureProblem(bytes: Buffer, sig: SignatureFile, claimedSigner: string): string | null {
  const expected = evidenceMessage(sig.signer, sig.timestamp, sha256Hex(bytes));
  if (sig.message !== expected)
    return "the signed message does not name this manifest.json (it was changed after signing)";
  if (sig.signer !== claimedSigner)
    return `signed by ${sig.signer}, but the manifest names ${claimedSigner} as its signer`;
  if (!verifyMessage(sig.message, sig.signature, sig.signer))
    return `the signature does not verify under ${sig.signer}`;
  return null;
}
