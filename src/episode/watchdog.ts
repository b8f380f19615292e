/**
 * The policy-stall watchdog, as upstream's (sandbox_harness.py `_policy_stalled`): while the agent
 * runs, a policy whose meter token has completed no call `firstCallMs` after the agent started
 * (POLICY_FIRST_CALL_S, 120 s), or none for `idleMs` since its last completed call (POLICY_IDLE_S,
 * 600 s), has the agent stopped; the episode is `policy_stalled` and the verifier still grades what
 * was written. What counts is the meter's `calls` (src/meter `Activity`): every forwarded call once
 * it has settled, whatever the provider answered (a 5xx, a timeout, a cut stream); refusals before
 * forwarding (allowlist, cap, a malformed body) are not calls. Once the token has any call, the idle
 * rule alone applies — a call completed while the sidecar booted counts, as upstream's token is
 * minted before its sidecar starts. Monotonic time throughout (upstream reads the wall clock for the
 * idle rule; a clock step cannot trip or hold ours).
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { KillReason } from "./attribution.js";
import type { EpisodeMeter } from "./types.js";

/** The watchdog's verdict at one instant (pure): trip with a reason, or the ms until it could. */
export function stallCheck(
  a: { calls: number; lastCompletedAt?: number },
  agentStart: number,
  now: number,
  firstCallMs: number,
  idleMs: number,
): { trip: KillReason } | { waitMs: number } {
  if (a.calls === 0 || a.lastCompletedAt === undefined) {
    const left = agentStart + firstCallMs - now;
    return left < 0 ? { trip: "watchdog_no_call" } : { waitMs: left };
  }
  const left = a.lastCompletedAt + idleMs - now;
  return left < 0 ? { trip: "watchdog_idle" } : { waitMs: left };
}

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
    let check: ReturnType<typeof stallCheck>;
    try {
      check = stallCheck(meter.lastActivity(token), agentStart, performance.now(), firstCallMs, idleMs);
    } catch {
      return undefined;
    }
    if ("trip" in check) return check.trip;
    await sleep(Math.max(10, Math.min(pollMs, check.waitMs + 5)), undefined, { signal }).catch(
      () => undefined,
    );
  }
  return undefined;
}
