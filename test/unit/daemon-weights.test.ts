import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { SubnetSnapshot } from "../../src/chain/index.js";
import {
  BLOCK_TIME_MS,
  nextWeightsDelayMs,
  planWeights,
  type WeightsBackoff,
  type WeightsTickOutcome,
} from "../../src/daemon/index.js";
import { winnerCurrentSchema } from "../../src/platform/index.js";
import type { CachedWinner } from "../../src/store/index.js";

const ME = "5Me";
const OWNER = "5Owner";
const WINNER = "5Winner";
const DAY = 24 * 60 * 60 * 1000;

function snapshot(
  o: Partial<SubnetSnapshot> & { meLastUpdate?: number; mePermit?: boolean } = {},
): SubnetSnapshot {
  const hotkeys = [OWNER, "5Other", ME, WINNER];
  return {
    netuid: 11,
    block: 10_000,
    blockHash: "0x00",
    neurons: hotkeys.map((hotkey, uid) => ({
      uid,
      hotkey,
      stakeRao: 1n,
      stake: 1,
      validatorPermit: hotkey === ME ? (o.mePermit ?? true) : false,
      lastUpdate: hotkey === ME ? (o.meLastUpdate ?? 0) : 0,
    })),
    stakeSource: "TotalHotkeyAlpha",
    ownerColdkey: "5OwnerCold",
    ownerHotkey: OWNER,
    ownerUid: 0,
    tempo: 360,
    weightsSetRateLimit: 100,
    weightsVersionKey: 5,
    commitRevealEnabled: false,
    revealPeriodEpochs: 1,
    commitRevealVersion: undefined,
    minAllowedWeights: 1,
    maxWeightsLimit: 65535,
    ...o,
  };
}

function cached(seat: { hotkey: string; uid: number | null } | null, ageMs = 60_000): CachedWinner {
  return {
    winner: winnerCurrentSchema.parse({
      winner: seat ? { hotkey: seat.hotkey, uid: seat.uid, score: 7 } : null,
      finalized_epoch: null,
      submissions: [],
    }),
    fetchedAt: 0,
    ageMs,
    fresh: ageMs <= DAY,
  };
}

const plan = (
  snap: SubnetSnapshot,
  c: CachedWinner | undefined,
  versionKeyOverride?: number,
  ownerRow?: Array<[number, number]>,
) =>
  planWeights({
    snapshot: snap,
    hotkey: ME,
    cached: c,
    ownerRow,
    maxCacheAgeMs: DAY,
    ...(versionKeyOverride !== undefined ? { versionKeyOverride } : {}),
  });

describe("planWeights", () => {
  it("gives 100 % (u16 65535) to the seated winner's uid, with the chain's version key", () => {
    expect(plan(snapshot(), cached({ hotkey: WINNER, uid: 3 }))).toEqual({
      kind: "set",
      uids: [3],
      weights: [65535],
      versionKey: 5,
      reason: "winner",
      burn: false,
      myUid: 2,
      winner: { hotkey: WINNER, uid: 3, chainUid: 3 },
    });
  });

  it("takes the winner's uid from the platform, as upstream (the chain's uid is only reported)", () => {
    expect(plan(snapshot(), cached({ hotkey: WINNER, uid: 1 }))).toMatchObject({
      kind: "set",
      uids: [1],
      winner: { uid: 1, chainUid: 3 },
    });
    // A hotkey the chain does not know still gets the platform's uid.
    expect(plan(snapshot(), cached({ hotkey: "5Gone", uid: 1 }))).toMatchObject({
      uids: [1],
      reason: "winner",
      winner: { chainUid: undefined },
    });
    // A platform uid outside the subnet cannot be set: blocked, as upstream's call would fail.
    expect(plan(snapshot(), cached({ hotkey: WINNER, uid: 9 }))).toMatchObject({
      kind: "blocked",
      problems: [{ code: "weights_invalid" }],
    });
    expect(plan(snapshot(), cached({ hotkey: WINNER, uid: 70_000 }))).toMatchObject({
      kind: "blocked",
      problems: [{ code: "weights_invalid" }],
    });
  });

  it("no seat copies the owner's row; burns to the owner only when the row is unreadable", () => {
    const row: Array<[number, number]> = [
      [1, 65535],
      [3, 32768],
    ];
    for (const c of [cached(null), cached({ hotkey: WINNER, uid: null }), undefined])
      expect(plan(snapshot(), c, undefined, row)).toMatchObject({
        kind: "set",
        uids: [1, 3],
        weights: [65535, 32768],
        reason: "owner_row",
        burn: false,
      });
    const burn = { kind: "set", uids: [0], weights: [65535], burn: true, reason: "no_seat" };
    expect(plan(snapshot(), cached(null))).toMatchObject(burn);
    expect(plan(snapshot(), cached(null), undefined, [])).toMatchObject(burn);
    expect(plan(snapshot(), undefined, undefined, [[4, 1]])).toMatchObject(burn); // uid 4 ≥ n = 4
  });

  it("a stale seat burns (the owner's row is not copied)", () => {
    expect(plan(snapshot(), cached({ hotkey: WINNER, uid: 3 }, DAY + 1), undefined, [[1, 9]])).toMatchObject({
      kind: "set",
      uids: [0],
      weights: [65535],
      burn: true,
      reason: "stale_winner_cache",
    });
  });

  it("waits for the rate limit: head − LastUpdate < WeightsSetRateLimit", () => {
    expect(plan(snapshot({ meLastUpdate: 9_950 }), cached(null))).toEqual({
      kind: "wait",
      blocksUntilAllowed: 50,
      versionKey: 5,
      reason: "no_seat",
    });
    expect(plan(snapshot({ meLastUpdate: 9_900 }), cached(null))).toMatchObject({ kind: "set" });
  });

  it("is blocked, not waiting, on what only the operator can fix", () => {
    const notRegistered = snapshot({
      neurons: snapshot()
        .neurons.filter((n) => n.hotkey !== ME)
        .map((n, uid) => ({ ...n, uid })),
    });
    expect(plan(notRegistered, cached(null))).toMatchObject({
      kind: "blocked",
      problems: [{ code: "not_registered" }],
    });
    expect(plan(snapshot({ mePermit: false }), cached({ hotkey: WINNER, uid: 3 }))).toMatchObject({
      kind: "blocked",
      problems: [{ code: "no_validator_permit" }],
    });
    // A permanent problem wins over a pending rate limit: the operator must hear of it now.
    expect(plan(snapshot({ mePermit: false, meLastUpdate: 9_990 }), cached(null))).toMatchObject({
      kind: "blocked",
    });
    expect(plan(snapshot(), cached(null), 4)).toMatchObject({
      kind: "blocked",
      versionKey: 4,
      problems: [{ code: "version_key_too_low" }],
    });
    expect(plan(snapshot(), cached(null), 7)).toMatchObject({ kind: "set", versionKey: 7 });
  });

  it("pays a seated winner even when the owner holds no uid, but cannot burn without one", () => {
    const noOwner = snapshot({ ownerUid: undefined, ownerHotkey: undefined });
    expect(plan(noOwner, cached({ hotkey: WINNER, uid: 3 }))).toMatchObject({
      kind: "set",
      uids: [3],
      reason: "winner",
      burn: false,
    });
    expect(plan(noOwner, cached(null))).toMatchObject({
      kind: "blocked",
      reason: "no_seat",
      problems: [{ kind: "permanent" }],
    });
  });

  it("never emits an empty vector; its largest weight is 65535 (property)", () => {
    fc.assert(
      fc.property(
        fc.option(fc.constantFrom(WINNER, OWNER, ME, "5Gone"), { nil: null }),
        fc.option(fc.integer({ min: 0, max: 3 }), { nil: null }),
        fc.integer({ min: 0, max: 2 * DAY }),
        fc.integer({ min: 0, max: 10_000 }),
        fc.option(fc.array(fc.tuple(fc.integer({ min: 0, max: 4 }), fc.integer({ min: 0, max: 65535 }))), {
          nil: undefined,
        }),
        (seat, uid, age, last, row) => {
          const p = plan(
            snapshot({ meLastUpdate: last }),
            cached(seat ? { hotkey: seat, uid } : null, age),
            undefined,
            row,
          );
          if (p.kind !== "set") return p.kind === "wait" && p.blocksUntilAllowed > 0;
          return (
            p.uids.length > 0 &&
            Math.max(...p.weights) === 65535 &&
            p.uids.every((u) => u < 4) &&
            (p.reason !== "winner" || p.uids[0] === uid)
          );
        },
      ),
    );
  });
});

describe("nextWeightsDelayMs", () => {
  const b: WeightsBackoff = { intervalMs: 60_000, transientBaseMs: 5_000, permanentMaxMs: 600_000 };

  it("checks again at the cadence after weights landed, and when the window opens after a rate limit", () => {
    expect(nextWeightsDelayMs({ kind: "included" }, 0, b)).toBe(60_000);
    expect(nextWeightsDelayMs({ kind: "wait", blocksUntilAllowed: 1 }, 0, b)).toBe(BLOCK_TIME_MS);
    expect(nextWeightsDelayMs({ kind: "wait", blocksUntilAllowed: 50 }, 0, b)).toBe(60_000);
    expect(nextWeightsDelayMs({ kind: "failed", errorKind: "rate_limited" }, 4, b)).toBe(60_000);
  });

  it("retries transient failures 5 s, 10 s, 20 s, 40 s, then at the cadence: never skips a window", () => {
    const t = (n: number) => nextWeightsDelayMs({ kind: "failed", errorKind: "transient" }, n, b);
    expect([1, 2, 3, 4, 5, 30].map(t)).toEqual([5_000, 10_000, 20_000, 40_000, 60_000, 60_000]);
  });

  it("backs off permanent problems from the cadence up to 10 min, without tight loops", () => {
    const p = (n: number) => nextWeightsDelayMs({ kind: "blocked" }, n, b);
    expect([1, 2, 3, 4, 5, 99].map(p)).toEqual([60_000, 120_000, 240_000, 480_000, 600_000, 600_000]);
    expect(nextWeightsDelayMs({ kind: "failed", errorKind: "permanent" }, 2, b)).toBe(120_000);
  });

  it("stays within [1 s, max(cadence, 10 min)] and grows with the failure count (property)", () => {
    const outcome = fc.oneof(
      fc.constant<WeightsTickOutcome>({ kind: "included" }),
      fc.constant<WeightsTickOutcome>({ kind: "blocked" }),
      fc
        .integer({ min: 0, max: 1_000 })
        .map<WeightsTickOutcome>((n) => ({ kind: "wait", blocksUntilAllowed: n })),
      fc
        .constantFrom("transient", "permanent", "rate_limited" as const)
        .map<WeightsTickOutcome>((k) => ({ kind: "failed", errorKind: k })),
    );
    fc.assert(
      fc.property(
        outcome,
        fc.integer({ min: 1, max: 100 }),
        fc.integer({ min: 1_000, max: 3_600_000 }),
        (o, n, i) => {
          const bb = { ...b, intervalMs: i };
          const d = nextWeightsDelayMs(o, n, bb);
          return d >= 1_000 && d <= Math.max(i, bb.permanentMaxMs) && nextWeightsDelayMs(o, n + 1, bb) >= d;
        },
      ),
    );
  });
});
