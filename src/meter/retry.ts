/**
 * Upstream's retries (`trajectoryrl/policy/meter.py`), pure. One counter per call, shared by both
 * kinds: a 429 or 503 status is retried while fewer than 6 retries were made, waiting 1.5 s × the
 * retry's number; a stream whose first chunk carries `"error"` or `concurrency` (in its first 400
 * bytes) is retried while fewer than 8 were made, waiting 2 s × the retry's number. Retry-After is
 * not read (upstream does not), and a connection that fails is not retried.
 */

export interface RetryPolicy {
  /** A 429/503 is retried while retries < this. */
  statusRetries: number;
  /** An error as the first stream chunk is retried while retries < this. */
  streamRetries: number;
  /** Wait before status retry k (1-based): k × this. */
  statusStepMs: number;
  /** Wait before first-chunk retry k (1-based): k × this. */
  streamStepMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = {
  statusRetries: 6,
  streamRetries: 8,
  statusStepMs: 1_500,
  streamStepMs: 2_000,
};

export type RetryKind = "status" | "stream";

/** The wait before the next retry, given the retries made so far; null when no retry is left. */
export function retryDelayMs(policy: RetryPolicy, kind: RetryKind, retriesSoFar: number): number | null {
  const max = kind === "status" ? policy.statusRetries : policy.streamRetries;
  if (retriesSoFar >= max) return null;
  return (retriesSoFar + 1) * (kind === "status" ? policy.statusStepMs : policy.streamStepMs);
}

/** Upstream's test of a stream's first chunk: `"error"` or `concurrency` in its first 400 bytes. */
export function firstChunkRetryable(chunk: Buffer): boolean {
  const head = chunk.length > 400 ? chunk.subarray(0, 400) : chunk;
  return head.indexOf('"error"') >= 0 || head.indexOf("concurrency") >= 0;
}
