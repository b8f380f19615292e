/**
 * Hotkeys from btcli wallet files, and the Signer built on them.
 *
 * A btcli (bittensor-wallet) hotkey file is JSON: {accountId, publicKey, privateKey, secretPhrase,
 * secretSeed, ss58Address}. We derive the key from secretSeed, else secretPhrase, else privateKey.
 * privateKey is schnorrkel's canonical secret (32-byte scalar ‖ 32-byte nonce); polkadot-js keeps
 * the scalar multiplied by the cofactor 8 ("ed25519 form"), so its first 32 bytes are shifted
 * before use. Whatever the source, the derived public key must equal the file's.
 * Secrets never leave this module: the Hotkey object serializes to its public half only.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { inspect } from "node:util";
import { Keyring } from "@polkadot/keyring";
import type { KeyringPair } from "@polkadot/keyring/types";
import { hexToU8a, isHex, u8aEq, u8aToHex, u8aToU8a } from "@polkadot/util";
import {
  cryptoWaitReady,
  decodeAddress,
  encodeAddress,
  mnemonicToMiniSecret,
  sr25519PairFromSeed,
  sr25519Sign,
  sr25519Verify,
} from "@polkadot/util-crypto";
import { z } from "zod";
import { InputError } from "../errors.js";

/** Bittensor's SS58 prefix. */
export const SS58_FORMAT = 42;

export type KeySource = "secretSeed" | "secretPhrase" | "privateKey";

/** What the rest of the validator signs with (platform messages, extrinsics). */
export interface Signer {
  readonly ss58: string;
  /** 0x-prefixed hex of the 32-byte sr25519 public key. */
  readonly publicKey: string;
  /** sr25519 signature over the raw bytes (UTF-8 for a string), 0x + 128 hex. */
  sign(message: string | Uint8Array): string;
  verify(message: string | Uint8Array, signature: string | Uint8Array, signerSs58?: string): boolean;
}

const hex = (bytes: number) =>
  z
    .string()
    .trim()
    .refine((s) => isHex(s.startsWith("0x") ? s : `0x${s}`, bytes * 8), `expected ${bytes} bytes of hex`)
    .transform((s) => hexToU8a(s.startsWith("0x") ? s : `0x${s}`));

const KEYFILE = z
  .object({
    accountId: hex(32).optional(),
    publicKey: hex(32).optional(),
    privateKey: hex(64).optional(),
    secretPhrase: z.string().trim().min(1).optional(),
    secretSeed: hex(32).optional(),
    ss58Address: z.string().trim().min(1).optional(),
  })
  .passthrough();

type Keyfile = z.infer<typeof KEYFILE>;

/** Encrypted keyfile markers (bittensor-wallet NaCl/ansible, legacy Fernet). */
const ENCRYPTED_PREFIXES = ["$NACL", "$BTWALLET", "$ANSIBLE_VAULT", "gAAAAA"];

export function hotkeyPath(walletPath: string, walletName: string, hotkey: string): string {
  return join(walletPath, walletName, "hotkeys", hotkey);
}

function toU8a(message: string | Uint8Array): Uint8Array {
  return typeof message === "string" ? new TextEncoder().encode(message) : message;
}

/** schnorrkel canonical scalar → polkadot-js (×8, little-endian, no reduction). */
export function canonicalToEd25519Secret(secret: Uint8Array): Uint8Array {
  if (secret.length !== 64) throw new InputError("wallet_invalid", "privateKey must be 64 bytes");
  const out = new Uint8Array(64);
  let carry = 0;
  for (let i = 0; i < 32; i++) {
    const v = (secret[i]! << 3) | carry;
    out[i] = v & 0xff;
    carry = v >> 8;
  }
  // A canonical scalar is < 2^253, so nothing is carried out of the top byte.
  if (carry !== 0) throw new InputError("wallet_invalid", "privateKey is not a canonical sr25519 secret");
  out.set(secret.subarray(32), 32);
  return out;
}

/** polkadot-js secret (scalar ×8) → schnorrkel canonical, the form btcli stores as privateKey. */
export function ed25519ToCanonicalSecret(secret: Uint8Array): Uint8Array {
  const out = new Uint8Array(64);
  for (let i = 0; i < 32; i++) out[i] = ((secret[i]! >> 3) | (i < 31 ? secret[i + 1]! << 5 : 0)) & 0xff;
  out.set(secret.subarray(32, 64), 32);
  return out;
}

export class Hotkey implements Signer {
  readonly ss58: string;
  readonly publicKey: string;
  readonly source: KeySource;
  readonly #pair: KeyringPair;

  constructor(pair: KeyringPair, source: KeySource) {
    this.#pair = pair;
    this.ss58 = encodeAddress(pair.publicKey, SS58_FORMAT);
    this.publicKey = u8aToHex(pair.publicKey);
    this.source = source;
  }

  sign(message: string | Uint8Array): string {
    return u8aToHex(this.#pair.sign(toU8a(message)));
  }

  verify(message: string | Uint8Array, signature: string | Uint8Array, signerSs58 = this.ss58): boolean {
    return verifySignature(message, signature, signerSs58);
  }

  /** For the chain adapter only: the polkadot-js pair that signs extrinsics. */
  keyringPair(): KeyringPair {
    return this.#pair;
  }

  toJSON(): Record<string, string> {
    return { ss58: this.ss58, publicKey: this.publicKey, source: this.source };
  }

  [inspect.custom](): string {
    return `Hotkey(${this.ss58})`;
  }
}

export function verifySignature(
  message: string | Uint8Array,
  signature: string | Uint8Array,
  signer: string | Uint8Array,
): boolean {
  try {
    const pub = typeof signer === "string" && !isHex(signer) ? decodeAddress(signer) : u8aToU8a(signer);
    const sig = u8aToU8a(signature);
    if (sig.length !== 64 || pub.length !== 32) return false;
    return sr25519Verify(toU8a(message), sig, pub);
  } catch {
    return false;
  }
}

function claimedPublicKey(file: Keyfile): Uint8Array | undefined {
  const claims: Uint8Array[] = [];
  if (file.publicKey) claims.push(file.publicKey);
  if (file.accountId) claims.push(file.accountId);
  if (file.ss58Address) {
    try {
      claims.push(decodeAddress(file.ss58Address));
    } catch {
      throw new InputError("wallet_invalid", "hotkey file: ss58Address is not a valid address");
    }
  }
  const first = claims[0];
  if (first && claims.some((c) => !u8aEq(c, first)))
    throw new InputError("wallet_invalid", "hotkey file: publicKey, accountId and ss58Address disagree");
  return first;
}

/** Parse the bytes of a hotkey file into a Hotkey. `label` names the file in messages (never content). */
export async function hotkeyFromKeyfile(bytes: Uint8Array | string, label = "hotkey file"): Promise<Hotkey> {
  const text = (typeof bytes === "string" ? bytes : Buffer.from(bytes).toString("utf8")).trim();
  if (ENCRYPTED_PREFIXES.some((p) => text.startsWith(p)))
    throw new InputError(
      "wallet_encrypted",
      `${label} is encrypted; this validator needs an unencrypted hotkey (btcli: regenerate the hotkey with --no-use-password, or decrypt it)`,
    );
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new InputError("wallet_invalid", `${label} is not JSON (nor a known encrypted format)`);
  }
  const parsed = KEYFILE.safeParse(raw);
  if (!parsed.success) {
    // Field names only: a message must never echo key material.
    const fields = [...new Set(parsed.error.issues.map((i) => i.path.join(".")))].join(", ");
    throw new InputError("wallet_invalid", `${label}: malformed field(s): ${fields}`);
  }
  const file = parsed.data;
  await cryptoWaitReady();
  const claimed = claimedPublicKey(file);
  const keyring = new Keyring({ type: "sr25519", ss58Format: SS58_FORMAT });
  let source: KeySource;
  let pair: { publicKey: Uint8Array; secretKey: Uint8Array };
  if (file.secretSeed) {
    source = "secretSeed";
    pair = sr25519PairFromSeed(file.secretSeed);
  } else if (file.secretPhrase) {
    source = "secretPhrase";
    let seed: Uint8Array;
    try {
      seed = mnemonicToMiniSecret(file.secretPhrase);
    } catch {
      throw new InputError("wallet_invalid", `${label}: secretPhrase is not a valid BIP-39 mnemonic`);
    }
    pair = sr25519PairFromSeed(seed);
  } else if (file.privateKey) {
    source = "privateKey";
    if (!claimed)
      throw new InputError(
        "wallet_invalid",
        `${label}: privateKey without publicKey/ss58Address cannot be checked`,
      );
    const secretKey = canonicalToEd25519Secret(file.privateKey);
    // The public key is not stored with the scalar; a signature that verifies under the
    // claimed key proves the scalar belongs to it (schnorrkel binds the key into the challenge).
    const probe = new TextEncoder().encode("trajrl-validator key check");
    const ok = sr25519Verify(probe, sr25519Sign(probe, { publicKey: claimed, secretKey }), claimed);
    if (!ok)
      throw new InputError(
        "wallet_key_mismatch",
        `${label}: privateKey does not belong to the file's public key`,
      );
    pair = { publicKey: claimed, secretKey };
  } else {
    throw new InputError("wallet_invalid", `${label} has no secretSeed, secretPhrase or privateKey`);
  }
  if (claimed && !u8aEq(claimed, pair.publicKey))
    throw new InputError(
      "wallet_key_mismatch",
      `${label}: the key derived from ${source} is ${encodeAddress(pair.publicKey, SS58_FORMAT)}, the file says ${encodeAddress(claimed, SS58_FORMAT)}`,
    );
  return new Hotkey(keyring.addFromPair(pair), source);
}

export interface WalletLocation {
  walletPath: string;
  walletName: string;
  walletHotkey: string;
}

/** Load WALLET_PATH/WALLET_NAME/hotkeys/WALLET_HOTKEY. */
export async function loadHotkey(loc: WalletLocation): Promise<Hotkey> {
  const path = hotkeyPath(loc.walletPath, loc.walletName, loc.walletHotkey);
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new InputError(
      "wallet_not_found",
      code === "ENOENT" ? `hotkey file not found: ${path}` : `cannot read hotkey file ${path}: ${code}`,
      { cause: err },
    );
  }
  return hotkeyFromKeyfile(bytes, `hotkey file ${path}`);
}
