import { readFileSync } from "node:fs";
import { Metadata, TypeRegistry } from "@polkadot/types";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  convertWeightsForEmit,
  extrinsicStatus,
  parsePoolRejection,
  preflightCheck,
  roundHalfEven,
  type SubnetSnapshot,
  weightsErrorKind,
} from "../../src/chain/index.js";

function registryFor(name: "finney-spec219" | "testnet-spec224") {
  const f = JSON.parse(
    readFileSync(new URL(`../../src/localnet/fixtures/${name}.json`, import.meta.url), "utf8"),
  ) as { metadata: `0x${string}` };
  const registry = new TypeRegistry();
  const md = new Metadata(registry, f.metadata);
  registry.setMetadata(
    md,
    undefined,
    {
      SubtensorSignedExtension: { extrinsic: {}, payload: {} },
      CommitmentsSignedExtension: { extrinsic: {}, payload: {} },
    },
    true,
  );
  return { registry, md };
}

describe("weights float → u16, as the Python SDK (values computed with CPython's float32/round)", () => {
  it.each([
    [
      [0, 1, 2],
      [0.1, 0.2, 0.7],
      [0, 1, 2],
      [9362, 18724, 65535],
    ],
    [
      [5, 9],
      [1, 3],
      [5, 9],
      [21845, 65535],
    ],
    [
      [0, 1, 2, 3],
      [1.0, 0.5, 0.0015259, 0.0],
      [0, 1, 2],
      [65535, 32768, 100],
    ],
    // x·65535 = 1.5, 2.5, 3.5 exactly: half to even → 2, 2, 4 (Math.round would say 2, 3, 4).
    [
      [1, 2, 3, 4],
      [3, 5, 7, 131070],
      [1, 2, 3, 4],
      [2, 2, 4, 65535],
    ],
    // 0.5 rounds to 0 and is dropped together with its uid.
    [[1, 2], [1, 131070], [2], [65535]],
    [[7], [0.3], [7], [65535]],
    [
      [0, 1, 2],
      [1e-6, 1.0, 0.5],
      [1, 2],
      [65535, 32768],
    ],
    [
      [3, 4, 5],
      [0.33, 0.33, 0.34],
      [3, 4, 5],
      [63608, 63608, 65535],
    ],
    [[0, 1], [2 ** -20, 1.0], [1], [65535]],
  ])("uids %j weights %j → %j %j", (uids, weights, outUids, outWeights) => {
    expect(convertWeightsForEmit(uids, weights)).toEqual({ uids: outUids, weights: outWeights });
  });

  it("all-zero or empty → nothing to emit", () => {
    expect(convertWeightsForEmit([1, 2], [0, 0])).toEqual({ uids: [], weights: [] });
    expect(convertWeightsForEmit([], [])).toEqual({ uids: [], weights: [] });
  });

  it("rejects negative or non-finite weights, bad uids, unequal lengths", () => {
    expect(() => convertWeightsForEmit([1], [-0.1])).toThrow(/negative/);
    expect(() => convertWeightsForEmit([1], [Number.NaN])).toThrow();
    expect(() => convertWeightsForEmit([1], [Number.POSITIVE_INFINITY])).toThrow();
    expect(() => convertWeightsForEmit([-1], [1])).toThrow(/u16/);
    expect(() => convertWeightsForEmit([70000], [1])).toThrow(/u16/);
    expect(() => convertWeightsForEmit([1, 2], [1])).toThrow(/length/);
  });

  it("roundHalfEven is Python's round", () => {
    expect([0.5, 1.5, 2.5, 3.5, 4.5, 32767.5, -1.5, 2.4999, 2.5001].map(roundHalfEven)).toEqual([
      0, 2, 2, 4, 4, 32768, -2, 2, 3,
    ]);
  });

  it("properties: the max weight maps to 65535, values are u16, a uid is kept iff its share rounds above 0", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 4095 }), fc.double({ min: 0, max: 1e6, noNaN: true })), {
          minLength: 1,
          maxLength: 20,
        }),
        (pairs) => {
          const uids = pairs.map((p) => p[0]);
          const ws = pairs.map((p) => Math.fround(p[1]));
          const out = convertWeightsForEmit(uids, ws);
          const max = Math.max(...ws);
          if (max === 0) {
            expect(out).toEqual({ uids: [], weights: [] });
            return;
          }
          expect(Math.max(...out.weights)).toBe(65535);
          for (const w of out.weights) expect(Number.isInteger(w) && w > 0 && w <= 65535).toBe(true);
          // x.5 rounds to even: exactly 0.5 → 0 (dropped), anything above → ≥ 1 (kept).
          expect(out.uids).toEqual(uids.filter((_, i) => (ws[i]! / max) * 65535 > 0.5));
        },
      ),
    );
  });
});

describe("golden bytes", () => {
  it("set_weights(11, [0,1,2,3], [65535,32768,100,0], 7) under spec 219", () => {
    const { registry } = registryFor("finney-spec219");
    const call = registry.createType("Call", {
      callIndex: registry.findMetaCall(new Uint8Array([7, 0])).callIndex,
      args: { netuid: 11, dests: [0, 1, 2, 3], weights: [65535, 32768, 100, 0], version_key: 7 },
    });
    expect(call.section).toBe("subtensorModule");
    expect(call.method).toBe("setWeights");
    expect(call.toHex()).toBe("0x07000b0010000001000200030010ffff0080640000000700000000000000");
  });

  it("SettingWeightsTooFast has different indices in spec 219 and 224: names come from the metadata", () => {
    for (const [name, index] of [
      ["finney-spec219", 30],
      ["testnet-spec224", 29],
    ] as const) {
      const { registry } = registryFor(name);
      expect(registry.findMetaError(new Uint8Array([7, index])).name).toBe("SettingWeightsTooFast");
      expect(registry.findMetaError(new Uint8Array([7, index === 30 ? 29 : 30])).name).not.toBe(
        "SettingWeightsTooFast",
      );
    }
  });
});

describe("pool rejections and error kinds", () => {
  it("parses substrate's JSON-RPC errors into stable names", () => {
    expect(parsePoolRejection(new Error("1010: Invalid Transaction: Custom error: 10"))).toEqual({
      rpcCode: 1010,
      name: "HotKeyNotRegisteredInNetwork",
      custom: 10,
      message: "1010: Invalid Transaction: Custom error: 10",
    });
    expect(parsePoolRejection(new Error("1010: Invalid Transaction: Custom error: 6"))?.name).toBe(
      "RateLimitExceeded",
    );
    expect(parsePoolRejection(new Error("1010: Invalid Transaction: Custom error: 250"))?.name).toBe(
      "Custom250",
    );
    expect(parsePoolRejection(new Error("1010: Invalid Transaction: Transaction is outdated"))?.name).toBe(
      "Stale",
    );
    expect(
      parsePoolRejection(new Error("1010: Invalid Transaction: Transaction has a bad signature"))?.name,
    ).toBe("BadProof");
    expect(
      parsePoolRejection(
        new Error("1010: Invalid Transaction: Inability to pay some fees (e.g. account balance too low)"),
      )?.name,
    ).toBe("Payment");
    expect(parsePoolRejection(new Error("1013: Transaction Already Imported"))?.name).toBe("AlreadyImported");
    expect(parsePoolRejection(new Error("1014: Priority is too low: (0 vs 0)"))?.name).toBe("PriorityTooLow");
    expect(
      parsePoolRejection(new Error("disconnected from ws://x: 1006:: Abnormal Closure")),
    ).toBeUndefined();
    expect(parsePoolRejection("nonsense")).toBeUndefined();
  });

  it("reads substrate's TransactionStatus JSON", () => {
    expect(extrinsicStatus("ready")).toEqual({ kind: "ready" });
    expect(extrinsicStatus({ inBlock: "0xab" })).toEqual({ kind: "inBlock", hash: "0xab" });
    expect(extrinsicStatus({ finalized: "0xcd" })).toEqual({ kind: "finalized", hash: "0xcd" });
    expect(extrinsicStatus("dropped")).toEqual({ kind: "dropped" });
    expect(extrinsicStatus({ usurped: "0x01" })).toEqual({ kind: "usurped", hash: "0x01" });
    expect(extrinsicStatus({ broadcast: ["peer"] })).toEqual({ kind: "broadcast" });
    expect(extrinsicStatus({ weird: 1 })).toEqual({ kind: "unknown" });
    expect(extrinsicStatus(null)).toEqual({ kind: "unknown" });
  });

  it("classifies failures for the weight loop", () => {
    expect(weightsErrorKind("SettingWeightsTooFast")).toBe("rate_limited");
    expect(weightsErrorKind("HotKeyNotRegisteredInSubNet")).toBe("permanent");
    expect(weightsErrorKind("NeuronNoValidatorPermit")).toBe("permanent");
    expect(weightsErrorKind("IncorrectWeightVersionKey")).toBe("permanent");
    expect(weightsErrorKind("Stale")).toBe("transient");
    expect(weightsErrorKind(undefined)).toBe("transient");
  });
});

describe("preflight", () => {
  const me = "5MeMeMe";
  const snap = (over: Partial<SubnetSnapshot> = {}): SubnetSnapshot => ({
    netuid: 11,
    block: 1000,
    blockHash: "0x",
    neurons: [
      { uid: 0, hotkey: "5Owner", stakeRao: 1n, stake: 0, validatorPermit: false, lastUpdate: 0 },
      { uid: 1, hotkey: me, stakeRao: 1n, stake: 0, validatorPermit: true, lastUpdate: 900 },
      { uid: 2, hotkey: "5Miner", stakeRao: 1n, stake: 0, validatorPermit: false, lastUpdate: 0 },
    ],
    stakeSource: "TotalHotkeyAlpha",
    ownerColdkey: undefined,
    ownerHotkey: "5Owner",
    ownerUid: 0,
    tempo: 360,
    weightsSetRateLimit: 100,
    weightsVersionKey: 3,
    commitRevealEnabled: false,
    revealPeriodEpochs: 1,
    commitRevealVersion: undefined,
    minAllowedWeights: 1,
    maxWeightsLimit: 65535,
    ...over,
  });
  const input = { hotkey: me, uids: [2], weights: [65535], versionKey: 3 };

  it("passes when registered, permitted, out of the rate limit, with a high enough version key", () => {
    expect(preflightCheck(snap(), input)).toEqual({
      ok: true,
      uid: 1,
      block: 1000,
      blocksUntilAllowed: 0,
      problems: [],
    });
  });

  it("the rate limit is head − LastUpdate ≥ limit", () => {
    expect(preflightCheck(snap({ block: 999 }), input)).toMatchObject({
      ok: false,
      blocksUntilAllowed: 1,
      problems: [{ code: "rate_limited", kind: "rate_limited" }],
    });
    expect(preflightCheck(snap({ block: 1000 }), input).ok).toBe(true);
  });

  it("names each permanent problem", () => {
    expect(preflightCheck(snap(), { ...input, hotkey: "5Stranger" }).problems.map((p) => p.code)).toEqual([
      "not_registered",
    ]);
    const noPermit = snap();
    noPermit.neurons[1]!.validatorPermit = false;
    expect(preflightCheck(noPermit, input).problems.map((p) => p.code)).toEqual(["no_validator_permit"]);
    expect(preflightCheck(snap(), { ...input, versionKey: 2 }).problems.map((p) => p.code)).toEqual([
      "version_key_too_low",
    ]);
    expect(preflightCheck(snap({ weightsVersionKey: 0 }), { ...input, versionKey: 0 }).ok).toBe(true);
    expect(preflightCheck(snap(), { ...input, uids: [3] }).problems.map((p) => p.code)).toEqual([
      "weights_invalid",
    ]);
    expect(
      preflightCheck(snap(), { ...input, uids: [2, 2], weights: [1, 1] }).problems.map((p) => p.code),
    ).toEqual(["weights_invalid"]);
    expect(preflightCheck(snap({ minAllowedWeights: 2 }), input).problems.map((p) => p.code)).toEqual([
      "weight_vec_too_short",
    ]);
    // Weighing only itself is always allowed by the length rule.
    expect(preflightCheck(snap({ minAllowedWeights: 2 }), { ...input, uids: [1] }).ok).toBe(true);
  });
});
