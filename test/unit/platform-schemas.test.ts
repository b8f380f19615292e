import { describe, expect, it } from "vitest";
import {
  assessEpoch,
  budgetLengthBlocks,
  classifyConflict,
  epochCurrentSchema,
  type ScoreOutcome,
  scoreOutcomeOf,
  scoreVerdictSchema,
  stillCurrent,
  winnerCurrentSchema,
} from "../../src/platform/index.js";
import { EPOCH_HIDDEN, WINNER_CURRENT } from "../fixtures/platform-api.js";

describe("response schemas accept the documented shapes", () => {
  it("epoch/current without pack URLs: the URL is null, the advisory winner's strings become numbers", () => {
    const r = epochCurrentSchema.parse(EPOCH_HIDDEN);
    expect(r.epoch?.challenge_epoch_id).toBe(1234);
    expect(r.epoch?.challenger_pack_url).toBeNull();
    expect(r.epoch?.spec_number).toBeNull();
    expect(r.winner?.score).toBe(0.92);
    expect(r.winner?.since_epoch_id).toBe(100);
    expect(r.elapsed_blocks).toBe(75);
  });

  it("epoch/current with the URL unlocked; pack hash normalised to lowercase", () => {
    const r = epochCurrentSchema.parse({
      ...EPOCH_HIDDEN,
      epoch: {
        ...EPOCH_HIDDEN.epoch,
        challenger_pack_url: "https://x/pack.json",
        challenger_pack_hash: "ABCDEF",
        spec_number: 3,
      },
    });
    expect(r.epoch?.challenger_pack_url).toBe("https://x/pack.json");
    expect(r.epoch?.challenger_pack_hash).toBe("abcdef");
    expect(r.epoch?.spec_number).toBe(3);
  });

  it("a malformed advisory winner block degrades to null instead of costing the epoch", () => {
    const r = epochCurrentSchema.parse({ ...EPOCH_HIDDEN, winner: { uid: "x" } });
    expect(r.winner).toBeNull();
    expect(r.epoch?.challenge_epoch_id).toBe(1234);
  });

  it("chain fields may be null when the server's RPC is down", () => {
    const r = epochCurrentSchema.parse({
      ...EPOCH_HIDDEN,
      current_block: null,
      elapsed_blocks: null,
      remaining_blocks: null,
    });
    expect(r.current_block).toBeNull();
  });

  it("winner/current: the documented example, and cold start", () => {
    const r = winnerCurrentSchema.parse(WINNER_CURRENT);
    expect(r.winner?.uid).toBe(1);
    expect(r.finalized_epoch?.winner_replaced).toBe(false);
    expect(r.submissions[0]?.validator_stake).toBe(18234.5);
    expect(r.submissions[0]?.winner_score).toBeNull();
    const cold = winnerCurrentSchema.parse({
      success: true,
      winner: null,
      finalized_epoch: null,
      submissions: [],
    });
    expect(cold).toEqual({ success: true, winner: null, finalized_epoch: null, submissions: [] });
    expect(
      winnerCurrentSchema.parse({ winner: null, finalized_epoch: null, submissions: null }).submissions,
    ).toEqual([]);
  });

  it("winner_replaced is derived from outcome when an older server omits it", () => {
    const { winner_replaced: _, ...fe } = WINNER_CURRENT.finalized_epoch;
    const r = winnerCurrentSchema.parse({
      ...WINNER_CURRENT,
      finalized_epoch: { ...fe, outcome: "winner_replaced" },
    });
    expect(r.finalized_epoch?.winner_replaced).toBe(true);
  });

  it("parsing is idempotent (the winner cache stores the parsed form and parses it again)", () => {
    const once = winnerCurrentSchema.parse(WINNER_CURRENT);
    expect(winnerCurrentSchema.parse(JSON.parse(JSON.stringify(once)))).toEqual(once);
  });

  it.each([
    [
      "epoch id not a number",
      { ...EPOCH_HIDDEN, epoch: { ...EPOCH_HIDDEN.epoch, challenge_epoch_id: "abc" } },
    ],
    ["epoch id negative", { ...EPOCH_HIDDEN, epoch: { ...EPOCH_HIDDEN.epoch, challenge_epoch_id: -1 } }],
    [
      "challenger hotkey missing",
      { ...EPOCH_HIDDEN, epoch: { ...EPOCH_HIDDEN.epoch, challenger_hotkey: undefined } },
    ],
    [
      "epoch id a float string",
      { ...EPOCH_HIDDEN, epoch: { ...EPOCH_HIDDEN.epoch, challenge_epoch_id: "12.5" } },
    ],
    [
      "epoch id missing",
      { ...EPOCH_HIDDEN, epoch: { ...EPOCH_HIDDEN.epoch, challenge_epoch_id: undefined } },
    ],
    ["epoch is a list", { ...EPOCH_HIDDEN, epoch: [] }],
  ])("epoch/current rejects: %s", (_, body) => {
    expect(epochCurrentSchema.safeParse(body).success).toBe(false);
  });

  it.each([
    ["submissions not a list", { ...WINNER_CURRENT, submissions: {} }],
    [
      "stake as words",
      { ...WINNER_CURRENT, submissions: [{ ...WINNER_CURRENT.submissions[0], validator_stake: "lots" }] },
    ],
    [
      "qualified as a string",
      { ...WINNER_CURRENT, submissions: [{ ...WINNER_CURRENT.submissions[0], challenger_qualified: "yes" }] },
    ],
    ["winner without hotkey", { ...WINNER_CURRENT, winner: { uid: 1 } }],
    ["finalized epoch without outcome", { ...WINNER_CURRENT, finalized_epoch: { challenge_epoch_id: 1 } }],
  ])("winner/current rejects: %s", (_, body) => {
    expect(winnerCurrentSchema.safeParse(body).success).toBe(false);
  });
});

describe("score verdicts", () => {
  const base = {
    spec_number: 1,
    challenger: { score: 2.5, qualified: true, scenario_results: { a: { score: 1 } } },
  };

  it("accepts a normal verdict and a rejection verdict", () => {
    expect(scoreVerdictSchema.safeParse(base).success).toBe(true);
    expect(
      scoreVerdictSchema.safeParse({
        spec_number: 1,
        challenger: { score: 0, qualified: false, rejected: true, rejection_detail: "pack_verify_failed" },
      }).success,
    ).toBe(true);
  });

  it.each([
    ["rejected with a score", { spec_number: 1, challenger: { score: 1, qualified: false, rejected: true } }],
    ["rejected but qualified", { spec_number: 1, challenger: { score: 0, qualified: true, rejected: true } }],
    ["score over 100", { spec_number: 1, challenger: { score: 101, qualified: true } }],
    ["negative score", { spec_number: 1, challenger: { score: -1, qualified: false } }],
    ["no spec number", { challenger: { score: 1, qualified: true } }],
    ["empty model name", { ...base, llm_model: "" }],
  ])("refuses %s (the server would 400 it)", (_, v) => {
    expect(scoreVerdictSchema.safeParse(v).success).toBe(false);
  });
});

describe("score outcome classification", () => {
  const res = (status: number, body: unknown) => ({
    status,
    body: Buffer.from(typeof body === "string" ? body : JSON.stringify(body)),
  });
  const kind = (o: ScoreOutcome) =>
    o.kind === "rejected" || o.kind === "retryable" ? `${o.kind}:${o.code}` : o.kind;

  it.each<[number, unknown, string]>([
    [200, { success: true }, "delivered"],
    // trajrl_api.py submit_challenge_score: True on 200 only; anything else is sent again.
    [201, { success: true }, "retryable:platform_unexpected_status"],
    [202, "", "retryable:platform_unexpected_status"],
    [204, "", "retryable:platform_unexpected_status"],
    [409, { success: false, error: "epoch is finalized" }, "finalized"],
    [409, { success: false, error: "eval window closed" }, "finalized"],
    [409, { success: false, error: "Epoch is not in progress" }, "finalized"],
    [409, { success: false, error: "duplicate" }, "duplicate"],
    [409, { error: "Score already submitted for this epoch" }, "duplicate"],
    [409, { error: "winner pack hash mismatch" }, "rejected:platform_conflict"],
    [503, "<html>Service Unavailable</html>", "retryable:platform_http_error"],
    [500, { error: "Internal server error" }, "retryable:platform_http_error"],
    [429, { error: "slow down" }, "retryable:platform_http_error"],
    [408, "", "retryable:platform_http_error"],
    [400, { error: "challenger.score is required" }, "rejected:platform_rejected"],
    [401, { error: "Invalid signature" }, "rejected:platform_unauthorized"],
    [401, { error: "Timestamp drift exceeds 5 minutes" }, "retryable:platform_clock_skew"],
    [403, { error: "Hotkey is not a registered validator on-chain" }, "rejected:platform_unauthorized"],
    [404, { error: "not found" }, "rejected:platform_epoch_not_found"],
  ])("HTTP %i %j → %s", (status, body, expected) => {
    expect(kind(scoreOutcomeOf(res(status, body)))).toBe(expected);
  });

  it("conflict texts: finalized wins over 'already'", () => {
    expect(classifyConflict("epoch already finalized")).toBe("finalized");
    expect(classifyConflict("something else")).toBe("conflict");
  });
});

// upstream: trajrl_api.py fetch_current_epoch `_opt_int`, validator.py `_commitment_from_epoch`,
// `_epoch_has_budget`, sandbox_harness.py `resolve_eval_spec` (int() then fall back).
describe("epoch/current read with int() and a null fallback, as upstream", () => {
  const epoch = (over: Record<string, unknown>, top: Record<string, unknown> = {}) =>
    epochCurrentSchema.parse({ ...EPOCH_HIDDEN, ...top, epoch: { ...EPOCH_HIDDEN.epoch, ...over } });

  it.each<[string, unknown, number | null]>([
    ["an int", 7, 7],
    ["digits", "7", 7],
    ["padded, signed, underscored digits", " +7_0 ", 70],
    ["a float (truncated)", 7.9, 7],
    ["true", true, 1],
    ["a float string", "7.5", null],
    ["words", "seven", null],
    ["null", null, null],
    ["missing", undefined, null],
    ["an object", { uid: 7 }, null],
  ])("challenger_uid as %s → %s", (_, uid, expected) => {
    expect(epoch({ challenger_uid: uid }).epoch?.challenger_uid).toBe(expected);
  });

  it("block numbers and the chain view as text or garbage never cost the epoch", () => {
    const r = epoch(
      { start_block: "5300000", end_block: null, epoch_length_blocks: "150", created_at: 5, status: 1 },
      { current_block: "5300075", elapsed_blocks: "75", remaining_blocks: [] },
    );
    expect(r.epoch).toMatchObject({
      challenge_epoch_id: 1234,
      start_block: 5300000,
      end_block: null,
      epoch_length_blocks: 150,
      created_at: null,
      status: null,
    });
    expect([r.current_block, r.elapsed_blocks, r.remaining_blocks]).toEqual([5300075, 75, null]);
    expect(epoch({ challenge_epoch_id: "1234" }).epoch?.challenge_epoch_id).toBe(1234);
  });

  it("spec_number: int() or null (the resolver then falls back to the local spec)", () => {
    expect(epoch({ spec_number: "27" }).epoch?.spec_number).toBe(27);
    for (const v of ["not-a-spec", null, undefined, [27]])
      expect(epoch({ spec_number: v }).epoch?.spec_number).toBeNull();
  });

  // tests/test_validator.py TestEpochBudgetGate: 150-block epoch at 8000000.
  const gate = (epochOver: Record<string, unknown>, elapsed: unknown) =>
    assessEpoch(
      epochCurrentSchema.parse({
        epoch: {
          challenge_epoch_id: 17,
          challenger_hotkey: "5G",
          challenger_pack_hash: "f".repeat(64),
          challenger_pack_url: "https://x/p.json",
          start_block: 8000000,
          end_block: 8000150,
          epoch_length_blocks: 150,
          status: "in_progress",
          ...epochOver,
        },
        elapsed_blocks: elapsed,
        remaining_blocks: null,
      }),
      () => false,
    ).evaluate;
  it.each<[string, Record<string, unknown>, unknown, boolean]>([
    ["proceeds when under threshold (30/150)", {}, 30, true],
    ["skips when past threshold (100/150)", {}, 100, false],
    ["skips at exactly half plus one (76/150)", {}, 76, false],
    ["proceeds at exactly half (75/150: the gate is strict)", {}, 75, true],
    ["bypass when elapsed_blocks is null", {}, null, true],
    ["falls back to end - start when the length is 0", { epoch_length_blocks: 0 }, 30, true],
    ["falls back to end - start (100/150 skips)", { epoch_length_blocks: 0 }, 100, false],
    // Beyond upstream's tests, the same code on values as text:
    ["elapsed as text is int()-ed", {}, "100", false],
    ["a length as text is int()-ed", { epoch_length_blocks: "150" }, 100, false],
    [
      "start and end as text cannot be subtracted: the gate passes",
      { epoch_length_blocks: null, start_block: "8000000", end_block: "8000150" },
      100,
      true,
    ],
    ["elapsed as garbage: no chain view, the gate passes", {}, "soon", true],
  ])("%s", (_, over, elapsed, evaluate) => {
    expect(gate(over, elapsed)).toBe(evaluate);
  });

  it("bypass when the length is unknowable (no length, no start or end)", () => {
    expect(budgetLengthBlocks({ challenge_epoch_id: 17 })).toBe(0);
    expect(budgetLengthBlocks({ end_block: 8000150, start_block: 8000000 })).toBe(150);
    expect(budgetLengthBlocks({ end_block: 8000150.9, start_block: 8000000 })).toBe(150);
    expect(budgetLengthBlocks({ end_block: 8000150, start_block: null })).toBe(8000150);
    expect(budgetLengthBlocks({ epoch_length_blocks: -5, end_block: 10, start_block: 4 })).toBe(6);
  });
});

describe("epoch gates (pure)", () => {
  const parsed = (over: Record<string, unknown> = {}, top: Record<string, unknown> = {}) =>
    epochCurrentSchema.parse({
      ...EPOCH_HIDDEN,
      ...top,
      epoch: {
        ...EPOCH_HIDDEN.epoch,
        challenger_pack_url: "https://x/p.json",
        challenger_pack_hash: "ab",
        ...over,
      },
    });
  const never = () => false;

  it("evaluates an in-progress epoch within the first half that has a pack URL", () => {
    const d = assessEpoch(parsed({}, { elapsed_blocks: 75 }), never);
    expect(d).toEqual({
      evaluate: true,
      epochId: 1234,
      packUrl: "https://x/p.json",
      packHash: "ab",
      specNumber: null,
    });
  });

  it.each<[string, ReturnType<typeof parsed> | null, () => boolean, string]>([
    ["no epoch", null, never, "no_epoch"],
    ["already scored", parsed(), () => true, "already_scored"],
    ["more than half elapsed", parsed({}, { elapsed_blocks: 76 }), never, "too_late"],
    ["no pack URL", parsed({ challenger_pack_url: null }), never, "no_pack_url"],
    ["finalized", parsed({ status: "finalized" }), never, "not_in_progress"],
  ])("skips: %s", (_, cur, scored, reason) => {
    const d = assessEpoch(cur, scored);
    expect(d.evaluate).toBe(false);
    expect(!d.evaluate && d.reason).toBe(reason);
  });

  it("without the server's chain view the time gate passes (Python behaviour)", () => {
    expect(assessEpoch(parsed({}, { elapsed_blocks: null }), never).evaluate).toBe(true);
  });

  it("the abort probe: same epoch and pack → current; anything else → moved on; unknown → assume current", () => {
    const cur = parsed();
    expect(stillCurrent(cur, 1234, "AB")).toBe(true);
    expect(stillCurrent(cur, 1235, "ab")).toBe(false);
    expect(stillCurrent(cur, 1234, "cd")).toBe(false);
    expect(stillCurrent(null, 1234, "ab")).toBe(false);
    expect(stillCurrent(undefined, 1234, "ab")).toBe(true);
  });
});
