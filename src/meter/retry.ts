/** Bounded retries of upstream 429/503 (and connect failures), honouring Retry-After. Pure. */

export interface RetryPolicy {
  /** Retries after the first attempt. */
  maxRetries: number;
  /** First backoff when the upstream gives no Retry-After; doubles per retry. */
  baseDelayMs: number;
  /** Ceiling of a computed backoff. */
  maxDelayMs: number;
  /** A Retry-After longer than this is not waited for: the error goes to the caller instead. */
  maxRetryAfterMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = {
  maxRetries: 4,
  baseDelayMs: 500,
  maxDelayMs: 8_000,
  maxRetryAfterMs: 30_000,
};

/** Retry-After as milliseconds (delta-seconds or an HTTP date); undefined when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) return undefined;
  const v = value.trim();
  if (v === "") return undefined;
  if (/^\d+(\.\d+)?$/.test(v)) return Math.round(Number(v) * 1000);
  const at = Date.parse(v);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
}

/**
 * The wait before retry number `retry` (0-based), or null to stop retrying. `jitter` in [0, 1)
 * spreads computed backoffs over their upper half so parallel calls do not retry in lockstep.
 */
export function retryDelayMs(
  policy: RetryPolicy,
  retry: number,
  retryAfterMs: number | undefined,
  jitter: number,
): number | null {
  if (retry >= policy.maxRetries) return null;
  if (retryAfterMs !== undefined) return retryAfterMs > policy.maxRetryAfterMs ? null : retryAfterMs;
  const exp = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** retry);
  return Math.round(exp * (0.5 + 0.5 * jitter));
}
