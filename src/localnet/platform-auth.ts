/**
 * How the fake platform authenticates a signed request, as the real server does: the fields present,
 * the hotkey a registered validator (403), the signature over the message the endpoint documents
 * (401), the timestamp within the allowed drift (401), in that order.
 */
import { verifyMessage } from "../platform/index.js";
import type { Received } from "./platform-routes.js";

export interface AuthPolicy {
  /** Hotkeys registered as validators; undefined accepts any hotkey whose signature verifies. */
  validators: ReadonlySet<string> | undefined;
  /** The server's wall clock (ms). */
  now(): number;
  driftSeconds: number;
}

/** Signature + registration + drift, in the documented order (403 before 401); null: accepted. */
export function authenticate(
  policy: AuthPolicy,
  hotkey: unknown,
  timestamp: unknown,
  signature: unknown,
  message: (hk: string, ts: number) => string,
  rec: Received,
): { status: number; error: string } | null {
  if (typeof hotkey !== "string" || hotkey === "") return { status: 400, error: "hotkey is required" };
  const ts = typeof timestamp === "string" && /^\d+$/.test(timestamp) ? Number(timestamp) : timestamp;
  if (typeof ts !== "number" || !Number.isInteger(ts) || ts <= 0) {
    return { status: 400, error: "timestamp is required (unix seconds)" };
  }
  if (typeof signature !== "string" || signature === "")
    return { status: 400, error: "signature is required" };
  const expected = message(hotkey, ts);
  const valid = verifyMessage(expected, signature, hotkey);
  rec.signature = { message: expected, valid };
  if (policy.validators && !policy.validators.has(hotkey)) {
    return { status: 403, error: "Hotkey is not a registered validator on-chain" };
  }
  if (!valid) return { status: 401, error: "Invalid signature" };
  if (Math.abs(Math.floor(policy.now() / 1000) - ts) > policy.driftSeconds) {
    return { status: 401, error: "Timestamp drift exceeds 5 minutes" };
  }
  return null;
}
