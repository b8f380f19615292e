/**
 * Signed platform messages: `prefix:ss58_hotkey:unix_seconds[:extra…]`, sr25519 by the hotkey over
 * the message's UTF-8 bytes, sent as "0x" + hex. Pure: builders and the Signer seam only; the
 * verifier (WASM crypto) lives in verify.ts so the client never loads it.
 * Facts: trajectoryrl/utils/trajrl_api.py `_sign`, docs/API.md "v6 signature prefixes".
 */
import { InputError } from "../errors.js";

/** One prefix per endpoint, so a signature for one endpoint never validates on another. */
export const PREFIX = {
  epochCurrent: "trajectoryrl-epoch-current",
  challengeScore: "trajectoryrl-challenge-score",
  scenarioProgress: "trajectoryrl-scenario-progress",
  heartbeat: "trajectoryrl-heartbeat",
  logs: "trajectoryrl-logs",
} as const;

export type SignPrefix = (typeof PREFIX)[keyof typeof PREFIX];

/**
 * Who signs: the validator's hotkey. `sign` returns "0x"-prefixed hex of an sr25519 signature
 * over the UTF-8 bytes of `message`. Synchronous because sr25519 signing is a local computation.
 */
export interface Signer {
  readonly ss58: string;
  sign(message: string): string;
}

/** The fields every signed request carries (in the body or the query, never in headers). */
export interface SignedFields {
  hotkey: string;
  /** Unix seconds, as in the message. */
  timestamp: number;
  message: string;
  signature: string;
}

/** Unix seconds of a wall-clock instant in ms (the server checks ±5 min against its own clock). */
export function unixSeconds(ms: number): number {
  return Math.floor(ms / 1000);
}

/** `prefix:hotkey:timestamp[:extra…]`, exactly as the Python validator joins it. */
export function signedMessage(
  prefix: SignPrefix,
  hotkey: string,
  timestamp: number,
  ...extras: ReadonlyArray<string | number>
): string {
  if (hotkey.length === 0 || hotkey.includes(":")) {
    throw new InputError("invalid_hotkey", `hotkey must be a non-empty ss58 address without ':' (${hotkey})`);
  }
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) {
    throw new InputError(
      "invalid_timestamp",
      `timestamp must be non-negative integer seconds (${timestamp})`,
    );
  }
  return [prefix, hotkey, String(timestamp), ...extras.map(String)].join(":");
}

export const epochCurrentMessage = (hotkey: string, ts: number) =>
  signedMessage(PREFIX.epochCurrent, hotkey, ts);
export const challengeScoreMessage = (hotkey: string, ts: number, challengeEpochId: number) =>
  signedMessage(PREFIX.challengeScore, hotkey, ts, challengeEpochId);
export const scenarioProgressMessage = (
  hotkey: string,
  ts: number,
  challengeEpochId: number,
  scenarioName: string,
) => signedMessage(PREFIX.scenarioProgress, hotkey, ts, challengeEpochId, scenarioName);
export const heartbeatMessage = (hotkey: string, ts: number) => signedMessage(PREFIX.heartbeat, hotkey, ts);
export const logsMessage = (hotkey: string, ts: number) => signedMessage(PREFIX.logs, hotkey, ts);

/** Build and sign one message with the signer's own hotkey. */
export function signFields(
  signer: Signer,
  prefix: SignPrefix,
  nowMs: number,
  ...extras: ReadonlyArray<string | number>
): SignedFields {
  const timestamp = unixSeconds(nowMs);
  const message = signedMessage(prefix, signer.ss58, timestamp, ...extras);
  const signature = signer.sign(message);
  if (!/^0x[0-9a-f]{128,132}$/i.test(signature)) {
    // A signer that returns anything else would be rejected by the server as an opaque 401.
    throw new InputError(
      "invalid_signature_format",
      "signer must return 0x-prefixed hex of a 64-byte signature",
    );
  }
  return { hotkey: signer.ss58, timestamp, message, signature };
}

/** The shape of a @polkadot/keyring pair (structural, so this module needs no crypto import). */
export interface SigningPair {
  readonly address: string;
  sign(message: Uint8Array): Uint8Array;
}

/** Adapt a keyring pair (sr25519, ss58 format 42) into a Signer. */
export function signerFromPair(pair: SigningPair): Signer {
  return {
    ss58: pair.address,
    sign: (message: string) => `0x${Buffer.from(pair.sign(Buffer.from(message, "utf8"))).toString("hex")}`,
  };
}
