import { Keyring } from "@polkadot/keyring";
import { cryptoWaitReady, sr25519Verify } from "@polkadot/util-crypto";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import {
  challengeScoreMessage,
  epochCurrentMessage,
  heartbeatMessage,
  logsMessage,
  PREFIX,
  type Signer,
  scenarioProgressMessage,
  signedMessage,
  signerFromPair,
  signFields,
  unixSeconds,
} from "../../src/platform/index.js";
import { verifyMessage } from "../../src/platform/verify.js";

describe("platform message builders (pure)", () => {
  it("reproduces the documented example byte for byte", () => {
    expect(challengeScoreMessage("5Gabc", 1700000000, 42)).toBe(
      "trajectoryrl-challenge-score:5Gabc:1700000000:42",
    );
  });

  it("uses each endpoint's own prefix and extras", () => {
    expect(epochCurrentMessage("5Gabc", 1)).toBe("trajectoryrl-epoch-current:5Gabc:1");
    expect(heartbeatMessage("5Gabc", 1710000000)).toBe("trajectoryrl-heartbeat:5Gabc:1710000000");
    expect(logsMessage("5Gabc", 1710000000)).toBe("trajectoryrl-logs:5Gabc:1710000000");
    expect(scenarioProgressMessage("5Gabc", 1710000000, 1234, "fix-the-build")).toBe(
      "trajectoryrl-scenario-progress:5Gabc:1710000000:1234:fix-the-build",
    );
    expect(new Set(Object.values(PREFIX)).size).toBe(5);
  });

  it("timestamps are whole unix seconds, floored (never rounded into the future)", () => {
    expect(unixSeconds(1_700_000_000_999)).toBe(1_700_000_000);
    expect(unixSeconds(0)).toBe(0);
  });

  it("refuses parts that would make the ':'-joined message ambiguous or invalid", () => {
    expect(() => signedMessage(PREFIX.heartbeat, "5G:abc", 1)).toThrow(/hotkey/);
    expect(() => signedMessage(PREFIX.heartbeat, "", 1)).toThrow(/hotkey/);
    expect(() => signedMessage(PREFIX.heartbeat, "5Gabc", 1.5)).toThrow(/timestamp/);
    expect(() => signedMessage(PREFIX.heartbeat, "5Gabc", -1)).toThrow(/timestamp/);
  });

  it("splits back into exactly prefix, hotkey, timestamp, extras (property)", () => {
    const part = fc.string({ minLength: 1, maxLength: 20 }).filter((s) => !s.includes(":"));
    fc.assert(
      fc.property(part, fc.nat(), fc.array(part, { maxLength: 3 }), (hk, ts, extras) => {
        const m = signedMessage(PREFIX.scenarioProgress, hk, ts, ...extras);
        expect(m.split(":")).toEqual([PREFIX.scenarioProgress, hk, String(ts), ...extras]);
      }),
    );
  });
});

describe("signing with an sr25519 hotkey (keyring), verified as the platform verifies", () => {
  let signer: Signer;
  let other: Signer;
  let rawPublicKey: Uint8Array;

  beforeAll(async () => {
    await cryptoWaitReady();
    const kr = new Keyring({ type: "sr25519", ss58Format: 42 });
    const pair = kr.addFromUri("//PlatformSigningTest");
    rawPublicKey = pair.publicKey;
    signer = signerFromPair(pair);
    other = signerFromPair(kr.addFromUri("//SomeoneElse"));
  });

  it("signs the message's UTF-8 bytes unwrapped (as bittensor Keypair.sign does), 0x + 128 hex", () => {
    const f = signFields(signer, PREFIX.challengeScore, 1_700_000_000_123, 42);
    expect(f.message).toBe(`trajectoryrl-challenge-score:${signer.ss58}:1700000000:42`);
    expect(f.signature).toMatch(/^0x[0-9a-f]{128}$/);
    expect(f.hotkey).toBe(signer.ss58);
    expect(f.timestamp).toBe(1_700_000_000);
    expect(sr25519Verify(Buffer.from(f.message, "utf8"), f.signature, rawPublicKey)).toBe(true);
    expect(verifyMessage(f.message, f.signature, signer.ss58)).toBe(true);
  });

  it("a signature does not verify for any other message, key or endpoint", () => {
    const f = signFields(signer, PREFIX.challengeScore, 1_700_000_000_000, 42);
    expect(
      verifyMessage(challengeScoreMessage(signer.ss58, 1_700_000_000, 43), f.signature, signer.ss58),
    ).toBe(false);
    expect(
      verifyMessage(challengeScoreMessage(signer.ss58, 1_700_000_001, 42), f.signature, signer.ss58),
    ).toBe(false);
    expect(verifyMessage(heartbeatMessage(signer.ss58, 1_700_000_000), f.signature, signer.ss58)).toBe(false);
    expect(verifyMessage(f.message, f.signature, other.ss58)).toBe(false);
  });

  it("malformed signatures and addresses are 'not valid', never a throw", () => {
    const m = heartbeatMessage(signer.ss58, 1);
    expect(verifyMessage(m, "0x1234", signer.ss58)).toBe(false);
    expect(verifyMessage(m, "not hex", signer.ss58)).toBe(false);
    expect(verifyMessage(m, `0x${"00".repeat(64)}`, "not-an-address")).toBe(false);
  });

  it("rejects a signer that does not return 0x-hex of a 64-byte signature", () => {
    const bad: Signer = { ss58: signer.ss58, sign: () => "deadbeef" };
    expect(() => signFields(bad, PREFIX.heartbeat, Date.now())).toThrow(/0x-prefixed hex/);
  });
});
