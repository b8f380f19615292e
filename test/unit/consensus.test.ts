import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  aggregate,
  DEFAULT_MAX_WINNER_CACHE_AGE_MS,
  takeover,
  takeoverDelta,
  type Vote,
  weightsVector,
  winsorize,
} from "../../src/consensus/index.js";

const vote = (score: number, stake = 1, qualified = true, extra: Partial<Vote> = {}): Vote => ({
  validator_hotkey: `v${score}-${stake}-${Math.random()}`,
  stake,
  score,
  qualified,
  ...extra,
});

describe("aggregate: public vectors", () => {
  it("[3,8,8,8,8,9] Winsorized → 8.0; the plain mean would be 7.333…", () => {
    const scores = [3, 8, 8, 8, 8, 9];
    const a = aggregate(scores.map((s) => vote(s)));
    expect(a.score).toBe(8);
    expect(a.winsorized).toBe(true);
    expect(scores.reduce((x, y) => x + y, 0) / scores.length).toBeCloseTo(7.3333, 4);
  });

  it("[1,8,9] (n < 4) is the plain mean 6.0", () => {
    const a = aggregate([1, 8, 9].map((s) => vote(s)));
    expect(a.score).toBe(6);
    expect(a.winsorized).toBe(false);
  });

  it("exactly 50 % qualified is not qualified", () => {
    const a = aggregate([vote(5, 1, true), vote(5, 1, true), vote(0, 1, false), vote(0, 1, false)]);
    expect(a.qualified).toBe(false);
    expect(a.qualifiedVotes).toBe(2);
    expect(a.counted).toBe(4);
  });

  it("a head-count majority beats an 80 %-stake dissenter on the qualified flag", () => {
    const a = aggregate([vote(0, 80, false), vote(7, 10, true), vote(9, 10, true)]);
    expect(a.qualified).toBe(true);
    expect(a.score).toBe(8); // the dissenter's stake does not enter the qualified votes' mean
  });

  it("drops rejected votes and votes without a positive stake", () => {
    const a = aggregate([
      vote(9, 10, true),
      vote(1, 0, true),
      vote(1, -5, true),
      vote(1, Number.NaN, true),
      vote(1, 10, true, { rejected: true }),
      vote(1, 10, false, { rejected: true }),
    ]);
    expect(a).toMatchObject({ counted: 1, dropped: 5, qualified: true, score: 9 });
  });

  it("stake-weighted by default, equal-weighted when configured", () => {
    const votes = [vote(10, 3), vote(4, 1)];
    expect(aggregate(votes).score).toBe(8.5);
    expect(aggregate(votes, { stakeWeighted: false }).score).toBe(7);
  });

  it("Winsorizing moves values, not stake: the lowest vote's stake carries the second-lowest value", () => {
    // values 0,4,6,10 → 4,4,6,6; stakes 5,1,1,1 → (5·4 + 4 + 6 + 6)/8 = 4.5
    const a = aggregate([vote(0, 5), vote(4, 1), vote(6, 1), vote(10, 1)]);
    expect(a.score).toBe(4.5);
  });

  it("no qualified vote → score null; no vote at all → not qualified", () => {
    expect(aggregate([vote(3, 1, false)])).toMatchObject({ qualified: false, score: null });
    expect(aggregate([])).toMatchObject({ qualified: false, score: null, counted: 0 });
  });

  it("the score is over qualified votes only, even when the pack is not qualified overall", () => {
    const a = aggregate([vote(6, 1, true), vote(0, 1, false), vote(0, 1, false)]);
    expect(a).toMatchObject({ qualified: false, score: 6 });
  });
});

describe("winsorize", () => {
  it("replaces exactly one lowest and one highest", () => {
    expect(winsorize([5, 1, 9, 1, 9])).toEqual([5, 1, 9, 1, 9]);
    expect(winsorize([5, 0, 9, 1, 10])).toEqual([5, 1, 9, 1, 9]);
    expect(winsorize([2, 1, 3])).toEqual([2, 1, 3]);
  });
});

describe("takeover: δ(s)", () => {
  it("3 % up to s = 0.70, linear to 0 at s = 1, 0 beyond", () => {
    expect(takeoverDelta(0, 16)).toBe(0.03);
    expect(takeoverDelta(0.7, 16)).toBe(0.03);
    expect(takeoverDelta(0.85, 16)).toBeCloseTo(0.015, 12);
    expect(takeoverDelta(1, 16)).toBe(0);
    expect(takeoverDelta(1.2, 16)).toBe(0);
  });

  it("flat 3 % before spec 16", () => {
    expect(takeoverDelta(0.95, 15)).toBe(0.03);
    expect(takeoverDelta(1, 15)).toBe(0.03);
    expect(takeoverDelta(0.95, 16)).toBeCloseTo(0.005, 12);
  });

  it("strict >: equal to the threshold does not take over", () => {
    // w = 0.5 of max 1 → threshold 0.515
    const t = takeover(0.515, 0.5, 1, 16);
    expect(t.threshold).toBeCloseTo(0.515, 15);
    expect(takeover(t.threshold, 0.5, 1, 16).takesOver).toBe(false);
    expect(takeover(0.5151, 0.5, 1, 16).takesOver).toBe(true);
  });

  it("works on any score scale (max 10: incumbent 8.5 needs > 8.6275)", () => {
    // s = 0.85 → δ = 1.5 % → 8.5 · 1.015 = 8.6275
    expect(takeover(8.62, 8.5, 10, 16).takesOver).toBe(false);
    expect(takeover(8.63, 8.5, 10, 16).takesOver).toBe(true);
    expect(takeover(8.63, 8.5, 10, 15).takesOver).toBe(false); // flat 3 %: 8.755
  });

  it("an incumbent at the maximum cannot be unseated by an equal (maximum) score", () => {
    expect(takeover(10, 10, 10, 16).takesOver).toBe(false);
  });
});

describe("takeover: properties", () => {
  const maxScore = fc.double({ min: 0.001, max: 1e6, noNaN: true, noDefaultInfinity: true });

  it("the threshold is monotonic (non-decreasing) in the incumbent's score", () => {
    fc.assert(
      fc.property(
        maxScore,
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.integer({ min: 0, max: 40 }),
        (m, a, b, spec) => {
          const [lo, hi] = a <= b ? [a * m, b * m] : [b * m, a * m];
          expect(takeover(0, lo, m, spec).threshold).toBeLessThanOrEqual(takeover(0, hi, m, spec).threshold);
        },
      ),
    );
  });

  it("a perfect score always takes the seat from an incumbent below it (spec ≥ 16)", () => {
    fc.assert(
      fc.property(
        maxScore,
        fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true }),
        fc.integer({ min: 16, max: 40 }),
        (m, s, spec) => {
          const w = s * m;
          fc.pre(w < m);
          expect(takeover(m, w, m, spec).takesOver).toBe(true);
        },
      ),
    );
  });

  it("bounds: the threshold lies in [w, 1.03·w] and the challenger must beat w itself", () => {
    fc.assert(
      fc.property(
        maxScore,
        fc.double({ min: 0, max: 1.5, noNaN: true }),
        fc.integer({ min: 0, max: 40 }),
        (m, s, spec) => {
          const w = s * m;
          const t = takeover(w, w, m, spec);
          expect(t.takesOver).toBe(false);
          expect(t.threshold).toBeGreaterThanOrEqual(w);
          expect(t.threshold).toBeLessThanOrEqual(w * 1.03 + 1e-12 * m);
          expect(t.delta).toBeGreaterThanOrEqual(0);
          expect(t.delta).toBeLessThanOrEqual(0.03);
        },
      ),
    );
  });
});

describe("aggregate: properties", () => {
  const voteArb = fc.record({
    validator_hotkey: fc.string(),
    stake: fc.oneof(fc.double({ min: 1e-3, max: 1e9, noNaN: true }), fc.constant(0), fc.constant(-1)),
    score: fc.double({ min: 0, max: 100, noNaN: true }),
    qualified: fc.boolean(),
    rejected: fc.option(fc.boolean(), { nil: undefined }),
  });
  const votesArb = fc.array(voteArb, { maxLength: 12 });

  it("permutation invariance", () => {
    fc.assert(
      fc.property(votesArb, fc.boolean(), (votes, stakeWeighted) => {
        const a = aggregate(votes, { stakeWeighted });
        const b = aggregate([...votes].reverse(), { stakeWeighted });
        expect(b.qualified).toBe(a.qualified);
        if (a.score === null) expect(b.score).toBeNull();
        else expect(b.score).toBeCloseTo(a.score, 9);
      }),
    );
  });

  it("bounds: the score lies within the qualified counted votes' scores", () => {
    fc.assert(
      fc.property(votesArb, fc.boolean(), (votes, stakeWeighted) => {
        const a = aggregate(votes, { stakeWeighted });
        const q = votes.filter((v) => !v.rejected && v.stake > 0 && v.qualified).map((v) => v.score);
        if (q.length === 0) {
          expect(a.score).toBeNull();
          return;
        }
        expect(a.score).toBeGreaterThanOrEqual(Math.min(...q));
        expect(a.score).toBeLessThanOrEqual(Math.max(...q));
        expect(a.qualified).toBe(q.length * 2 > a.counted);
      }),
    );
  });

  it("Winsorizing bounds the influence of one outlier (n ≥ 4): moving it does not move the score", () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 1, max: 9, noNaN: true }), { minLength: 3, maxLength: 8 }),
        fc.double({ min: 9, max: 1e6, noNaN: true }),
        (rest, outlier) => {
          const base = rest.map((s) => vote(s));
          const a = aggregate([...base, vote(9)], { stakeWeighted: false });
          const b = aggregate([...base, vote(outlier)], { stakeWeighted: false });
          expect(b.score).toBeCloseTo(a.score!, 9);
        },
      ),
    );
  });
});

describe("weightsVector", () => {
  const base = { ownerUid: 0, winnerRegistered: true, cacheAgeMs: 1000 };

  it("100 % to the seated winner", () => {
    expect(weightsVector({ ...base, winnerUid: 42 })).toEqual({
      uids: [42],
      weights: [1],
      reason: "winner",
      burn: false,
    });
  });

  it("burns to the owner with no seat, a deregistered winner, or a stale cache", () => {
    expect(weightsVector({ ...base })).toMatchObject({
      uids: [0],
      weights: [1],
      reason: "no_seat",
      burn: true,
    });
    expect(weightsVector({ ...base, winnerUid: 42, winnerRegistered: false })).toMatchObject({
      uids: [0],
      reason: "winner_deregistered",
    });
    expect(
      weightsVector({ ...base, winnerUid: 42, cacheAgeMs: DEFAULT_MAX_WINNER_CACHE_AGE_MS + 1 }),
    ).toMatchObject({ uids: [0], reason: "stale_winner_cache" });
    expect(
      weightsVector({ ...base, winnerUid: 42, cacheAgeMs: DEFAULT_MAX_WINNER_CACHE_AGE_MS }),
    ).toMatchObject({ uids: [42], reason: "winner" });
    expect(weightsVector({ ...base, winnerUid: 42, cacheAgeMs: Number.NaN })).toMatchObject({
      uids: [0],
      reason: "stale_winner_cache",
    });
    expect(weightsVector({ ...base, winnerUid: 42, cacheAgeMs: 10, maxCacheAgeMs: 5 })).toMatchObject({
      uids: [0],
      reason: "stale_winner_cache",
    });
  });

  it("never empty, always one uid with weight 1", () => {
    fc.assert(
      fc.property(
        fc.option(fc.integer({ min: 0, max: 4095 }), { nil: undefined }),
        fc.integer({ min: 0, max: 4095 }),
        fc.boolean(),
        fc.integer({ min: 0, max: 2 * DEFAULT_MAX_WINNER_CACHE_AGE_MS }),
        (winnerUid, ownerUid, winnerRegistered, cacheAgeMs) => {
          const v = weightsVector({ winnerUid, ownerUid, winnerRegistered, cacheAgeMs });
          expect(v.uids).toHaveLength(1);
          expect(v.weights).toEqual([1]);
          expect(v.uids[0] === ownerUid || v.uids[0] === winnerUid).toBe(true);
        },
      ),
    );
  });

  it("rejects uids that are not u16", () => {
    expect(() => weightsVector({ ...base, ownerUid: -1 })).toThrow(RangeError);
    expect(() => weightsVector({ ...base, winnerUid: 70000 })).toThrow(RangeError);
  });
});
