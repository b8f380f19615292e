import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type BackoffPolicy,
  backoffDelayMs,
  DEFAULT_BACKOFF,
  isDue,
  isExpired,
  type ScoreOutcome,
  transitionAfter,
} from "../../src/platform/index.js";

const policy: BackoffPolicy = { initialMs: 1000, factor: 2, maxMs: 60_000, jitter: 0.2, maxAgeMs: 3_600_000 };

describe("outbox backoff (pure)", () => {
  it("grows exponentially from the initial delay and stops at the cap", () => {
    const mid = () => 0.5;
    expect([1, 2, 3, 4, 7, 8, 100, 10_000].map((n) => backoffDelayMs(n, policy, mid))).toEqual([
      1000, 2000, 4000, 8000, 60_000, 60_000, 60_000, 60_000,
    ]);
  });

  it("stays within [initial·(1−jitter), max] for any attempt count and random draw (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -5, max: 1_000_000 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (n, r) => {
          const d = backoffDelayMs(n, policy, () => r);
          expect(Number.isInteger(d)).toBe(true);
          expect(d).toBeGreaterThanOrEqual(800);
          expect(d).toBeLessThanOrEqual(policy.maxMs);
        },
      ),
    );
  });

  it("without jitter never shrinks as failures accumulate (property)", () => {
    const flat = { ...policy, jitter: 0 };
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 500 }), (n) => {
        expect(backoffDelayMs(n + 1, flat)).toBeGreaterThanOrEqual(backoffDelayMs(n, flat));
      }),
    );
  });
});

describe("outbox transitions (pure)", () => {
  const entry = { attempts: 1, createdAt: 1_000_000 };
  const now = 1_000_000 + 10_000;
  const t = (o: ScoreOutcome, e = entry, at = now) => transitionAfter(e, o, at, policy, () => 0.5);

  it("delivered and 409 duplicate both end delivered (the duplicate is an earlier attempt that got through)", () => {
    expect(t({ kind: "delivered", status: 200, receipt: null })).toEqual({
      state: "delivered",
      outcome: "delivered",
      reason: null,
    });
    expect(t({ kind: "duplicate", status: 409, message: "duplicate" })).toMatchObject({
      state: "delivered",
      outcome: "duplicate",
    });
  });

  it("409 finalized and other 4xx end the entry (abandoned, with the reason)", () => {
    expect(t({ kind: "finalized", status: 409, message: "epoch is finalized" })).toEqual({
      state: "abandoned",
      outcome: "finalized",
      reason: "epoch is finalized",
    });
    const r = t({
      kind: "rejected",
      status: 401,
      code: "platform_unauthorized",
      message: "Invalid signature",
    });
    expect(r).toMatchObject({ state: "abandoned", outcome: "rejected" });
    expect(r.reason).toContain("HTTP 401");
    expect(r.reason).toContain("Invalid signature");
  });

  it("a retryable failure schedules the next attempt by the backoff", () => {
    const r = t({ kind: "retryable", status: 503, code: "platform_http_error", message: "unavailable" });
    expect(r).toEqual({
      state: "pending",
      nextAttemptAt: now + 1000,
      reason: "platform_http_error (HTTP 503): unavailable",
    });
    const r3 = t(
      { kind: "retryable", status: null, code: "platform_timeout", message: "slow" },
      { ...entry, attempts: 3 },
    );
    expect(r3).toMatchObject({ state: "pending", nextAttemptAt: now + 4000 });
  });

  it("a retry that would land past the maximum age expires the entry instead", () => {
    const late = entry.createdAt + policy.maxAgeMs - 500;
    const r = t(
      { kind: "retryable", status: 502, code: "platform_http_error", message: "bad gateway" },
      entry,
      late,
    );
    expect(r).toMatchObject({ state: "abandoned", outcome: "expired" });
    expect(r.reason).toContain("gave up after 1 attempts");
  });

  it("due and expired predicates", () => {
    expect(isDue({ state: "pending", nextAttemptAt: 5 }, 5)).toBe(true);
    expect(isDue({ state: "pending", nextAttemptAt: 6 }, 5)).toBe(false);
    expect(isDue({ state: "delivered", nextAttemptAt: 0 }, 5)).toBe(false);
    expect(isExpired({ createdAt: 0 }, DEFAULT_BACKOFF.maxAgeMs)).toBe(true);
    expect(isExpired({ createdAt: 0 }, DEFAULT_BACKOFF.maxAgeMs - 1)).toBe(false);
  });
});
