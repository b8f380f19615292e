import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type Budget,
  costOf,
  MIN_MAX_TOKENS,
  newBudget,
  planReservation,
  reserve,
  room,
  settle,
} from "../../src/meter/ledger.js";
import type { ModelPrice } from "../../src/meter/prices.js";

const priceArb: fc.Arbitrary<ModelPrice> = fc.record({
  prompt: fc.bigInt({ min: 0n, max: 10_000_000n }),
  completion: fc.bigInt({ min: 1n, max: 10_000_000n }),
  cacheRead: fc.bigInt({ min: 0n, max: 10_000_000n }),
});

// kimi-k3 in pico-dollars per token.
const KIMI: ModelPrice = { prompt: 1_950_000n, completion: 9_750_000n, cacheRead: 195_000n };

describe("ledger: reservation", () => {
  it("reserves prompt + max_tokens at the completion price when it fits", () => {
    const b = newBudget(300_000_000_000n); // $0.30
    const r = planReservation(b, { price: KIMI, promptTokens: 1000, wantMaxTokens: 500, choices: 1 });
    expect(r).toEqual({
      ok: true,
      promptCost: 1_950_000_000n,
      reserved: 1_950_000_000n + 500n * 9_750_000n,
      maxTokens: 500,
      clamped: false,
    });
  });

  it("clamps to the largest max_tokens that fits and refuses under 64", () => {
    // room for the prompt plus exactly 100 completion tokens
    const cap = 1000n * KIMI.prompt + 100n * KIMI.completion;
    const r = planReservation(newBudget(cap), {
      price: KIMI,
      promptTokens: 1000,
      wantMaxTokens: 8192,
      choices: 1,
    });
    expect(r).toMatchObject({ ok: true, maxTokens: 100, clamped: true, reserved: cap });
    const tight = planReservation(newBudget(1000n * KIMI.prompt + 63n * KIMI.completion + 5n), {
      price: KIMI,
      promptTokens: 1000,
      wantMaxTokens: 10,
      choices: 1,
    });
    expect(tight).toMatchObject({ ok: false, reason: "cap", fits: 63 });
    const promptTooBig = planReservation(newBudget(999n * KIMI.prompt), {
      price: KIMI,
      promptTokens: 1000,
      wantMaxTokens: 10,
      choices: 1,
    });
    expect(promptTooBig).toMatchObject({ ok: false, reason: "cap" });
  });

  it("a small max_tokens with ample room is neither clamped nor refused", () => {
    const r = planReservation(newBudget(10n ** 12n), {
      price: KIMI,
      promptTokens: 10,
      wantMaxTokens: 5,
      choices: 1,
    });
    expect(r).toMatchObject({ ok: true, maxTokens: 5, clamped: false });
  });

  it("n choices multiply the completion reservation", () => {
    const r = planReservation(newBudget(10n ** 12n), {
      price: KIMI,
      promptTokens: 0,
      wantMaxTokens: 100,
      choices: 3,
    });
    expect(r).toMatchObject({ ok: true, reserved: 300n * KIMI.completion });
  });

  it("property: an accepted reservation fits, and a clamped max_tokens is the largest that fits", () => {
    fc.assert(
      fc.property(
        priceArb,
        fc.bigInt({ min: 0n, max: 10n ** 13n }),
        fc.integer({ min: 0, max: 200_000 }),
        fc.integer({ min: 1, max: 100_000 }),
        fc.integer({ min: 1, max: 4 }),
        (price, cap, promptTokens, want, choices) => {
          const b = newBudget(cap);
          const r = planReservation(b, { price, promptTokens, wantMaxTokens: want, choices });
          const per = price.completion * BigInt(choices);
          const promptCost = BigInt(promptTokens) * price.prompt;
          if (r.ok) {
            expect(r.reserved).toBe(promptCost + BigInt(r.maxTokens) * per);
            expect(r.reserved <= room(b)).toBe(true);
            expect(r.maxTokens).toBeGreaterThanOrEqual(Math.min(want, MIN_MAX_TOKENS));
            expect(r.maxTokens <= want).toBe(true);
            if (r.clamped) {
              expect(r.maxTokens < want).toBe(true);
              expect(promptCost + BigInt(r.maxTokens + 1) * per > room(b)).toBe(true);
            } else expect(r.maxTokens).toBe(want);
          } else {
            expect(r.reason).toBe("cap");
            const fits = promptCost >= room(b) ? -1n : (room(b) - promptCost) / per;
            expect(fits < BigInt(MIN_MAX_TOKENS)).toBe(true);
          }
        },
      ),
      { numRuns: 2000 },
    );
  });
});

describe("ledger: settlement and the cap", () => {
  it("books overshoot and closes the budget", () => {
    let b = reserve(newBudget(1000n), 600n);
    const s = settle(b, 600n, 700n);
    b = s.budget;
    expect(s.overshoot).toBe(100n);
    expect(b).toEqual({ cap: 1000n, spent: 700n, reserved: 0n, overshoot: 100n, closed: true });
    expect(planReservation(b, { price: KIMI, promptTokens: 0, wantMaxTokens: 64, choices: 1 })).toMatchObject(
      {
        ok: false,
        reason: "closed",
      },
    );
  });

  it("cost = (prompt − cached)·p + cached·c_read + completion·c, cached bounded by prompt", () => {
    expect(costOf(KIMI, { promptTokens: 1000, cachedTokens: 400, completionTokens: 50 })).toBe(
      600n * 1_950_000n + 400n * 195_000n + 50n * 9_750_000n,
    );
    expect(costOf(KIMI, { promptTokens: 10, cachedTokens: 99, completionTokens: 0 })).toBe(10n * 195_000n);
  });

  type Op =
    | { kind: "reserve"; prompt: number; want: number; choices: number }
    | { kind: "settle"; pick: number; factor: number };
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    fc.record({
      kind: fc.constant("reserve" as const),
      prompt: fc.integer({ min: 0, max: 50_000 }),
      want: fc.integer({ min: 1, max: 20_000 }),
      choices: fc.integer({ min: 1, max: 2 }),
    }),
    fc.record({
      kind: fc.constant("settle" as const),
      pick: fc.nat(),
      // mostly at or under the reservation, sometimes over (a low prompt estimate)
      factor: fc.oneof(
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 1, max: 3, noNaN: true }),
      ),
    }),
  );

  it("property: for any interleaving of reserve/settle, spent ≤ cap + overshoot and reserved is the sum in flight", () => {
    fc.assert(
      fc.property(
        priceArb,
        fc.bigInt({ min: 0n, max: 10n ** 12n }),
        fc.array(opArb, { maxLength: 200 }),
        (price, cap, ops) => {
          let b: Budget = newBudget(cap);
          const inflight: bigint[] = [];
          for (const op of ops) {
            if (op.kind === "reserve") {
              const r = planReservation(b, {
                price,
                promptTokens: op.prompt,
                wantMaxTokens: op.want,
                choices: op.choices,
              });
              if (r.ok) {
                b = reserve(b, r.reserved);
                inflight.push(r.reserved);
              }
            } else if (inflight.length > 0) {
              const k = op.pick % inflight.length;
              const reserved = inflight.splice(k, 1)[0]!;
              const actual = BigInt(Math.floor(Number(reserved) * op.factor));
              b = settle(b, reserved, actual).budget;
            }
            const sumInflight = inflight.reduce((x, y) => x + y, 0n);
            expect(b.reserved).toBe(sumInflight);
            expect(b.spent <= b.cap + b.overshoot).toBe(true);
            expect(b.closed).toBe(b.overshoot > 0n);
            if (b.overshoot === 0n) expect(b.spent + b.reserved <= b.cap).toBe(true);
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});
