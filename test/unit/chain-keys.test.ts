import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import { Keyring } from "@polkadot/keyring";
import { u8aToHex } from "@polkadot/util";
import {
  cryptoWaitReady,
  mnemonicGenerate,
  mnemonicToMiniSecret,
  sr25519PairFromSeed,
} from "@polkadot/util-crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  canonicalToEd25519Secret,
  ed25519ToCanonicalSecret,
  hotkeyFromKeyfile,
  hotkeyPath,
  loadHotkey,
  verifySignature,
} from "../../src/chain/index.js";
import { InputError } from "../../src/errors.js";

/** A btcli-style wallet: the files bittensor-wallet writes for an unencrypted hotkey. */
interface TestKey {
  mnemonic: string;
  seed: Uint8Array;
  publicKey: Uint8Array;
  /** polkadot-js form (scalar × 8). */
  secretKey: Uint8Array;
  ss58: string;
}

let dir: string;
let key: TestKey;

function keyfile(k: TestKey, fields: Array<"secretSeed" | "secretPhrase" | "privateKey">): string {
  const f: Record<string, string> = {
    accountId: u8aToHex(k.publicKey),
    publicKey: u8aToHex(k.publicKey),
    ss58Address: k.ss58,
  };
  if (fields.includes("secretSeed")) f.secretSeed = u8aToHex(k.seed);
  if (fields.includes("secretPhrase")) f.secretPhrase = k.mnemonic;
  // btcli stores schnorrkel's canonical secret (scalar not multiplied by the cofactor).
  if (fields.includes("privateKey")) f.privateKey = u8aToHex(ed25519ToCanonicalSecret(k.secretKey));
  return JSON.stringify(f);
}

async function writeWallet(name: string, hotkey: string, content: string): Promise<void> {
  const path = hotkeyPath(dir, name, hotkey);
  await mkdir(join(dir, name, "hotkeys"), { recursive: true });
  await writeFile(path, content);
}

beforeAll(async () => {
  await cryptoWaitReady();
  dir = await mkdtemp(join(tmpdir(), "trajrl-wallet-"));
  const mnemonic = mnemonicGenerate();
  const seed = mnemonicToMiniSecret(mnemonic);
  const pair = sr25519PairFromSeed(seed);
  const kr = new Keyring({ type: "sr25519", ss58Format: 42 }).addFromMnemonic(mnemonic);
  expect(u8aToHex(kr.publicKey)).toBe(u8aToHex(pair.publicKey));
  key = { mnemonic, seed, publicKey: pair.publicKey, secretKey: pair.secretKey, ss58: kr.address };
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("btcli hotkey files", () => {
  it.each([
    [["secretSeed", "secretPhrase", "privateKey"], "secretSeed"],
    [["secretPhrase", "privateKey"], "secretPhrase"],
    [["privateKey"], "privateKey"],
  ] as const)("fields %j → derived from %s, same public key", async (fields, source) => {
    const hk = await hotkeyFromKeyfile(keyfile(key, [...fields]));
    expect(hk.source).toBe(source);
    expect(hk.ss58).toBe(key.ss58);
    expect(hk.publicKey).toBe(u8aToHex(key.publicKey));
    const sig = hk.sign("trajectoryrl-challenge-score:x:1:2");
    expect(sig).toMatch(/^0x[0-9a-f]{128}$/);
    expect(verifySignature("trajectoryrl-challenge-score:x:1:2", sig, key.ss58)).toBe(true);
  });

  it("the canonical privateKey is the polkadot-js scalar divided by 8 (and back)", () => {
    const canonical = ed25519ToCanonicalSecret(key.secretKey);
    // The polkadot-js scalar is a multiple of 8: its low 3 bits are zero.
    expect(key.secretKey[0]! & 7).toBe(0);
    expect(u8aToHex(canonicalToEd25519Secret(canonical))).toBe(u8aToHex(key.secretKey));
    expect(u8aToHex(canonical.subarray(32))).toBe(u8aToHex(key.secretKey.subarray(32)));
    expect(u8aToHex(canonical.subarray(0, 32))).not.toBe(u8aToHex(key.secretKey.subarray(0, 32)));
  });

  it("a privateKey used without the ×8 (polkadot-js form stored as-is) is refused: it does not match the public key", async () => {
    const f = JSON.parse(keyfile(key, [])) as Record<string, string>;
    // Store the polkadot-js form where the canonical one belongs: ×8 on load makes it ×64 → wrong key.
    // When the top 3 bits are set, ×8 overflows 256 bits and the key is reported as non-canonical.
    f.privateKey = u8aToHex(key.secretKey);
    const err = await hotkeyFromKeyfile(JSON.stringify(f)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InputError);
    const overflows = key.secretKey[31]! >> 5 !== 0;
    expect((err as InputError).code).toBe(overflows ? "wallet_invalid" : "wallet_key_mismatch");
  });

  it("a key that does not match the file's public key is refused (every source)", async () => {
    const other = sr25519PairFromSeed(mnemonicToMiniSecret(mnemonicGenerate()));
    for (const fields of [["secretSeed"], ["secretPhrase"], ["privateKey"]] as const) {
      const f = JSON.parse(keyfile(key, [...fields])) as Record<string, string>;
      f.publicKey = u8aToHex(other.publicKey);
      f.accountId = u8aToHex(other.publicKey);
      delete f.ss58Address;
      await expect(hotkeyFromKeyfile(JSON.stringify(f))).rejects.toMatchObject({
        code: "wallet_key_mismatch",
      });
    }
  });

  it("refuses encrypted files with a clear message", async () => {
    for (const content of [
      "$NACL\u0000abc",
      "$BTWALLETxyz",
      "$ANSIBLE_VAULT;1.1;AES256\n3132",
      "gAAAAABlZ0-legacy-fernet",
    ]) {
      const err = (await hotkeyFromKeyfile(content, "hotkey file /w/h").catch(
        (e: unknown) => e,
      )) as InputError;
      expect(err.code).toBe("wallet_encrypted");
      expect(err.message).toMatch(/hotkey file \/w\/h is encrypted/);
    }
  });

  it("malformed files: the message names fields, never their content", async () => {
    const f = JSON.parse(keyfile(key, ["secretPhrase"])) as Record<string, string>;
    f.secretSeed = "0x1234";
    const err = (await hotkeyFromKeyfile(JSON.stringify(f)).catch((e: unknown) => e)) as InputError;
    expect(err.code).toBe("wallet_invalid");
    expect(err.message).toContain("secretSeed");
    expect(err.message).not.toContain(key.mnemonic.split(" ")[0]!);
    await expect(hotkeyFromKeyfile("{}")).rejects.toMatchObject({ code: "wallet_invalid" });
    await expect(hotkeyFromKeyfile("not json")).rejects.toMatchObject({ code: "wallet_invalid" });
    const bad = JSON.parse(keyfile(key, [])) as Record<string, string>;
    bad.secretPhrase = "abandon abandon abandon";
    const e2 = (await hotkeyFromKeyfile(JSON.stringify(bad)).catch((e: unknown) => e)) as InputError;
    expect(e2.code).toBe("wallet_invalid");
    expect(e2.message).not.toContain("abandon");
  });

  it("loads WALLET_PATH/WALLET_NAME/hotkeys/WALLET_HOTKEY; a missing file is a clear input error", async () => {
    await writeWallet("validator", "default", keyfile(key, ["secretPhrase"]));
    const hk = await loadHotkey({ walletPath: dir, walletName: "validator", walletHotkey: "default" });
    expect(hk.ss58).toBe(key.ss58);
    const err = (await loadHotkey({ walletPath: dir, walletName: "validator", walletHotkey: "nope" }).catch(
      (e: unknown) => e,
    )) as InputError;
    expect(err.code).toBe("wallet_not_found");
    expect(err.message).toContain(join(dir, "validator", "hotkeys", "nope"));
  });

  it("never exposes secrets: JSON and inspect show the public half only", async () => {
    const hk = await hotkeyFromKeyfile(keyfile(key, ["secretSeed", "secretPhrase", "privateKey"]));
    const shown = `${JSON.stringify(hk)} ${inspect(hk)} ${String(Object.keys(hk))}`;
    expect(shown).toContain(key.ss58);
    expect(shown).not.toContain(u8aToHex(key.seed).slice(2, 20));
    expect(shown).not.toContain(u8aToHex(ed25519ToCanonicalSecret(key.secretKey)).slice(2, 20));
    expect(shown).not.toContain(key.mnemonic.split(" ").slice(0, 3).join(" "));
  });
});

describe("Signer", () => {
  it("signs raw bytes (UTF-8 for strings); verify rejects other messages, signers and garbage", async () => {
    const hk = await hotkeyFromKeyfile(keyfile(key, ["secretSeed"]));
    const msg = `trajectoryrl-challenge-score:${hk.ss58}:1700000000:42`;
    const sig = hk.sign(msg);
    expect(hk.verify(msg, sig)).toBe(true);
    expect(hk.verify(new TextEncoder().encode(msg), sig)).toBe(true);
    expect(hk.verify(`${msg}x`, sig)).toBe(false);
    const other = new Keyring({ type: "sr25519", ss58Format: 42 }).addFromMnemonic(mnemonicGenerate());
    expect(hk.verify(msg, sig, other.address)).toBe(false);
    expect(verifySignature(msg, "0x1234", hk.ss58)).toBe(false);
    expect(verifySignature(msg, sig, "not-an-address")).toBe(false);
    // A signature made elsewhere (polkadot-js keyring) verifies with ours.
    const kr = new Keyring({ type: "sr25519" }).addFromMnemonic(key.mnemonic);
    expect(verifySignature(msg, kr.sign(new TextEncoder().encode(msg)), hk.ss58)).toBe(true);
  });
});
