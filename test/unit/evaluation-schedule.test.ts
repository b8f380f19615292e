/** Longest-first dispatch: a permutation, ranked by measured medians when all are known, else by limits. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { longestFirst, median } from "../../src/evaluation/schedule.js";

const hints = (history: Record<string, number[]>, limits: Record<string, number> = {}) => ({
  history: new Map(Object.entries(history)),
  limitsMs: new Map(Object.entries(limits)),
});

describe("longestFirst", () => {
  it("ranks by measured medians when every scenario has one", () => {
    const order = longestFirst(["a", "b", "c"], hints({ a: [10, 11, 90], b: [30], c: [20, 25] }, { a: 900 }));
    // medians a 11, b 30, c 22.5: the limits are ignored
    expect(order).toEqual(["b", "c", "a"]);
  });

  it("falls back to the time limits when any scenario has no history; ties keep the given order", () => {
    const order = longestFirst(["a", "b", "c", "d"], hints({ a: [5], b: [99] }, { a: 720, b: 720, c: 900 }));
    expect(order).toEqual(["c", "a", "b", "d"]);
  });

  it("median ignores what is not a duration", () => {
    expect(median([])).toBeUndefined();
    expect(median([3, Number.NaN, -1, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
  });

  it("property: a permutation of its input; measured medians non-increasing; equal keys in input order", () => {
    const names = fc.uniqueArray(fc.stringMatching(/^[a-z]{1,6}$/), { minLength: 0, maxLength: 12 });
    fc.assert(
      fc.property(
        names,
        fc.array(fc.array(fc.integer({ min: 0, max: 1_000 }), { minLength: 1, maxLength: 5 }), {
          minLength: 12,
          maxLength: 12,
        }),
        (ss, hs) => {
          const history = Object.fromEntries(ss.map((s, i) => [s, hs[i]!]));
          const order = longestFirst(ss, hints(history));
          expect([...order].sort()).toEqual([...ss].sort());
          const keys = order.map((s) => median(history[s]!)!);
          for (let i = 1; i < keys.length; i++) {
            expect(keys[i]!).toBeLessThanOrEqual(keys[i - 1]!);
            if (keys[i] === keys[i - 1])
              expect(ss.indexOf(order[i]!)).toBeGreaterThan(ss.indexOf(order[i - 1]!));
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
