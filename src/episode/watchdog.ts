/**
 * The policy-stall watchdog: an agent whose policy completes no metered call within
 * `firstCallMs` of the agent's start, or none for `idleMs`, is stopped (upstream's
 * POLICY_FIRST_CALL_S / POLICY_IDLE_S). Monotonic time throughout.
 */
import type { KillReason } from "./attribution.js";
import { sleep } from "./deadline.js";
import type { EpisodeMeter } from "./types.js";

/** Resolve with the watchdog's reason when the agent must be killed for lack of metered calls. */
export async function watchdog(
  meter: EpisodeMeter,
  token: string,
  agentStart: number,
  firstCallMs: number,
  idleMs: number,
  pollMs: number,
  signal: AbortSignal,
): Promise<KillReason | undefined> {
  while (!signal.aborted) {
    const now = performance.now();
    let last: number | undefined;
    try {
      const a = meter.lastActivity(token);
      last =
        a.lastCompletedAt !== undefined && a.lastCompletedAt >= agentStart ? a.lastCompletedAt : undefined;
    } catch {
      return undefined;
    }
    if (last === undefined && now - agentStart > firstCallMs) return "watchdog_no_call";
    if (last !== undefined && now - last > idleMs) return "watchdog_idle";
    const nextCheck =
      last === undefined ? agentStart + firstCallMs - now : Math.min(last + idleMs - now, pollMs);
    await sleep(Math.max(10, Math.min(pollMs, nextCheck + 5)), signal).catch(() => undefined);
  }
  return undefined;
}
