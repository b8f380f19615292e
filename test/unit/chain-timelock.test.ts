/**
 * Commit-reveal payloads. The ciphertext is checked against a REAL drand quicknet signature
 * (round 657413, as published by the League of Entropy and quoted in drand-verify's docs):
 * encrypting to that round with the quicknet public key and decrypting with the round's
 * signature proves identity derivation, curve and key match what the chain decrypts with.
 */
import { randomBytes } from "node:crypto";
import { hexToU8a, u8aToHex } from "@polkadot/util";
import { describe, expect, it } from "vitest";
import {
  buildTimelockedCommit,
  DRAND_QUICKNET,
  drandIdentity,
  encodeWeightsPayload,
  revealRound,
  timelockDecrypt,
  timelockEncrypt,
  timelockOpenWithEphemeral,
} from "../../src/chain/index.js";

const ROUND = 657413;
const ROUND_SIGNATURE = hexToU8a(
  "0xb713718a38ae728dfd477991af2822e08d2f305e47718cef9f7848ce4050e7be41076862b98fad56e91a6b85b89cd97b",
);

describe("timelock encryption (drand quicknet)", () => {
  it("a ciphertext for round 657413 opens with that round's real quicknet signature", async () => {
    const msg = new TextEncoder().encode("weights for the winner");
    const ct = await timelockEncrypt(msg, ROUND);
    expect(ct.length).toBeGreaterThan(msg.length + 100);
    expect(new TextDecoder().decode(await timelockDecrypt(ct, ROUND_SIGNATURE))).toBe(
      "weights for the winner",
    );
  });

  it("a ciphertext for another round does not open with it", async () => {
    const ct = await timelockEncrypt(new Uint8Array([1, 2, 3]), ROUND + 1);
    await expect(timelockDecrypt(ct, ROUND_SIGNATURE)).rejects.toBeDefined();
  });

  it("identity = sha256(round as u64 big-endian)", () => {
    expect(u8aToHex(drandIdentity(1))).toBe(
      "0xcd2662154e6d76b2b2b92e70c0cac3ccf534f9b74eb5b89819ec509083d00a50",
    );
  });
});

describe("WeightsTlockPayload", () => {
  it("SCALE: hotkey bytes, uids, values, version_key (u64 LE); legacy without hotkey", () => {
    const hotkey = new Uint8Array(32).fill(0xab);
    const p = encodeWeightsPayload({ hotkey, uids: [0, 3], values: [65535, 100], versionKey: 7 });
    expect(u8aToHex(p)).toBe(`0x80${"ab".repeat(32)}080000030008ffff64000700000000000000`);
    expect(u8aToHex(encodeWeightsPayload({ uids: [1], values: [65535], versionKey: 1 }))).toBe(
      "0x04010004ffff0100000000000000",
    );
  });

  it("the commit carries exactly the payload (opened with the ephemeral key)", async () => {
    const esk = randomBytes(32);
    const hotkey = new Uint8Array(32).fill(7);
    const c = await buildTimelockedCommit(
      { hotkey, uids: [4], values: [65535], versionKey: 9 },
      { tempo: 360, currentBlock: 5_000_000, netuid: 11, revealPeriodEpochs: 1, nowS: 1_750_000_000 },
      { ephemeralKey: esk },
    );
    const plain = await timelockOpenWithEphemeral(c.commit, esk);
    expect(u8aToHex(plain)).toBe(
      u8aToHex(encodeWeightsPayload({ hotkey, uids: [4], values: [65535], versionKey: 9 })),
    );
  });
});

describe("reveal round", () => {
  /** bittensor-drand's reference formula (its tests' compute_expected_reveal_round). */
  function reference(
    now: number,
    tempo: number,
    block: number,
    netuid: number,
    epochs: number,
    blockTime: number,
  ): number {
    const t1 = tempo + 1;
    const n1 = netuid + 1;
    const epoch = Math.floor((block + n1) / t1);
    const first = (epoch + epochs) * t1 - n1;
    const until = Math.max(first + 3 - block, 0);
    return Math.max(1, Math.floor((now + until * blockTime - 1_692_803_367) / 3));
  }

  it.each([
    [1_750_000_000, 100, 1000, 1, 2, 12],
    [1_750_000_000, 50, 500, 100, 2, 12],
    [1_760_000_123, 360, 5_123_456, 11, 1, 12],
    [1_760_000_123, 10, 100_000, 1, 1, 0.25],
  ])("now=%d tempo=%d block=%d netuid=%d epochs=%d", (now, tempo, block, netuid, epochs, bt) => {
    expect(
      revealRound({
        nowS: now,
        tempo,
        currentBlock: block,
        netuid,
        revealPeriodEpochs: epochs,
        blockTimeS: bt,
      }),
    ).toBe(reference(now, tempo, block, netuid, epochs, bt));
  });

  it("lands in the future, at the next reveal epoch boundary", () => {
    const nowS = 1_760_000_000;
    const r = revealRound({ nowS, tempo: 360, currentBlock: 5_000_000, netuid: 11, revealPeriodEpochs: 1 });
    const revealAt = DRAND_QUICKNET.genesisTime + r * DRAND_QUICKNET.periodS;
    expect(revealAt).toBeGreaterThan(nowS);
    expect(revealAt - nowS).toBeLessThanOrEqual((361 + 3) * 12 + 3);
  });
});
