/**
 * The platform's submission filter as the stand-in applies it at finalize (src/localnet/
 * platform-finalize.ts; INCENTIVE_MECHANISM.md "Submission Filter Pipeline"), and what follows from
 * it for a deliberate difference (README "Deliberate differences"): a bench that cannot be prepared
 * is discarded here, where upstream posts `rejected: true, rejection_detail: "s1_eval_error"` —
 * step [1] drops every rejected row before aggregation, so the votes that count, the consensus and
 * the seat are the same as with no vote at all.
 */
import { describe, expect, it } from "vitest";
import { epochConsensus } from "../../src/daemon/winner-check.js";
import { filterVotes, finalizedWinnerResponse, versionBelow } from "../../src/localnet/platform-finalize.js";
import { winnerCurrentSchema } from "../../src/platform/index.js";

const epoch = {
  challenge_epoch_id: 77,
  spec_number: 27,
  challenger_hotkey: "5Challenger",
  challenger_pack_hash: "ab".repeat(32),
  challenger_pack_url: null,
};

const vote = (hotkey: string, score: number, version = "0.7.0") => ({
  validator_hotkey: hotkey,
  version,
  challenger: { score, qualified: score > 0 },
});

describe("the submission filter at finalize", () => {
  it("drops a rejected verdict (step 1) and a version below min_supported (step 6); counts the rest", () => {
    const rows = [
      vote("5A", 12.5),
      { ...vote("5B", 0), challenger: { score: 0, qualified: false, rejected: true, rejection_detail: "x" } },
      vote("5C", 11, "0.6.31"),
      vote("5D", 13, "0.7.10"),
    ];
    const { counted, filtered } = filterVotes(rows, "0.7.0");
    expect(counted.map((r) => r.validator_hotkey)).toEqual(["5A", "5D"]);
    expect(filtered).toEqual([
      { validator_hotkey: "5B", step: 1, reason: "challenger.rejected = true" },
      { validator_hotkey: "5C", step: 6, reason: "version 0.6.31 < min_supported 0.7.0" },
    ]);
    // No floor set: only step 1 applies.
    expect(filterVotes(rows, undefined).counted).toHaveLength(3);
  });

  it("compares release numbers part by part", () => {
    expect(versionBelow("0.7.0", "0.7.1")).toBe(true);
    expect(versionBelow("0.7.9", "0.7.10")).toBe(true);
    expect(versionBelow("0.7.10", "0.7.9")).toBe(false);
    expect(versionBelow("0.7.0", "0.7.0")).toBe(false);
    expect(versionBelow("0.1.0", "0.7.0")).toBe(true);
    expect(versionBelow("v0.7.1", "0.7.0")).toBe(false);
    expect(versionBelow("0.7", "0.7.0")).toBe(false);
  });

  it("a bench that cannot be prepared: upstream's s1_eval_error rejection and our discard (no vote) finalize alike", () => {
    const others = [vote("5A", 12.5), vote("5B", 14), vote("5C", 13.25), vote("5D", 0.5)];
    const upstreamPosts = [
      ...others,
      {
        ...vote("5Us", 0),
        challenger: { score: 0, qualified: false, rejected: true, rejection_detail: "s1_eval_error" },
      },
    ];
    const withRejection = filterVotes(upstreamPosts, "0.7.0");
    const withoutVote = filterVotes(others, "0.7.0");
    expect(withRejection.counted).toEqual(withoutVote.counted);
    const at = "2026-12-05T00:00:00Z";
    const a = winnerCurrentSchema.parse(finalizedWinnerResponse(epoch, withRejection.counted, null, at));
    const b = winnerCurrentSchema.parse(finalizedWinnerResponse(epoch, withoutVote.counted, null, at));
    expect(a).toEqual(b);
    // The consensus the votes give (Winsorized from spec 16, as the platform aggregates) is the same.
    expect(epochConsensus(a)).toEqual(epochConsensus(b));
    expect(epochConsensus(a).counted).toBe(4);
  });
});
