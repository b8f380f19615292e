/**
 * Commit-reveal v3/v4 payloads: the weights are SCALE-encoded, timelock-encrypted (drand quicknet,
 * BLS12-381, identity = sha256(round as u64 big-endian)) with @ideallabs/timelock_wasm_wrapper,
 * and the chain decrypts them itself once the drand pulse for `revealRound` is on chain.
 *
 * NEEDS A TESTNET CHECK: the encryption is verified offline against a real quicknet signature
 * (test/unit/chain-timelock.test.ts), but that subtensor accepts and reveals these ciphertexts, and
 * that our reveal round lands where the chain expects, has not been observed on a live chain.
 */
import { createHash, randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { InfraError } from "../errors.js";

export const DRAND_QUICKNET = {
  /** G2 public key (compressed, 96 bytes). */
  publicKey:
    "83cf0f2896adee7eb8b5f01fcad3912212c437e0073e911fb90022d3e760183c8c4b450b6a0a6c3ac6a5776a2d1064510d1fec758c921cc22b0e17e63aaf4bcb5ed66304de9cf809bd274ca73bab4af5a6e9c76a4bc09e76eae8991ef5ece45a",
  genesisTime: 1_692_803_367,
  periodS: 3,
  chainHash: "52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971",
} as const;

/** Blocks added after the first reveal block so the pulse is already ingested (bittensor-drand). */
export const SECURITY_BLOCK_OFFSET = 3;

export interface RevealRoundInput {
  tempo: number;
  currentBlock: number;
  netuid: number;
  revealPeriodEpochs: number;
  blockTimeS?: number;
  /** Unix seconds, wall clock: drand rounds are wall-clock by definition. */
  nowS: number;
}

/**
 * The drand round whose pulse reveals the commit: the start of the epoch `revealPeriodEpochs`
 * after the current one (subtensor's epoch boundaries: (block + netuid + 1) mod (tempo + 1)),
 * plus SECURITY_BLOCK_OFFSET blocks, converted to wall-clock time and then to a quicknet round.
 * This is the closed form bittensor-drand's tests use; the SDK's v2 simulates the chain's epoch
 * schedule and can differ by a round or so when the schedule is irregular.
 */
export function revealRound(i: RevealRoundInput): number {
  const blockTimeS = i.blockTimeS ?? 12;
  const tempoPlusOne = i.tempo + 1;
  const netuidPlusOne = i.netuid + 1;
  const currentEpoch = Math.floor((i.currentBlock + netuidPlusOne) / tempoPlusOne);
  const firstRevealBlock = (currentEpoch + i.revealPeriodEpochs) * tempoPlusOne - netuidPlusOne;
  const blocksUntil = Math.max(firstRevealBlock + SECURITY_BLOCK_OFFSET - i.currentBlock, 0);
  const target = i.nowS + blocksUntil * blockTimeS;
  return Math.max(1, Math.floor((target - DRAND_QUICKNET.genesisTime) / DRAND_QUICKNET.periodS));
}

export function drandIdentity(round: number | bigint): Uint8Array {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(round));
  return createHash("sha256").update(b).digest();
}

interface TimelockWasm {
  initSync(m: { module: Uint8Array }): unknown;
  tle(id: number[], message: number[], sk: number[], pub: number[], curve: string): Uint8Array | number[];
  tld(ct: Uint8Array | number[], sig: number[], curve: string): Uint8Array | number[];
  decrypt(ct: Uint8Array | number[], sk: number[], curve: string): Uint8Array | number[];
}

let wasmPromise: Promise<TimelockWasm> | undefined;

/** Load the wasm module from the package directory (no fetch: works offline and in Node). */
function timelockWasm(): Promise<TimelockWasm> {
  wasmPromise ??= (async () => {
    try {
      const require = createRequire(import.meta.url);
      const entry = require.resolve("@ideallabs/timelock_wasm_wrapper");
      const mod = (await import("@ideallabs/timelock_wasm_wrapper")) as unknown as TimelockWasm;
      mod.initSync({ module: await readFile(new URL("timelock_wasm_wrapper_bg.wasm", `file://${entry}`)) });
      return mod;
    } catch (err) {
      wasmPromise = undefined;
      throw new InfraError(
        "timelock_unavailable",
        `cannot load the timelock wasm: ${(err as Error).message}`,
        {
          cause: err,
          retryable: false,
        },
      );
    }
  })();
  return wasmPromise;
}

const CURVE = "bls12_381";

/** Timelock-encrypt `plaintext` to a drand quicknet round; returns the compressed ciphertext. */
export async function timelockEncrypt(
  plaintext: Uint8Array,
  round: number,
  opts: { publicKeyHex?: string; ephemeralKey?: Uint8Array } = {},
): Promise<Uint8Array> {
  const wasm = await timelockWasm();
  const pub = Buffer.from(opts.publicKeyHex ?? DRAND_QUICKNET.publicKey, "hex");
  const esk = opts.ephemeralKey ?? randomBytes(32);
  try {
    const ct = wasm.tle(
      Array.from(drandIdentity(round)),
      Array.from(plaintext),
      Array.from(esk),
      Array.from(pub),
      CURVE,
    );
    return Uint8Array.from(ct);
  } catch (err) {
    throw new InfraError(
      "timelock_encrypt_failed",
      `timelock encryption failed: ${String((err as Error)?.message ?? err)}`,
      {
        cause: err,
        retryable: false,
      },
    );
  }
}

/** Decrypt with the drand signature of the round (what the chain does at reveal time). */
export async function timelockDecrypt(
  ciphertext: Uint8Array,
  roundSignature: Uint8Array,
): Promise<Uint8Array> {
  const wasm = await timelockWasm();
  return Uint8Array.from(wasm.tld(ciphertext, Array.from(roundSignature), CURVE));
}

/** Decrypt with the ephemeral key used at encryption (tests: bypasses the timelock). */
export async function timelockOpenWithEphemeral(
  ciphertext: Uint8Array,
  ephemeralKey: Uint8Array,
): Promise<Uint8Array> {
  const wasm = await timelockWasm();
  return Uint8Array.from(wasm.decrypt(ciphertext, Array.from(ephemeralKey), CURVE));
}

function compactLen(n: number): Uint8Array {
  if (n < 1 << 6) return Uint8Array.of(n << 2);
  if (n < 1 << 14) return Uint8Array.of(((n << 2) | 1) & 0xff, n >> 6);
  const v = (n << 2) | 2;
  return Uint8Array.of(v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, (v >>> 24) & 0xff);
}

function u16Vec(values: readonly number[]): Uint8Array {
  const out = new Uint8Array(values.length * 2);
  values.forEach((v, i) => {
    out[2 * i] = v & 0xff;
    out[2 * i + 1] = v >> 8;
  });
  return Buffer.concat([compactLen(values.length), out]);
}

function u64le(v: number | bigint): Uint8Array {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(v));
  return b;
}

/**
 * SCALE of subtensor's WeightsTlockPayload. With `hotkey` (commit_timelocked_weights, CRv4):
 * {hotkey: Vec<u8>, uids: Vec<u16>, values: Vec<u16>, version_key: u64}; without
 * (commit_crv3_weights): {uids, values, version_key}.
 */
export function encodeWeightsPayload(p: {
  hotkey?: Uint8Array;
  uids: readonly number[];
  values: readonly number[];
  versionKey: number | bigint;
}): Uint8Array {
  const parts: Uint8Array[] = [];
  if (p.hotkey) parts.push(compactLen(p.hotkey.length), p.hotkey);
  parts.push(u16Vec(p.uids), u16Vec(p.values), u64le(p.versionKey));
  return Buffer.concat(parts);
}

export interface TimelockedCommit {
  commit: Uint8Array;
  revealRound: number;
}

export async function buildTimelockedCommit(
  p: { hotkey?: Uint8Array; uids: readonly number[]; values: readonly number[]; versionKey: number | bigint },
  round: RevealRoundInput,
  opts: { ephemeralKey?: Uint8Array } = {},
): Promise<TimelockedCommit> {
  const r = revealRound(round);
  return { commit: await timelockEncrypt(encodeWeightsPayload(p), r, opts), revealRound: r };
}
