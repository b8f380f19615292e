/**
 * Verdict delivery's thin shell: send every verdict due in the outbox once, apply the pure
 * transition (delivery-rules.ts), persist it.
 * The daemon calls deliverDueVerdicts on its tick (and right after enqueueing a fresh verdict).
 */
import { type Logger, silentLogger } from "../log.js";
import type { PlatformClient } from "./client.js";
import {
  type BackoffPolicy,
  DEFAULT_BACKOFF,
  isExpired,
  type OutboxPort,
  transitionAfter,
} from "./delivery-rules.js";

export interface DeliveryDeps {
  outbox: OutboxPort;
  client: Pick<PlatformClient, "postScore" | "hotkey">;
  log?: Logger;
  policy?: BackoffPolicy;
  /** Wall clock, ms (entries are persisted across restarts). */
  now?: () => number;
  random?: () => number;
}

export interface DeliveryReport {
  attempted: number;
  delivered: number;
  duplicate: number;
  finalized: number;
  rejected: number;
  expired: number;
  retrying: number;
}

/**
 * POST each due verdict of the client's hotkey once. The caller's signal stops the round between
 * (or inside) requests; an interrupted attempt stays pending and is due again at once.
 */
export async function deliverDueVerdicts(
  deps: DeliveryDeps,
  opts: { signal?: AbortSignal; limit?: number } = {},
): Promise<DeliveryReport> {
  const now = deps.now ?? Date.now;
  const policy = deps.policy ?? DEFAULT_BACKOFF;
  const log = (deps.log ?? silentLogger).child({ component: "outbox" });
  const report: DeliveryReport = {
    attempted: 0,
    delivered: 0,
    duplicate: 0,
    finalized: 0,
    rejected: 0,
    expired: 0,
    retrying: 0,
  };
  for (const entry of deps.outbox.due(deps.client.hotkey, now(), opts.limit ?? 16)) {
    if (opts.signal?.aborted) break;
    if (isExpired(entry, now(), policy)) {
      deps.outbox.apply(
        entry.id,
        { state: "abandoned", outcome: "expired", reason: "too old to deliver" },
        now(),
      );
      report.expired++;
      log.warn({ epoch: entry.epochId, attempts: entry.attempts }, "outbox.expired");
      continue;
    }
    deps.outbox.markAttempt(entry.id, now());
    report.attempted++;
    const outcome = await deps.client.postScore(entry.epochId, entry.verdict, { signal: opts.signal });
    const t = transitionAfter(
      { attempts: entry.attempts + 1, createdAt: entry.createdAt },
      outcome,
      now(),
      policy,
      deps.random,
    );
    const status = "status" in outcome ? outcome.status : null;
    deps.outbox.apply(entry.id, t, now(), status);
    const fields = { epoch: entry.epochId, attempt: entry.attempts + 1, outcome: outcome.kind, status };
    if (t.state === "delivered") {
      report[t.outcome]++;
      log.info(fields, "outbox.delivered");
    } else if (t.state === "abandoned") {
      report[t.outcome]++;
      log.warn({ ...fields, reason: t.reason }, "outbox.abandoned");
    } else {
      report.retrying++;
      log.warn({ ...fields, nextAttemptAt: t.nextAttemptAt, reason: t.reason }, "outbox.retry_scheduled");
    }
  }
  return report;
}
