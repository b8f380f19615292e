/**
 * Was this validator's vote counted (src/daemon/vote-count.ts)? A vote the platform accepted and
 * that is missing from the finalized epoch's published votes was filtered; nothing else is.
 */
import { describe, expect, it } from "vitest";
import { ownVoteCount, voteNotCountedMessage } from "../../src/daemon/vote-count.js";
import type { OutboxEntry, ScoreVerdict, WinnerCurrent } from "../../src/platform/index.js";

const ME = "5Me";
const verdict: ScoreVerdict = { spec_number: 27, challenger: { score: 1.5, qualified: true } };

function entry(over: Partial<OutboxEntry> = {}): OutboxEntry {
  return {
    id: 1,
    epochId: 42,
    validatorHotkey: ME,
    verdict,
    state: "delivered",
    attempts: 1,
    nextAttemptAt: 0,
    createdAt: 0,
    lastAttemptAt: 0,
    lastStatus: 200,
    lastError: null,
    outcome: "delivered",
    reason: null,
    deliveredAt: 1000,
    abandonedAt: null,
    ...over,
  };
}

function answer(voters: string[], epochId: number | null = 42): WinnerCurrent {
  return {
    success: true,
    winner: null,
    finalized_epoch:
      epochId === null
        ? null
        : {
            challenge_epoch_id: epochId,
            challenger_hotkey: "5C",
            challenger_pack_hash: "ab".repeat(32),
            challenger_pack_url: null,
            outcome: "winner_held",
            winner_replaced: false,
            finalized_at: "2026-12-05T00:00:00Z",
            spec_number: 27,
          },
    submissions: voters.map((v) => ({
      validator_hotkey: v,
      validator_stake: 1,
      challenger_pack_hash: "ab".repeat(32),
      challenger_score: 1,
      challenger_qualified: true,
      challenger_rejected: false,
      winner_pack_hash: null,
      winner_score: null,
      winner_qualified: null,
      winner_rejected: null,
    })),
  } as WinnerCurrent;
}

describe("ownVoteCount", () => {
  it("an accepted vote among the finalized epoch's votes is counted", () => {
    expect(ownVoteCount(answer(["5Other", ME]), ME, entry())).toEqual({ kind: "counted", epochId: 42 });
    // A 409 duplicate means an earlier attempt got through: the same.
    expect(ownVoteCount(answer([ME]), ME, entry({ outcome: "duplicate" })).kind).toBe("counted");
  });

  it("an accepted vote missing from them was filtered", () => {
    expect(ownVoteCount(answer(["5Other"]), ME, entry())).toEqual({
      kind: "not_counted",
      epochId: 42,
      deliveredAt: 1000,
    });
  });

  it("says nothing without a countable vote: none sent, not accepted, a rejection, another epoch, no finalized epoch", () => {
    const none = answer(["5Other"]);
    expect(ownVoteCount(none, ME, undefined).kind).toBe("unknown");
    expect(ownVoteCount(none, ME, entry({ state: "pending", outcome: null })).kind).toBe("unknown");
    expect(ownVoteCount(none, ME, entry({ state: "abandoned", outcome: "finalized" })).kind).toBe("unknown");
    const rejected: ScoreVerdict = {
      spec_number: 27,
      challenger: { score: 0, qualified: false, rejected: true, rejection_detail: "pack_verify_failed" },
    };
    // Step [1] of the filter drops every rejection: its absence says nothing about the version.
    expect(ownVoteCount(none, ME, entry({ verdict: rejected })).kind).toBe("unknown");
    expect(ownVoteCount(none, ME, entry({ epochId: 41 })).kind).toBe("unknown");
    expect(ownVoteCount(answer([], null), ME, entry()).kind).toBe("unknown");
  });

  it("the alarm names the epoch, the version sent, the likely cause and the fix", () => {
    const m = voteNotCountedMessage(42, "0.7.0");
    expect(m).toContain("epoch 42 finalized without this validator's vote");
    expect(m).toContain("below the platform's min_supported (this build sends version 0.7.0)");
    expect(m).toContain("Fix: upgrade trajrl-validator");
  });
});
