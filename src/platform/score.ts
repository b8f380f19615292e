/**
 * The score submission's wire rules (pure): the body as the platform expects it, and what its HTTP
 * answer means (delivered, duplicate, finalized, worth sending again, or rejected for good).
 */
import { type ErrorCode, InputError } from "../errors.js";
import type { ScoreReceipt, ScoreVerdict } from "./schemas.js";
import { errorText } from "./schemas.js";
import { isRetryableStatus } from "./transport.js";

/** How a score POST ended. Only `retryable` is worth sending again. */
export type ScoreOutcome =
  | { kind: "delivered"; status: number; receipt: ScoreReceipt | null }
  /** 409: this validator already scored this epoch; counts as delivered. */
  | { kind: "duplicate"; status: 409; message: string }
  /** 409: the epoch is closed; nothing more to do for it. */
  | { kind: "finalized"; status: 409; message: string }
  /** Timeout, network failure, 408/425/429, 5xx, or a 2xx other than 200. */
  | { kind: "retryable"; status: number | null; code: ErrorCode; message: string }
  /** Any other 4xx (bad body, bad signature, not a validator, unknown epoch): sending again will not help. */
  | { kind: "rejected"; status: number; code: ErrorCode; message: string };

/** 409 texts: the documented ones are "epoch is finalized" and "duplicate". */
export function classifyConflict(text: string): "finalized" | "duplicate" | "conflict" {
  if (/finali[sz]ed|closed|not in[ _-]?progress|no longer/i.test(text)) return "finalized";
  if (/duplicate|already/i.test(text)) return "duplicate";
  return "conflict";
}

/** The score body on the wire: signing fields first, then the verdict, undefined fields omitted. */
export function buildScoreBody(
  verdict: ScoreVerdict,
  signed: { hotkey: string; timestamp: number; signature: string },
  version: string,
): Record<string, unknown> {
  const challenger = dropUndefined({ ...verdict.challenger });
  return dropUndefined({
    validator_hotkey: signed.hotkey,
    timestamp: signed.timestamp,
    signature: signed.signature,
    version,
    ...verdict,
    challenger,
  });
}

/**
 * Map a score POST's HTTP response to its outcome (receipt parsed by the caller). Delivered means
 * 200, as upstream (`submit_challenge_score` returns True on 200 only; on anything else its daemon
 * scores the epoch again and posts again): another 2xx is sent again.
 */
export function scoreOutcomeOf(res: { status: number; body: Buffer }): ScoreOutcome {
  const { status } = res;
  if (status === 200) return { kind: "delivered", status, receipt: null };
  if (status > 200 && status < 300)
    return {
      kind: "retryable",
      status,
      code: "platform_unexpected_status",
      message: `HTTP ${status} is not the 200 that records a score`,
    };
  const message = errorText(res.body.toString("utf8"));
  if (status === 409) {
    const c = classifyConflict(message);
    if (c === "finalized") return { kind: "finalized", status: 409, message };
    if (c === "duplicate") return { kind: "duplicate", status: 409, message };
    return { kind: "rejected", status, code: "platform_conflict", message };
  }
  if (isRetryableStatus(status)) return { kind: "retryable", status, code: "platform_http_error", message };
  // Our clock is off by more than the server's ±5 min: each attempt signs a fresh timestamp, so the
  // verdict goes out once the host's clock is fixed (NTP) instead of being dropped.
  if (status === 401 && /timestamp|drift|clock/i.test(message))
    return { kind: "retryable", status, code: "platform_clock_skew", message };
  const code =
    status === 401 || status === 403
      ? "platform_unauthorized"
      : status === 404
        ? "platform_epoch_not_found"
        : "platform_rejected";
  return { kind: "rejected", status, code, message };
}

export function assertEpochId(id: number): void {
  if (!Number.isSafeInteger(id) || id <= 0) {
    throw new InputError("invalid_epoch_id", `challenge_epoch_id must be a positive integer (${id})`);
  }
}

export function dropUndefined<T extends Record<string, unknown>>(o: T): T {
  for (const k of Object.keys(o)) if (o[k] === undefined) delete o[k];
  return o;
}
