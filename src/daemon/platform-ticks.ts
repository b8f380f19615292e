/**
 * The daemon's two platform loops, one tick each: the verdict outbox (due verdicts posted one at a
 * time, alarms and marks from what the platform said) and the heartbeat.
 */
import type { Config } from "../config.js";
import { InfraError } from "../errors.js";
import type { Logger } from "../log.js";
import { deliverDueVerdicts, type PlatformClient } from "../platform/index.js";
import type { LiveStatus } from "../status/index.js";
import { MARK, type PlatformMarksRepo, type VerdictOutboxRepo } from "../store/index.js";
import { ALARM } from "./eval-loop.js";
import { type HealthIssue, heartbeatInfo } from "./heartbeat.js";
import type { LogUploader } from "./log-uploads.js";
import type { DaemonTiming } from "./timing.js";

export interface DeliverDeps {
  outbox: VerdictOutboxRepo;
  platform: PlatformClient;
  marks: PlatformMarksRepo;
  log: Logger;
  live: LiveStatus;
  health: HealthIssue;
  timing: Pick<DaemonTiming, "outboxBackoff" | "outboxPollMs">;
  now: () => number;
}

export interface HeartbeatDeps {
  platform: PlatformClient;
  marks: PlatformMarksRepo;
  config: Config;
  health: HealthIssue;
  uploader: LogUploader | undefined;
  now: () => number;
}

/** Send due verdicts one at a time; the POST in flight is never aborted (stop waits for it). */
export async function deliverTick(signal: AbortSignal, d: DeliverDeps): Promise<number> {
  const { outbox, platform, marks } = d;
  for (let sent = 0; sent < 64 && !signal.aborted; sent++) {
    const r = await deliverDueVerdicts(
      { outbox, client: platform, log: d.log, policy: d.timing.outboxBackoff, now: d.now },
      { limit: 1 },
    );
    if (r.rejected > 0)
      d.live.raise(
        ALARM.verdictRejected,
        "the platform refused a verdict for good (see outbox.abandoned)",
        "error",
      );
    if (r.delivered + r.duplicate > 0) d.live.clear(ALARM.verdictRejected);
    // A score the platform accepted: upstream's `last_eval_at`, and it clears the health issue.
    if (r.delivered > 0) {
      marks.set(MARK.lastEvalAt, d.now());
      d.health.clear();
    }
    if (r.attempted === 0 && r.expired === 0) break;
  }
  return d.timing.outboxPollMs;
}

/** One heartbeat: the info upstream sends, then a replay of pending log uploads on the same cadence. */
export async function heartbeatTick(signal: AbortSignal, d: HeartbeatDeps): Promise<undefined> {
  const { platform, marks } = d;
  const info = heartbeatInfo({
    evaluating: d.config.evaluation.enabled,
    marks,
    llm: d.config.llm,
    healthIssue: d.health.value,
  });
  const r = await platform.postHeartbeat(info, { signal });
  // Uploads that did not go through earlier (platform down) get another chance on this cadence.
  if (d.uploader && !signal.aborted) await d.uploader.replay(signal).catch(() => undefined);
  if (r.ok) {
    marks.set(MARK.heartbeatSent, d.now());
    return undefined;
  }
  marks.set(MARK.heartbeatFailed, d.now(), r.code);
  if (r.code === "aborted") return undefined;
  throw new InfraError(r.code, `heartbeat not accepted: ${r.message}`, { retryable: r.retryable });
}
