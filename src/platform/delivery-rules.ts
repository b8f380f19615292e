/**
 * Verdict delivery's pure rules: when to send a score queued in the outbox again, and what a POST's
 * outcome does to its entry (a DeliveryTransition); with the outbox's entry and the storage port the
 * delivery shell (delivery.ts) needs of it (src/store's outbox.ts implements it). Unlike the Python daemon (which drops a verdict whose POST failed), a verdict
 * is kept in SQLite and re-sent with backoff until it is delivered, the epoch closes (409 "epoch is
 * finalized", or a newer epoch is observed), the server refuses it for good, or it expires.
 *
 * Times here are wall-clock unix ms: entries outlive the process, and a monotonic clock does not
 * survive a restart. Deadlines inside one request stay monotonic (see http.ts).
 */
import type { ScoreOutcome } from "./client.js";
import type { ScoreVerdict } from "./schemas.js";

export type OutboxState = "pending" | "delivered" | "abandoned";
export type OutboxOutcome = "delivered" | "duplicate" | "finalized" | "rejected" | "expired" | "epoch_closed";

export interface OutboxEntry {
  id: number;
  epochId: number;
  validatorHotkey: string;
  verdict: ScoreVerdict;
  state: OutboxState;
  /** POSTs started so far (counted before sending, so a crash mid-send still counts). */
  attempts: number;
  nextAttemptAt: number;
  createdAt: number;
  lastAttemptAt: number | null;
  lastStatus: number | null;
  lastError: string | null;
  outcome: OutboxOutcome | null;
  reason: string | null;
  deliveredAt: number | null;
  abandonedAt: number | null;
}

/**
 * Where queued verdicts live: what the delivery shell needs of storage (src/store's
 * VerdictOutboxRepo implements it over SQLite). Defined here so platform/ never imports store/.
 */
export interface OutboxPort {
  /** Pending entries of this hotkey whose next attempt is due, oldest first. */
  due(validatorHotkey: string, nowMs: number, limit?: number): OutboxEntry[];
  /** Count an attempt before sending it (a crash mid-POST still shows). */
  markAttempt(id: number, nowMs: number): void;
  /** Apply an attempt's transition to a pending entry; false when it was no longer pending. */
  apply(id: number, t: DeliveryTransition, nowMs: number, status?: number | null): boolean;
}

export interface BackoffPolicy {
  /** Delay after the first failed attempt. */
  initialMs: number;
  factor: number;
  maxMs: number;
  /** ± fraction of the delay, so many validators recovering together do not retry in lockstep. */
  jitter: number;
  /** A verdict older than this is abandoned as expired (epochs last ~20–30 min; this is a backstop). */
  maxAgeMs: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = {
  initialMs: 5_000,
  factor: 2,
  maxMs: 5 * 60_000,
  jitter: 0.2,
  maxAgeMs: 24 * 60 * 60_000,
};

/** Delay before the next attempt, after `failedAttempts` (≥ 1) failures. Always within [0, maxMs]. */
export function backoffDelayMs(
  failedAttempts: number,
  policy: BackoffPolicy = DEFAULT_BACKOFF,
  random: () => number = Math.random,
): number {
  const n = Math.max(1, Math.floor(failedAttempts));
  // Cap the exponent first: factor ** n overflows to Infinity long before n stops growing.
  const base = Math.min(policy.maxMs, policy.initialMs * policy.factor ** Math.min(n - 1, 64));
  const spread = base * Math.min(Math.max(policy.jitter, 0), 1);
  const r = Math.min(Math.max(random(), 0), 1);
  return Math.round(Math.min(policy.maxMs, Math.max(0, base - spread + 2 * spread * r)));
}

export type DeliveryTransition =
  | { state: "delivered"; outcome: "delivered" | "duplicate"; reason: string | null }
  | { state: "abandoned"; outcome: "finalized" | "rejected" | "expired"; reason: string }
  | { state: "pending"; nextAttemptAt: number; reason: string };

export function isExpired(
  entry: Pick<OutboxEntry, "createdAt">,
  nowMs: number,
  policy = DEFAULT_BACKOFF,
): boolean {
  return nowMs - entry.createdAt >= policy.maxAgeMs;
}

export function isDue(entry: Pick<OutboxEntry, "state" | "nextAttemptAt">, nowMs: number): boolean {
  return entry.state === "pending" && entry.nextAttemptAt <= nowMs;
}

/**
 * What an attempt's outcome does to the entry. `attempts` includes the attempt just made.
 * A 409 duplicate means an earlier attempt reached the server (its answer was lost): delivered, once.
 */
export function transitionAfter(
  entry: Pick<OutboxEntry, "attempts" | "createdAt">,
  outcome: ScoreOutcome,
  nowMs: number,
  policy: BackoffPolicy = DEFAULT_BACKOFF,
  random: () => number = Math.random,
): DeliveryTransition {
  switch (outcome.kind) {
    case "delivered":
      return { state: "delivered", outcome: "delivered", reason: null };
    case "duplicate":
      return { state: "delivered", outcome: "duplicate", reason: outcome.message };
    case "finalized":
      return { state: "abandoned", outcome: "finalized", reason: outcome.message || "epoch is finalized" };
    case "rejected":
      return {
        state: "abandoned",
        outcome: "rejected",
        reason: `${outcome.code} (HTTP ${outcome.status}): ${outcome.message}`,
      };
    case "retryable": {
      const reason = `${outcome.code}${outcome.status === null ? "" : ` (HTTP ${outcome.status})`}: ${outcome.message}`;
      const next = nowMs + backoffDelayMs(entry.attempts, policy, random);
      if (next - entry.createdAt >= policy.maxAgeMs) {
        return {
          state: "abandoned",
          outcome: "expired",
          reason: `gave up after ${entry.attempts} attempts; last: ${reason}`,
        };
      }
      return { state: "pending", nextAttemptAt: next, reason };
    }
  }
}
