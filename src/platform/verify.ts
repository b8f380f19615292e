/**
 * Signature verification as the platform does it (sr25519 via @polkadot/util-crypto). The daemon
 * never needs this; tests, the fake platform and operator tooling do. Kept apart from signing.ts
 * so the client does not load the WASM crypto.
 */
import { cryptoWaitReady, signatureVerify } from "@polkadot/util-crypto";

let ready: Promise<boolean> | undefined;

/** The WASM sr25519 backend must be initialised once before the first verify. */
export function verifierReady(): Promise<boolean> {
  ready ??= cryptoWaitReady();
  return ready;
}

/**
 * true when `signature` is a valid signature of `message`'s UTF-8 bytes by `ss58`.
 * Malformed input (bad hex, wrong length, bad address) is "not valid", never a throw.
 */
export function verifyMessage(message: string, signature: string, ss58: string): boolean {
  if (typeof signature !== "string" || !/^(0x)?[0-9a-fA-F]+$/.test(signature)) return false;
  const sig = signature.startsWith("0x") ? signature : `0x${signature}`;
  try {
    return signatureVerify(Buffer.from(message, "utf8"), sig, ss58).isValid;
  } catch {
    return false;
  }
}
