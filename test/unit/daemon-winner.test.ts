/**
 * The winner cross-checks (src/daemon/winner-check.ts): the score check as upstream's
 * winner_state.py `derive_winner_state` runs it (equal weights; plain mean before spec 16,
 * Winsorized from 16), and the decision check that reaches the platform's replaced/held on the
 * same votes, seat and seat age (INCENTIVE_MECHANISM.md v6.3).
 */
import { describe, expect, it } from "vitest";
import {
  crossCheckSeat,
  crossCheckWinner,
  DIVERGENCE_TOLERANCE,
  type SeatClock,
  seatClockOf,
} from "../../src/daemon/index.js";
import { type WinnerCurrent, winnerCurrentSchema } from "../../src/platform/index.js";

const HASH = "ab".repeat(32);
type VoteRow = readonly [stake: number | null, score: number | null, qualified: boolean, rejected?: boolean];

function answer(over: {
  epoch?: number;
  seat?: { hotkey: string; score: number | null; since?: number } | null;
  challenger?: string;
  replaced?: boolean;
  spec?: number | null;
  votes: readonly VoteRow[];
}): WinnerCurrent {
  const seat = over.seat === undefined ? { hotkey: "5Winner", score: 8, since: 41 } : over.seat;
  return winnerCurrentSchema.parse({
    success: true,
    winner: seat && {
      hotkey: seat.hotkey,
      uid: 3,
      pack_hash: HASH,
      score: seat.score,
      since_epoch_id: seat.since ?? 41,
    },
    finalized_epoch: {
      challenge_epoch_id: over.epoch ?? 41,
      challenger_hotkey: over.challenger ?? "5Winner",
      challenger_pack_hash: HASH,
      outcome: over.replaced === false ? "winner_held" : "winner_replaced",
      finalized_at: "2026-01-01T00:00:00Z",
      spec_number: over.spec === undefined ? 27 : over.spec,
    },
    submissions: over.votes.map(([stake, score, qualified, rejected], i) => ({
      validator_hotkey: `5V${i}`,
      validator_stake: stake,
      challenger_pack_hash: HASH,
      challenger_score: score,
      challenger_qualified: qualified,
      challenger_rejected: rejected ?? false,
    })),
  });
}

const equal = { stakeWeighted: false };
const SIX = [3, 8, 8, 8, 8, 9].map((s) => [100, s, true] as const);

describe("crossCheckWinner (winner_state.py derive_winner_state)", () => {
  it("from spec 16: the Winsorized mean ([3,8,8,8,8,9] → 8.0) agrees; the plain mean 7.333… diverges", () => {
    expect(crossCheckWinner(answer({ seat: { hotkey: "5W", score: 8 }, votes: SIX }), equal)).toEqual({
      kind: "agree",
      epochId: 41,
      local: 8,
      server: 8,
    });
    const r = crossCheckWinner(answer({ seat: { hotkey: "5W", score: 22 / 3 }, votes: SIX }), equal);
    expect(r).toMatchObject({ kind: "diverge", local: 8 });
    if (r.kind === "diverge") expect(r.delta).toBeCloseTo(8 - 22 / 3, 9);
  });

  it("before spec 16: the plain mean, Winsorizing never (upstream's winsorize=False)", () => {
    expect(
      crossCheckWinner(answer({ spec: 15, seat: { hotkey: "5W", score: 22 / 3 }, votes: SIX }), equal),
    ).toMatchObject({ kind: "agree", local: 22 / 3 });
    expect(
      crossCheckWinner(answer({ spec: 15, seat: { hotkey: "5W", score: 8 }, votes: SIX }), equal),
    ).toMatchObject({ kind: "diverge" });
    // An epoch the server recorded no spec for is pre-noise-aware too.
    expect(
      crossCheckWinner(answer({ spec: null, seat: { hotkey: "5W", score: 22 / 3 }, votes: SIX }), equal),
    ).toMatchObject({ kind: "agree" });
  });

  it("tolerates exactly the documented tolerance and no more", () => {
    const votes = [[1, 6, true] as const, [1, 6, true] as const];
    const at = (score: number) =>
      crossCheckWinner(answer({ seat: { hotkey: "5W", score }, votes }), equal).kind;
    expect(at(6 + DIVERGENCE_TOLERANCE)).toBe("agree");
    expect(at(6.0101)).toBe("diverge");
  });

  it("drops rejected votes and votes without stake; stake decides eligibility, not weight", () => {
    const wc = answer({
      seat: { hotkey: "5W", score: 6 },
      votes: [
        [10, 6, true],
        [10, 6, true],
        [null, 1, true],
        [0, 1, true],
        [10, 1, true, true],
      ],
    });
    expect(crossCheckWinner(wc, equal)).toMatchObject({ kind: "agree", local: 6 });
  });

  it("a qualified vote without a score counts in the head count and adds nothing to the mean", () => {
    // 2 of 3 qualified (one without a score): qualified, consensus = 6 from the one score.
    const wc = answer({
      seat: { hotkey: "5W", score: 6 },
      votes: [
        [1, 6, true],
        [1, null, true],
        [1, 0, false],
      ],
    });
    expect(crossCheckWinner(wc, equal)).toMatchObject({ kind: "agree", local: 6 });
  });

  it("plain mean by default (the platform's equal weighting); stake weighting only when asked", () => {
    const heavy = answer({
      seat: { hotkey: "5W", score: 5 },
      votes: [
        [9, 2, true],
        [1, 8, true],
        [1, 5, true],
      ],
    });
    expect(crossCheckWinner(heavy, equal)).toMatchObject({ kind: "agree", local: 5 });
    expect(crossCheckWinner(heavy, { stakeWeighted: true })).toMatchObject({ kind: "diverge" });
  });

  it("reads 0 when no vote qualified (as upstream), so a positive seat score diverges", () => {
    const wc = answer({
      seat: { hotkey: "5W", score: 3 },
      votes: [
        [1, 0, false],
        [1, 0, false],
      ],
    });
    expect(crossCheckWinner(wc, equal)).toMatchObject({ kind: "diverge", local: 0 });
  });

  it("is not applicable when the seat was held, absent, unscored, or nobody voted", () => {
    expect(crossCheckWinner(answer({ votes: SIX, replaced: false }), equal)).toEqual({
      kind: "not_applicable",
      reason: "winner_held",
    });
    expect(
      crossCheckWinner(answer({ votes: SIX, seat: { hotkey: "5W", score: null } }), equal),
    ).toMatchObject({
      reason: "no_server_score",
    });
    expect(crossCheckWinner(answer({ votes: [] }), equal)).toMatchObject({ reason: "no_votes" });
    const cold = winnerCurrentSchema.parse({ winner: null, finalized_epoch: null, submissions: [] });
    expect(crossCheckWinner(cold, { stakeWeighted: true })).toMatchObject({ reason: "no_seat" });
  });
});

describe("seatClockOf: only a different hotkey seating resets the clock", () => {
  it("a first answer takes the platform's since_epoch_id", () => {
    expect(
      seatClockOf(answer({ epoch: 50, seat: { hotkey: "5A", score: 8, since: 44 }, votes: [] }), undefined),
    ).toEqual({
      seat: { hotkey: "5A", score: 8, seatedEpochId: 44 },
      asOfEpochId: 50,
    });
  });

  it("the same hotkey keeps its clock when its own better pack raises the score", () => {
    const before: SeatClock = { seat: { hotkey: "5A", score: 8, seatedEpochId: 30 }, asOfEpochId: 49 };
    const after = seatClockOf(
      answer({ epoch: 50, seat: { hotkey: "5A", score: 9, since: 50 }, votes: [] }),
      before,
    );
    expect(after).toEqual({ seat: { hotkey: "5A", score: 9, seatedEpochId: 30 }, asOfEpochId: 50 });
  });

  it("a different hotkey seated at the epoch we saw it happen starts at that epoch", () => {
    const before: SeatClock = { seat: { hotkey: "5A", score: 8, seatedEpochId: 30 }, asOfEpochId: 49 };
    expect(
      seatClockOf(answer({ epoch: 50, seat: { hotkey: "5B", score: 9, since: 1 }, votes: [] }), before).seat,
    ).toEqual({ hotkey: "5B", score: 9, seatedEpochId: 50 });
    // Epochs missed in between: the platform's since_epoch_id is all we have.
    const stale: SeatClock = { ...before, asOfEpochId: 45 };
    expect(
      seatClockOf(answer({ epoch: 50, seat: { hotkey: "5B", score: 9, since: 48 }, votes: [] }), stale).seat
        ?.seatedEpochId,
    ).toBe(48);
  });

  it("an empty seat has no clock", () => {
    expect(seatClockOf(answer({ epoch: 7, seat: null, replaced: false, votes: [] }), undefined)).toEqual({
      seat: null,
      asOfEpochId: 7,
    });
  });
});

describe("crossCheckSeat: the platform's replaced/held on the same inputs", () => {
  // Spec 27 as the subnet runs it: 20 scenarios, a score ceiling of 20.
  const MAX = { maxScoreOf: (spec: number) => (spec === 27 ? 20 : undefined) };
  const votes = (score: number, qualified = true): VoteRow[] => [
    [1, score, qualified],
    [1, score, qualified],
    [1, score, qualified],
  ];
  const incumbent = (seatedEpochId: number, score = 10): SeatClock => ({
    seat: { hotkey: "5Inc", score, seatedEpochId },
    asOfEpochId: 99,
  });
  const replacedBy = (score: number) =>
    answer({
      epoch: 100,
      challenger: "5Ch",
      seat: { hotkey: "5Ch", score, since: 100 },
      votes: votes(score),
    });
  const heldAgainst = (score: number, qualified = true) =>
    answer({
      epoch: 100,
      challenger: "5Ch",
      replaced: false,
      seat: { hotkey: "5Inc", score: 10, since: 90 },
      votes: votes(score, qualified),
    });

  it("a fresh seat (age ≤ 5) keeps the full 3 % premium: 10.30 holds, 10.31 replaces", () => {
    // s = 10/20 = 0.5 → δ = 3 %: bar 10.3 (strict >).
    expect(crossCheckSeat(heldAgainst(10.3), incumbent(95), MAX)).toMatchObject({
      kind: "agree",
      replaced: false,
      ageEpochs: 5,
    });
    expect(crossCheckSeat(replacedBy(10.31), incumbent(95), MAX)).toMatchObject({
      kind: "agree",
      replaced: true,
    });
    // The platform seating 10.30 against a fresh seat is a divergence.
    expect(crossCheckSeat(replacedBy(10.3), incumbent(95), MAX)).toMatchObject({
      kind: "diverge",
      replaced: true,
      local: { replaced: false },
    });
  });

  it("a seat 40 epochs old is taken by a challenger up to 3 % under it (9.71 > 9.70)", () => {
    expect(crossCheckSeat(replacedBy(9.71), incumbent(60), MAX)).toMatchObject({
      kind: "agree",
      ageEpochs: 40,
      local: { replaced: true, bar: { decay: 0 } },
    });
    expect(crossCheckSeat(heldAgainst(9.7), incumbent(60), MAX)).toMatchObject({ kind: "agree" });
    // The same 9.71 against a fresh seat: the platform holding it is what we expect.
    expect(crossCheckSeat(heldAgainst(9.71), incumbent(99), MAX)).toMatchObject({ kind: "agree" });
  });

  it("mid-decay (age 22.5 crosses the real score): at age 22 a tie is below the bar, at 23 above it", () => {
    expect(crossCheckSeat(heldAgainst(10), incumbent(78), MAX)).toMatchObject({
      kind: "agree",
      ageEpochs: 22,
    });
    expect(crossCheckSeat(replacedBy(10), incumbent(77), MAX)).toMatchObject({
      kind: "agree",
      ageEpochs: 23,
    });
  });

  it("an unqualified challenger never takes the seat, whatever its score", () => {
    const unqualified = answer({
      epoch: 100,
      replaced: true,
      seat: { hotkey: "5Ch", score: 19, since: 100 },
      votes: votes(19, false),
    });
    expect(crossCheckSeat(unqualified, incumbent(10), MAX)).toMatchObject({ kind: "diverge" });
    expect(crossCheckSeat(heldAgainst(19, false), incumbent(10), MAX)).toMatchObject({ kind: "agree" });
  });

  it("an empty seat goes to any qualified challenger; holding it empty is right only without one", () => {
    const cold: SeatClock = { seat: null, asOfEpochId: null };
    expect(crossCheckSeat(replacedBy(0.5), cold, MAX)).toMatchObject({ kind: "agree", local: { bar: null } });
    const stillEmpty = answer({ epoch: 100, replaced: false, seat: null, votes: votes(3, false) });
    expect(crossCheckSeat(stillEmpty, cold, MAX)).toMatchObject({ kind: "agree" });
    const emptyButQualified = answer({ epoch: 100, replaced: false, seat: null, votes: votes(3) });
    expect(crossCheckSeat(emptyButQualified, cold, MAX)).toMatchObject({ kind: "diverge" });
  });

  it("the held seat's age runs from its seating, not from its last self-update", () => {
    // The seat's hotkey re-submitted at 95 (since_epoch_id 95 on the wire), but we saw it seated at 60.
    const clock: SeatClock = { seat: { hotkey: "5Inc", score: 10, seatedEpochId: 60 }, asOfEpochId: 99 };
    const held = answer({
      epoch: 100,
      replaced: false,
      seat: { hotkey: "5Inc", score: 10, since: 95 },
      votes: votes(9.71),
    });
    // Age 40 → a 9.71 challenger should have taken it: the platform holding it diverges.
    expect(crossCheckSeat(held, clock, MAX)).toMatchObject({ kind: "diverge", ageEpochs: 40 });
  });

  it("is not applicable when what the challenger faced is unknown", () => {
    expect(crossCheckSeat(replacedBy(11), undefined, MAX)).toMatchObject({ reason: "seat_before_unknown" });
    expect(crossCheckSeat(replacedBy(11), { ...incumbent(95), asOfEpochId: 97 }, MAX)).toMatchObject({
      reason: "seat_before_unknown",
    });
    expect(
      crossCheckSeat(answer({ epoch: 100, spec: 26, votes: votes(11) }), incumbent(95), MAX),
    ).toMatchObject({ reason: "unknown_max_score" });
    expect(
      crossCheckSeat(answer({ epoch: 100, spec: null, votes: votes(11) }), incumbent(95), MAX),
    ).toMatchObject({
      reason: "no_spec",
    });
    expect(crossCheckSeat(answer({ epoch: 100, votes: [] }), incumbent(95), MAX)).toMatchObject({
      reason: "no_votes",
    });
    const cold = winnerCurrentSchema.parse({ winner: null, finalized_epoch: null, submissions: [] });
    expect(crossCheckSeat(cold, undefined, MAX)).toMatchObject({ reason: "no_finalized_epoch" });
  });
});
