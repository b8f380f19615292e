import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { convertWeightsForEmit } from "../../src/chain/index.js";
import {
  aggregate,
  DEFAULT_MAX_WINNER_CACHE_AGE_MS,
  float32PairwiseSum,
  ownerRowWeights,
  SEAT_DECAY_END_EPOCHS,
  SEAT_GRACE_EPOCHS,
  seatAge,
  seatDecayFactor,
  seatDecision,
  seatedEpochAfter,
  TERMINAL_HANDICAP,
  takeover,
  takeoverDelta,
  takeoverThreshold,
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

  it("equal-weighted by default, as the platform and upstream aggregate; stake-weighted when asked", () => {
    const votes = [vote(10, 3), vote(4, 1)];
    expect(aggregate(votes).score).toBe(7);
    expect(aggregate(votes).stakeWeighted).toBe(false);
    expect(aggregate(votes, { stakeWeighted: true }).score).toBe(8.5);
  });

  it("Winsorizing moves values, not stake: the lowest vote's stake carries the second-lowest value", () => {
    // values 0,4,6,10 → 4,4,6,6; stakes 5,1,1,1 → (5·4 + 4 + 6 + 6)/8 = 4.5
    const a = aggregate([vote(0, 5), vote(4, 1), vote(6, 1), vote(10, 1)], { stakeWeighted: true });
    expect(a.score).toBe(4.5);
  });

  it("the plain mean when Winsorizing is off (epochs before spec 16)", () => {
    const a = aggregate(
      [3, 8, 8, 8, 8, 9].map((s) => vote(s)),
      { winsorize: false },
    );
    expect(a.score).toBeCloseTo(22 / 3, 12);
    expect(a.winsorized).toBe(false);
  });

  it("a qualified vote without a score counts in the head count, not in the mean (winner_state.py)", () => {
    const a = aggregate([vote(6), vote(Number.NaN), vote(0, 1, false)]);
    expect(a).toMatchObject({ counted: 3, qualifiedVotes: 2, qualified: true, score: 6 });
    expect(aggregate([vote(Number.NaN), vote(0, 1, false)])).toMatchObject({ qualified: false, score: null });
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

describe("weightsVector (validator.py _weight_loop_tick)", () => {
  const seat = (uid: number | null, hotkey = "5Winner") => ({ hotkey, uid });
  const base = { ownerUid: 0, cacheAgeMs: 1000, ownerRow: undefined, neuronCount: 256 };

  it("100 % to the uid the platform gives the seat", () => {
    expect(weightsVector({ ...base, seat: seat(42) })).toEqual({
      uids: [42],
      weights: [1],
      reason: "winner",
      burn: false,
    });
  });

  it("a seat the cache no longer vouches for burns (stale, or a broken clock); the boundary is trusted", () => {
    const max = DEFAULT_MAX_WINNER_CACHE_AGE_MS;
    const row = [[7, 65535]] as const;
    expect(weightsVector({ ...base, seat: seat(42), cacheAgeMs: max + 1, ownerRow: row })).toMatchObject({
      uids: [0],
      reason: "stale_winner_cache",
      burn: true,
    });
    expect(weightsVector({ ...base, seat: seat(42), cacheAgeMs: max })).toMatchObject({ uids: [42] });
    expect(weightsVector({ ...base, seat: seat(42), cacheAgeMs: Number.NaN })).toMatchObject({ uids: [0] });
    expect(weightsVector({ ...base, seat: seat(42), cacheAgeMs: 10, maxCacheAgeMs: 5 })).toMatchObject({
      reason: "stale_winner_cache",
    });
  });

  it("no seat (none, no uid, never fetched): copies the owner's row, even from a stale cache", () => {
    const ownerRow = [
      [3, 65535],
      [0, 21845],
    ] as const;
    for (const s of [null, seat(null)])
      for (const cacheAgeMs of [1000, Number.POSITIVE_INFINITY])
        expect(weightsVector({ ...base, seat: s, cacheAgeMs, ownerRow })).toMatchObject({
          uids: [0, 3],
          reason: "owner_row",
          burn: false,
        });
  });

  it("burns to the owner's uid only when the owner's row is unreadable", () => {
    const burn = { uids: [0], weights: [1], reason: "no_seat", burn: true };
    expect(weightsVector({ ...base, seat: null })).toEqual(burn);
    expect(weightsVector({ ...base, seat: null, ownerRow: [] })).toEqual(burn);
    expect(weightsVector({ ...base, seat: null, ownerRow: [[5, 0]] })).toEqual(burn);
    // A uid outside the row: numpy raises in upstream's copy, which then burns.
    expect(weightsVector({ ...base, seat: null, ownerRow: [[256, 1]] })).toEqual(burn);
    // An owner outside the subnet's rows (upstream: OWNER_UID out of range).
    expect(weightsVector({ ...base, ownerUid: 300, seat: null, ownerRow: [[1, 1]] })).toMatchObject({
      uids: [300],
      reason: "no_seat",
    });
  });

  it("an owner row that only burns is a burn", () => {
    expect(weightsVector({ ...base, seat: null, ownerRow: [[0, 65535]] })).toMatchObject({
      uids: [0],
      reason: "owner_row",
      burn: true,
    });
  });

  it("never empty: a winner, the owner's row or the owner", () => {
    fc.assert(
      fc.property(
        fc.option(fc.record({ hotkey: fc.constant("5W"), uid: fc.option(fc.integer({ min: 0, max: 255 })) })),
        fc.integer({ min: 0, max: 255 }),
        fc.option(fc.array(fc.tuple(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 65535 }))), {
          nil: undefined,
        }),
        fc.integer({ min: 0, max: 2 * DEFAULT_MAX_WINNER_CACHE_AGE_MS }),
        (s, ownerUid, ownerRow, cacheAgeMs) => {
          const v = weightsVector({ seat: s, ownerUid, ownerRow, cacheAgeMs, neuronCount: 256 });
          expect(v.uids.length).toBeGreaterThan(0);
          expect(v.uids).toHaveLength(v.weights.length);
          for (const w of v.weights) expect(w).toBeGreaterThan(0);
          if (v.reason === "winner") expect(v.uids).toEqual([s!.uid]);
          if (v.reason === "no_seat" || v.reason === "stale_winner_cache") expect(v.uids).toEqual([ownerUid]);
        },
      ),
    );
  });

  it("rejects an owner uid that is not a u16", () => {
    expect(() => weightsVector({ ...base, seat: null, ownerUid: -1 })).toThrow(RangeError);
  });
});

describe("the owner's row, converted as bittensor's metagraph converts it", () => {
  // Expected values computed with numpy 2.4 running bittensor 10's convert_weight_uids_and_vals_to_tensor
  // (float32 row, float32 sum, in-place float32 division, keep w > 0) and then
  // convert_weights_and_uids_for_emit (max-upscale in float64, Python round half to even).
  const emitOf = (row: ReadonlyArray<readonly [number, number]>, n = 256) => {
    const r = ownerRowWeights(row, 0, n)!;
    return convertWeightsForEmit(r.uids, r.weights);
  };

  it("a max-upscaled row comes back as it is stored", () => {
    expect(
      emitOf([
        [3, 65535],
        [74, 21845],
        [200, 1],
      ]),
    ).toEqual({ uids: [3, 74, 200], weights: [65535, 21845, 1] });
    const wide = Array.from({ length: 86 }, (_, k) => [3 * k, 65535 - 3 * k * 97] as const);
    expect(emitOf(wide)).toEqual({ uids: wide.map(([u]) => u), weights: wide.map(([, v]) => v) });
  });

  it("a row that is not max-upscaled is upscaled", () => {
    expect(
      emitOf([
        [0, 40000],
        [1, 40000],
        [2, 13107],
        [5, 7],
      ]),
    ).toEqual({ uids: [0, 1, 2, 5], weights: [65535, 65535, 21474, 11] });
  });

  it("float32 rounding decides the last unit, as in bittensor (exact arithmetic would differ)", () => {
    // Exact: 25720 and 34128; bittensor's float32 path: 25721 and 34127.
    expect(
      emitOf([
        [44, 62308],
        [105, 51614],
        [151, 15013],
        [234, 24454],
        [255, 8714],
      ]),
    ).toEqual({ uids: [44, 105, 151, 234, 255], weights: [65535, 54287, 15791, 25721, 9165] });
    expect(
      emitOf([
        [76, 10439],
        [115, 20046],
        [241, 8433],
      ]),
    ).toEqual({ uids: [76, 115, 241], weights: [34127, 65535, 27569] });
  });

  it("a later entry for the same uid wins; the row's order does not matter otherwise", () => {
    expect(
      ownerRowWeights(
        [
          [2, 5],
          [1, 10],
          [2, 10],
        ],
        0,
        4,
      ),
    ).toEqual({ uids: [1, 2], weights: [0.5, 0.5] });
  });

  it("np.sum's pairwise float32 summation (vectors from numpy; a running float32 sum differs)", () => {
    const arr = (n: number) => Float32Array.from({ length: n }, (_, i) => ((i * 7919) % 1000) * 1.37 + 0.1);
    expect(float32PairwiseSum(arr(5))).toBe(4370.7998046875);
    expect(float32PairwiseSum(arr(64))).toBe(43440.87890625);
    expect(float32PairwiseSum(arr(131))).toBe(89453.546875);
    expect(float32PairwiseSum(arr(1000))).toBe(684415.0);
    expect(float32PairwiseSum(arr(4096))).toBe(2802936.5);
    let running = 0;
    for (const x of arr(131)) running = Math.fround(running + x);
    expect(running).toBe(89453.5390625);
  });
});

describe("takeover: the seat-age decay (INCENTIVE_MECHANISM.md v6.3)", () => {
  it("f(age): 1 through 5 epochs of grace, linear to 0 at 40, 0 after", () => {
    for (const age of [-3, 0, 1, 5]) expect(seatDecayFactor(age)).toBe(1);
    expect(seatDecayFactor(Number.NaN)).toBe(1);
    expect(seatDecayFactor(6)).toBeCloseTo(34 / 35, 15);
    expect(seatDecayFactor(22.5)).toBeCloseTo(0.5, 15);
    expect(seatDecayFactor(39)).toBeCloseTo(1 / 35, 15);
    for (const age of [40, 41, 1000]) expect(seatDecayFactor(age)).toBe(0);
    expect(SEAT_GRACE_EPOCHS).toBe(5);
    expect(SEAT_DECAY_END_EPOCHS).toBe(40);
    expect(TERMINAL_HANDICAP).toBe(0.03);
  });

  it("the bar: w·(1+δ) in grace, crosses w at f = H/(δ+H), w·(1−H) from 40 epochs", () => {
    // w = 10 of 20 (s = 0.5, δ = 3 %).
    expect(takeoverThreshold(10, 20, 27, 5).threshold).toBeCloseTo(10.3, 12);
    expect(takeoverThreshold(10, 20, 27, 22.5).threshold).toBeCloseTo(10, 12);
    expect(takeoverThreshold(10, 20, 27, 40).threshold).toBeCloseTo(9.7, 12);
    expect(takeoverThreshold(10, 20, 27, 400).threshold).toBeCloseTo(9.7, 12);
    // Near the ceiling δ → 0 but H stays: an aged near-max seat falls to a 3 %-lower score.
    expect(takeoverThreshold(20, 20, 27, 40).threshold).toBeCloseTo(19.4, 12);
    expect(takeover(19.41, 20, 20, 27, 40).takesOver).toBe(true);
    expect(takeover(20, 20, 20, 27, 5).takesOver).toBe(false);
  });

  it("exhaustively over ages 0..60 and the score range: the bar follows the formula, falls with age, stays in [w(1−H), w(1+δ)]", () => {
    for (let age = 0; age <= 60; age++)
      for (const s of [0, 0.1, 0.5, 0.7, 0.8, 0.95, 1, 1.2]) {
        const w = s * 20;
        const t = takeoverThreshold(w, 20, 27, age);
        const f = seatDecayFactor(age);
        const delta = takeoverDelta(s, 27);
        expect(t.threshold).toBeCloseTo(w * (1 + delta * f - TERMINAL_HANDICAP * (1 - f)), 12);
        expect(t.threshold).toBeLessThanOrEqual(w * (1 + delta) + 1e-12);
        expect(t.threshold).toBeGreaterThanOrEqual(w * (1 - TERMINAL_HANDICAP) - 1e-12);
        if (age > 0)
          expect(t.threshold).toBeLessThanOrEqual(takeoverThreshold(w, 20, 27, age - 1).threshold + 1e-12);
        // Grace exactly reproduces the age-less bar.
        if (age <= SEAT_GRACE_EPOCHS) expect(t.threshold).toBe(takeoverThreshold(w, 20, 27).threshold);
      }
  });

  it("seatAge counts epochs since the seating, never below 0", () => {
    expect(seatAge(100, 60)).toBe(40);
    expect(seatAge(100, 100)).toBe(0);
    expect(seatAge(100, 120)).toBe(0);
  });

  it("only a different hotkey seating resets the clock", () => {
    expect(seatedEpochAfter({ hotkey: "5A", seatedEpochId: 30 }, { hotkey: "5A" }, 50)).toBe(30);
    expect(seatedEpochAfter({ hotkey: "5A", seatedEpochId: 30 }, { hotkey: "5B" }, 50)).toBe(50);
    expect(seatedEpochAfter(null, { hotkey: "5B" }, 50)).toBe(50);
    expect(seatedEpochAfter({ hotkey: "5A", seatedEpochId: 30 }, null, 50)).toBeNull();
  });

  it("seatDecision: an empty seat to any qualified challenger, a held one above the decayed bar", () => {
    const consensus = (score: number, qualified = true) => ({ score, qualified });
    const i = { epochId: 100, specNumber: 27, maxScore: 20 };
    expect(seatDecision({ ...i, seat: null, consensus: consensus(0.1) }).replaced).toBe(true);
    expect(seatDecision({ ...i, seat: null, consensus: consensus(15, false) }).replaced).toBe(false);
    const seat = (seatedEpochId: number) => ({ hotkey: "5A", score: 10, seatedEpochId });
    expect(seatDecision({ ...i, seat: seat(99), consensus: consensus(10.3) }).replaced).toBe(false);
    expect(seatDecision({ ...i, seat: seat(99), consensus: consensus(10.31) }).replaced).toBe(true);
    expect(seatDecision({ ...i, seat: seat(60), consensus: consensus(9.71) }).replaced).toBe(true);
    expect(seatDecision({ ...i, seat: seat(60), consensus: consensus(9.71, false) }).replaced).toBe(false);
  });
});
