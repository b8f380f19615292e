/**
 * The cap's arithmetic, pure: upstream's admission rule (in doubles), the exact ledger (pico-dollars)
 * and the real-spend bound on top of them (the worst cases of the calls in flight).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  floatPrices,
  MIN_MAX_TOKENS,
  newView,
  reserveFor,
  viewReserve,
  viewRoom,
  viewSettle,
} from "../../src/meter/admission.js";
import { fitsBeside, promptBound, worstCase } from "../../src/meter/exposure.js";
import { loadPriceTable } from "../../src/meter/index.js";
import { type Budget, costOf, newBudget, reserve, settle } from "../../src/meter/ledger.js";
import { usdToPico } from "../../src/meter/money.js";
import { compilePrices, loadAllowlist, type ModelPrice } from "../../src/meter/prices.js";

const table = loadPriceTable();
const PICO = compilePrices(loadAllowlist(), table);
const FLOAT = floatPrices(table);
const MODELS = [...PICO.keys()];
// kimi-k3 in pico-dollars per token.
const KIMI: ModelPrice = { prompt: 1_950_000n, completion: 9_750_000n, cacheRead: 195_000n };

describe("upstream's rule (reserve_for)", () => {
  const kimi = FLOAT.get("kimi-k3")!;

  it("reserves prompt + max_tokens at the completion price when it fits, clamps, refuses under 64", () => {
    const ok = reserveFor(kimi, 1000, 500, 0.3);
    expect(ok).toEqual({
      ok: true,
      reserved: 1000 * 1.95e-6 + 500 * 9.75e-6,
      maxTokens: 500,
      clamped: false,
    });
    const clamped = reserveFor(kimi, 1000, 8192, 1000 * 1.95e-6 + 100.5 * 9.75e-6);
    expect(clamped).toMatchObject({ ok: true, maxTokens: 100, clamped: true });
    expect(reserveFor(kimi, 1000, 10, 1000 * 1.95e-6 + 63.5 * 9.75e-6)).toMatchObject({ ok: false });
    expect(reserveFor(kimi, 1000, 10, 1000 * 1.95e-6)).toMatchObject({ ok: false });
    // A small max_tokens on a nearly empty budget is refused like a large one (fits < 64).
    expect(reserveFor(kimi, 0, 5, 10 * 9.75e-6)).toMatchObject({ ok: false });
  });

  it("reserves max_tokens once, whatever n, as upstream does (n counts in the worst case instead)", () => {
    const price = PICO.get("kimi-k3")!;
    expect(worstCase(price, 100, 1000, 3) - worstCase(price, 100, 1000, 1)).toBe(2000n * price.completion);
  });

  it("property: an accepted reservation fits the room; a clamped max_tokens is the largest that fits", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...MODELS),
        fc.double({ min: 0, max: 2, noNaN: true }),
        fc.integer({ min: 0, max: 200_000 }),
        fc.integer({ min: 1, max: 100_000 }),
        (model, room, tokens, want) => {
          const p = FLOAT.get(model)!;
          const a = reserveFor(p, tokens, want, room);
          if (!a.ok) {
            const fits =
              tokens * p.prompt >= room ? -1 : Math.trunc((room - tokens * p.prompt) / p.completion);
            expect(fits).toBeLessThan(MIN_MAX_TOKENS);
            return;
          }
          expect(a.reserved).toBeLessThanOrEqual(room * (1 + 1e-12));
          expect(a.maxTokens).toBeLessThanOrEqual(want);
          if (a.clamped) expect(tokens * p.prompt + (a.maxTokens + 1) * p.completion).toBeGreaterThan(room);
          else expect(a.maxTokens).toBe(want);
        },
      ),
      { numRuns: 2000 },
    );
  });
});

describe("ledger", () => {
  it("cost = (prompt − cached)·p + cached·c_read + completion·c, cached bounded by prompt", () => {
    expect(costOf(KIMI, { promptTokens: 1000, cachedTokens: 400, completionTokens: 50 })).toBe(
      600n * 1_950_000n + 400n * 195_000n + 50n * 9_750_000n,
    );
    expect(costOf(KIMI, { promptTokens: 10, cachedTokens: 99, completionTokens: 0 })).toBe(10n * 195_000n);
  });

  it("books overshoot without closing anything: a later call is decided by the room alone", () => {
    let b = reserve(newBudget(1000n), 600n);
    const s = settle(b, 600n, 700n);
    b = s.budget;
    expect(s.overshoot).toBe(100n);
    expect(b).toEqual({ cap: 1000n, spent: 700n, reserved: 0n, overshoot: 100n });
    // Upstream: an overshoot leaves the episode open while room remains.
    const v = newView(0.3);
    viewReserve(v, 0.001);
    viewSettle(v, 0.001, 0.0012);
    expect(v.overshoot).toBeCloseTo(0.0002, 12);
    expect(reserveFor(FLOAT.get("kimi-k3")!, 100, 100, viewRoom(v)).ok).toBe(true);
  });
});

describe("the real-spend bound", () => {
  it("the prompt bound is the billed bytes, tools once more, and the template per message", () => {
    expect(promptBound(1000, 200, 3)).toBe(1000 + 200 + 3 * 16 + 64);
  });

  type Arrival = { kind: "arrive"; model: string; est: number; bound: number; want: number; n: number };
  type Settle = { kind: "settle"; pick: number; prompt: number; completion: number };
  const opArb: fc.Arbitrary<Arrival | Settle> = fc.oneof(
    fc.record({
      kind: fc.constant("arrive" as const),
      model: fc.constantFrom(...MODELS),
      est: fc.integer({ min: 16, max: 60_000 }),
      // the true bound may be far above the estimate (digits, symbols: up to 3× and more)
      bound: fc.integer({ min: 16, max: 200_000 }),
      want: fc.integer({ min: 1, max: 16_384 }),
      n: fc.constantFrom(1, 1, 1, 2),
    }),
    fc.record({
      kind: fc.constant("settle" as const),
      pick: fc.nat(),
      prompt: fc.double({ min: 0, max: 1, noNaN: true }),
      completion: fc.double({ min: 0, max: 1, noNaN: true }),
    }),
  );

  it("property: whatever the order, spent ≤ cap + the largest excess of one call over its reservation", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1_000, max: 1_000_000 }),
        fc.array(opArb, { maxLength: 150 }),
        (capMicro, ops) => {
          const capUsd = capMicro / 1e6;
          const view = newView(capUsd);
          let b: Budget = newBudget(usdToPico(capUsd));
          let exposure = 0n;
          type Live = { a: Arrival; reservedF: number; reserved: bigint; worst: bigint; mt: number };
          const inflight: Live[] = [];
          const queue: Arrival[] = [];
          let maxExcess = 0n;
          const attempt = (a: Arrival): boolean => {
            const fp = FLOAT.get(a.model)!;
            const p = PICO.get(a.model)!;
            const d = reserveFor(fp, a.est, a.want, viewRoom(view));
            if (!d.ok) return true; // refused: decided
            const worst = worstCase(p, Math.max(a.bound, a.est), d.maxTokens, a.n);
            if (inflight.length > 0 && !fitsBeside(exposure, worst, b.cap, b.spent)) return false;
            viewReserve(view, d.reserved);
            const reserved = BigInt(a.est) * p.prompt + BigInt(d.maxTokens) * p.completion;
            b = reserve(b, reserved);
            exposure += worst;
            inflight.push({ a, reservedF: d.reserved, reserved, worst, mt: d.maxTokens });
            if (worst - reserved > maxExcess) maxExcess = worst - reserved;
            return true;
          };
          const pump = () => {
            while (queue.length > 0 && attempt(queue[0]!)) queue.shift();
          };
          for (const op of ops) {
            if (op.kind === "arrive") {
              if (queue.length > 0 || !attempt(op)) queue.push(op);
            } else if (inflight.length > 0) {
              const c = inflight.splice(op.pick % inflight.length, 1)[0]!;
              const p = PICO.get(c.a.model)!;
              // The provider bills anything up to the call's true worst case.
              const prompt = Math.floor(Math.max(c.a.bound, c.a.est) * op.prompt);
              const completion = Math.floor(c.mt * c.a.n * op.completion);
              const actual = costOf(p, {
                promptTokens: prompt,
                cachedTokens: 0,
                completionTokens: completion,
              });
              expect(actual <= c.worst).toBe(true);
              b = settle(b, c.reserved, actual).budget;
              viewSettle(view, c.reservedF, Number(actual) / 1e12);
              exposure -= c.worst;
              pump();
            }
            // The guarantee, at every step: spent ≤ cap + one call's excess over its reservation.
            expect(b.spent <= b.cap + maxExcess).toBe(true);
            // And what is in flight fits beside what was spent, unless one call runs alone.
            if (inflight.length > 1) expect(exposure <= b.cap - b.spent).toBe(true);
          }
        },
      ),
      { numRuns: 1000 },
    );
  });
});
