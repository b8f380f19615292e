import { describe, expect, it } from "vitest";
import { openDb, WeightsRepo } from "../../src/store/index.js";
import { m004Weights } from "../../src/store/migrations/004-weights.js";
import { MIGRATIONS } from "../../src/store/migrations/index.js";

/** The network these rows belong to: a genesis hash. */
const NET = `0x${"ab".repeat(32)}`;

describe("weight_attempts (migration 004) and WeightsRepo", () => {
  it("is registered under its reserved number", () => {
    expect(m004Weights.version).toBe(4);
    expect(MIGRATIONS).toContain(m004Weights);
  });

  it("records an attempt before sending and completes it once with the chain's answer", () => {
    const db = openDb(":memory:");
    const repo = new WeightsRepo(db, NET);
    const id = repo.start({
      netuid: 11,
      block: 5000,
      mode: "set_weights",
      reason: "winner",
      uids: [42],
      weights: [65535],
      versionKey: 7,
    });
    expect(repo.get(id)).toMatchObject({
      outcome: "pending",
      uids: [42],
      weights: [65535],
      versionKey: 7,
      block: 5000,
      txHash: null,
      finishedAt: null,
    });
    expect(
      repo.finish(id, {
        outcome: "failed",
        errorName: "SettingWeightsTooFast",
        errorKind: "rate_limited",
        txHash: "0xabc",
        blockHash: "0xdef",
        includedBlock: 5001,
        nonce: 3,
      }),
    ).toBe(true);
    const done = repo.get(id)!;
    expect(done).toMatchObject({
      outcome: "failed",
      errorName: "SettingWeightsTooFast",
      errorKind: "rate_limited",
      txHash: "0xabc",
      includedBlock: 5001,
      nonce: 3,
      resubmissions: 0,
    });
    expect(done.finishedAt).toMatch(/^\d{4}-\d\d-\d\dT/);
    // An audit row, once finished, is never rewritten.
    expect(repo.finish(id, { outcome: "included" })).toBe(false);
    expect(repo.get(id)!.outcome).toBe("failed");
    db.close();
  });

  it("lists recent attempts newest first and finds the last inclusion per subnet", () => {
    const db = openDb(":memory:");
    const repo = new WeightsRepo(db, NET);
    const a = repo.start({ netuid: 11, mode: "set_weights", uids: [1], weights: [65535], versionKey: 1 });
    repo.finish(a, { outcome: "included", txHash: "0x1", includedBlock: 10 });
    const b = repo.start({
      netuid: 11,
      mode: "set_weights",
      uids: [0],
      weights: [65535],
      versionKey: 1,
      reason: "no_seat",
    });
    repo.finish(b, { outcome: "timeout", txHash: "0x2" });
    const c = repo.start({
      netuid: 12,
      mode: "commit_crv3_weights",
      uids: [3],
      weights: [65535],
      versionKey: 1,
    });
    repo.finish(c, { outcome: "included", revealRound: 123, mode: "commit_crv3_weights" });
    expect(repo.recent(11).map((r) => r.id)).toEqual([b, a]);
    expect(repo.lastIncluded(11)?.txHash).toBe("0x1");
    expect(repo.lastIncluded(12)?.revealRound).toBe(123);
    expect(repo.lastIncluded(99)).toBeUndefined();
    db.close();
  });
});
