/** The daemon's cadences and grace periods (tests shorten them), and a bounded wait. */
import { type BackoffPolicy, DEFAULT_BACKOFF } from "../platform/index.js";
import { DEFAULT_WEIGHTS_BACKOFF, type WeightsBackoff } from "./weights-plan.js";

export interface DaemonTiming {
  /** How often the outbox looks for due verdicts (a fresh verdict wakes it at once). */
  outboxPollMs: number;
  /** The outbox's retry schedule (5 s × 2ⁿ up to 5 min by default). */
  outboxBackoff: BackoffPolicy;
  weightsBackoff: Omit<WeightsBackoff, "intervalMs">;
  /** Budget from submission to inclusion of one set_weights. */
  setWeightsTimeoutMs: number;
  /** Pack fetch attempts for failures that may pass (5xx, timeouts) before the pack counts as rejected. */
  packFetchAttempts: number;
  packFetchRetryMs: number;
  /** How long stop() waits for the evaluation to wind down (its episodes clean up). */
  evaluationGraceMs: number;
  /** How long stop() waits for the outbox attempt in flight (the score POST has a 30 s deadline). */
  outboxGraceMs: number;
  /** The winner loop's cadence (upstream's `_WINNER_POLL_INTERVAL`, 60 s). */
  winnerPollMs: number;
  /** How long start() waits for the priming winner refresh; a failure or a timeout does not block the start. */
  winnerPrimeMs: number;
}

export const DEFAULT_TIMING: DaemonTiming = {
  outboxPollMs: 5_000,
  outboxBackoff: DEFAULT_BACKOFF,
  weightsBackoff: DEFAULT_WEIGHTS_BACKOFF,
  setWeightsTimeoutMs: 120_000,
  packFetchAttempts: 3,
  packFetchRetryMs: 2_000,
  evaluationGraceMs: 90_000,
  outboxGraceMs: 35_000,
  winnerPollMs: 60_000,
  winnerPrimeMs: 20_000,
};

/** validator.py OWNER_UID: the uid upstream burns to on finney's subnet 11 (we burn to the owner hotkey's uid). */
export const UPSTREAM_OWNER_UID = { network: "finney", netuid: 11, uid: 74 } as const;

/** Resolve when `p` settles, `ms` pass, or `signal` aborts, whichever comes first. */
export async function waitFor(p: Promise<unknown>, ms: number, signal: AbortSignal): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  await Promise.race([
    p,
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
      onAbort = resolve;
      signal.addEventListener("abort", onAbort, { once: true });
    }),
  ]);
  clearTimeout(timer);
  if (onAbort) signal.removeEventListener("abort", onAbort);
}
