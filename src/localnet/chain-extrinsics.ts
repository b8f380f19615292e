/**
 * Extrinsics at the local test node: the pool's admission (decode, signature, nonce order, the
 * node's rejection codes) with a record of every submission, and their inclusion in a block
 * (the timestamp inherent, each call dispatched, its events and outcome).
 */
import { u8aToHex } from "@polkadot/util";
import { blake2AsHex } from "@polkadot/util-crypto";
import { RpcError } from "./chain-rpc.js";
import type { ChainState } from "./chain-state.js";
import {
  type ChainContext,
  type FakeRuntime,
  type ParsedExtrinsic,
  parseAndVerify,
} from "./subtensor-runtime.js";

export interface ReceivedExtrinsic {
  receivedAt: number;
  hash: string;
  hex: string;
  signer: string | undefined;
  nonce: number | undefined;
  call: { section: string; method: string; args: Record<string, unknown> } | undefined;
  signatureValid: boolean;
  verifyError: string | undefined;
  /** "accepted" or the pool rejection ("1010: Invalid Transaction: …"). */
  pool: string;
  /** After inclusion: "success" or the dispatch error's name. */
  outcome: string | undefined;
  blockNumber: number | undefined;
}

export interface PoolTx {
  parsed: ParsedExtrinsic;
  record: ReceivedExtrinsic;
}

export interface BlockEvent {
  extrinsic: number;
  event: Uint8Array;
}

/**
 * Admit `hex` to the pool or throw the node's RPC error (1002, 1010, 1013, 1014); `received` gets
 * its record either way. `takeCustomRejection` is a test's one-shot custom rejection, if any.
 */
export function admitExtrinsic(
  rt: FakeRuntime,
  hex: string,
  ctx: ChainContext,
  pool: readonly PoolTx[],
  nonces: ReadonlyMap<string, number>,
  received: ReceivedExtrinsic[],
  takeCustomRejection: () => number | undefined,
): PoolTx {
  const record: ReceivedExtrinsic = {
    receivedAt: Date.now(),
    hash: blake2AsHex(Buffer.from(hex.slice(2), "hex")),
    hex,
    signer: undefined,
    nonce: undefined,
    call: undefined,
    signatureValid: false,
    verifyError: undefined,
    pool: "accepted",
    outcome: undefined,
    blockNumber: undefined,
  };
  received.push(record);
  const reject = (code: number, message: string, data?: string) => {
    record.pool = `${code}: ${message}${data ? `: ${data}` : ""}`;
    return new RpcError(code, message, data);
  };
  let parsed: ParsedExtrinsic;
  try {
    parsed = parseAndVerify(rt, hex, ctx);
  } catch (err) {
    record.verifyError = (err as Error).message;
    if (/ancient birth block/.test(record.verifyError))
      throw reject(1010, "Invalid Transaction", "Transaction has an ancient birth block");
    throw reject(1002, "Verification Error", `Runtime error: Could not decode: ${record.verifyError}`);
  }
  record.signer = parsed.signer;
  record.nonce = parsed.nonce;
  record.signatureValid = parsed.signatureValid;
  record.verifyError = parsed.verifyError;
  try {
    record.call = rt.decodeCall(parsed.call);
  } catch (err) {
    throw reject(
      1002,
      "Verification Error",
      `Runtime error: Could not decode call: ${(err as Error).message}`,
    );
  }
  if (!parsed.signed) throw reject(1010, "Invalid Transaction", "Transaction call is not expected");
  if (!parsed.signatureValid) throw reject(1010, "Invalid Transaction", "Transaction has a bad signature");
  if (pool.some((t) => t.parsed.hash === parsed.hash)) throw reject(1013, "Transaction Already Imported");
  const pk = parsed.signerPublicKey!;
  const stateNonce = nonces.get(pk) ?? 0;
  const pooled = pool.filter((t) => t.parsed.signerPublicKey === pk).length;
  if (parsed.nonce! < stateNonce) throw reject(1010, "Invalid Transaction", "Transaction is outdated");
  if (parsed.nonce! < stateNonce + pooled) throw reject(1014, "Priority is too low", "(0 vs 0)");
  if (parsed.nonce! > stateNonce + pooled)
    throw reject(1010, "Invalid Transaction", "Transaction will be valid in the future");
  const custom = takeCustomRejection();
  if (custom !== undefined) throw reject(1010, "Invalid Transaction", `Custom error: ${custom}`);
  return { parsed, record };
}

/** A block's extrinsics (the timestamp inherent first) and events, each transaction dispatched on `state`. */
export function includeExtrinsics(
  rt: FakeRuntime,
  state: ChainState,
  txs: readonly PoolTx[],
  number: number,
): { extrinsics: string[]; events: BlockEvent[] } {
  const inherent = u8aToHex(rt.timestampInherent(Date.now()));
  const extrinsics: string[] = [inherent];
  const events: BlockEvent[] = [
    {
      extrinsic: 0,
      event: rt.encodeEvent("System", "ExtrinsicSuccess", [
        { weight: { refTime: 1, proofSize: 0 }, class: "Mandatory", paysFee: "Yes" },
      ]),
    },
  ];
  for (const tx of txs) {
    const index = extrinsics.length;
    extrinsics.push(tx.parsed.hex);
    const pk = tx.parsed.signerPublicKey!;
    state.nonces.set(pk, (state.nonces.get(pk) ?? 0) + 1);
    const info = { weight: { refTime: 100_000, proofSize: 0 }, class: "Normal", paysFee: "No" };
    const result = state.dispatch(tx.parsed, number);
    for (const e of result.events) events.push({ extrinsic: index, event: e });
    if (result.error === undefined) {
      events.push({ extrinsic: index, event: rt.encodeEvent("System", "ExtrinsicSuccess", [info]) });
      tx.record.outcome = "success";
    } else {
      const error = new Uint8Array(4);
      error[0] = rt.errorIndex("SubtensorModule", result.error);
      const dispatchError = {
        Module: { index: rt.pallet("SubtensorModule").index.toNumber(), error: u8aToHex(error) },
      };
      events.push({
        extrinsic: index,
        event: rt.encodeEvent("System", "ExtrinsicFailed", [dispatchError, info]),
      });
      tx.record.outcome = result.error;
    }
    tx.record.blockNumber = number;
  }
  return { extrinsics, events };
}
