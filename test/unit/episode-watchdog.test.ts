/**
 * The policy-stall watchdog's rule (upstream's `_policy_stalled`, sandbox_harness.py c2f32fb8):
 * no completed metered call `firstCall` after the agent started, or none for `idle` since the last.
 */
import { describe, expect, it } from "vitest";
import { attributeAgentEnd } from "../../src/episode/attribution.js";
import { stallCheck } from "../../src/episode/watchdog.js";

const FIRST = 120_000;
const IDLE = 600_000;

describe("stallCheck", () => {
  it("no call yet: waits out the first-call window from the agent's start, then trips", () => {
    expect(stallCheck({ calls: 0 }, 1_000, 1_000, FIRST, IDLE)).toEqual({ waitMs: FIRST });
    expect(stallCheck({ calls: 0 }, 1_000, 1_000 + FIRST, FIRST, IDLE)).toEqual({ waitMs: 0 });
    expect(stallCheck({ calls: 0 }, 1_000, 1_001 + FIRST, FIRST, IDLE)).toEqual({ trip: "watchdog_no_call" });
  });

  it("after a completed call only the idle window counts, from that call", () => {
    expect(stallCheck({ calls: 3, lastCompletedAt: 50_000 }, 0, 50_000 + IDLE, FIRST, IDLE)).toEqual({
      waitMs: 0,
    });
    expect(stallCheck({ calls: 3, lastCompletedAt: 50_000 }, 0, 50_001 + IDLE, FIRST, IDLE)).toEqual({
      trip: "watchdog_idle",
    });
  });

  it("a call completed before the agent started (while the sidecar booted) counts, as upstream's token does", () => {
    // 119 s after the agent's start with no call since: upstream still waits (its token has a call);
    // reading only calls after the agent's start would trip here as "no call".
    const start = 10_000;
    const warmup = { calls: 1, lastCompletedAt: 9_000 };
    expect(stallCheck(warmup, start, start + FIRST + 1, FIRST, IDLE)).toEqual({
      waitMs: 9_000 + IDLE - (start + FIRST + 1),
    });
    expect(stallCheck(warmup, start, 9_001 + IDLE, FIRST, IDLE)).toEqual({ trip: "watchdog_idle" });
  });
});

describe("a watchdog stop is the policy's, whatever was in flight", () => {
  it("policy_stalled with or without a call waiting on the provider", () => {
    const base = { exitCode: undefined, oomKilled: false, upstreamFailing: true };
    for (const killedBy of ["watchdog_no_call", "watchdog_idle"] as const)
      for (const inflightAtKill of [false, true])
        expect(attributeAgentEnd({ ...base, killedBy, inflightAtKill })).toMatchObject({
          class: "policy",
          code: "policy_stalled",
        });
  });
});
