/**
 * The runtime side of the fake subtensor node: real metadata from the fixture, a TypeRegistry
 * over it, storage keys/values, events, and an extrinsic parser + signature check that build the
 * signing payload from the metadata's signed-extension list, independently of polkadot-js's signer.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { expandMetadata, Metadata, TypeRegistry } from "@polkadot/types";
import type { Codec } from "@polkadot/types/types";
import {
  compactAddLength,
  compactFromU8a,
  compactToU8a,
  hexToU8a,
  u8aConcat,
  u8aToHex,
} from "@polkadot/util";
import { blake2AsU8a, encodeAddress, sr25519Verify } from "@polkadot/util-crypto";

export type FixtureName = "finney-spec219" | "testnet-spec224";

export interface RuntimeFixture {
  genesisHash: string;
  chainName: string;
  specName: string;
  specVersion: number;
  txVersion: number;
  metadata: string;
}

export function loadFixture(name: FixtureName): RuntimeFixture {
  const path = fileURLToPath(new URL(`./fixtures/${name}.json`, import.meta.url));
  return JSON.parse(readFileSync(path, "utf8")) as RuntimeFixture;
}

type Decorated = ReturnType<typeof expandMetadata>;
type StorageFn = Decorated["query"][string][string];

export class FakeRuntime {
  readonly registry = new TypeRegistry();
  readonly metadata: Metadata;
  readonly decorated: Decorated;
  readonly fixture: RuntimeFixture;

  constructor(fixture: RuntimeFixture) {
    this.fixture = fixture;
    this.metadata = new Metadata(this.registry, fixture.metadata as `0x${string}`);
    this.registry.setMetadata(this.metadata, undefined, undefined, true);
    this.decorated = expandMetadata(this.registry, this.metadata);
  }

  private get v14() {
    return this.metadata.asV14;
  }

  pallet(name: string) {
    const p = this.v14.pallets.find((x) => x.name.toString() === name);
    if (!p) throw new Error(`fake runtime: no pallet ${name}`);
    return p;
  }

  hasStorage(pallet: string, item: string): boolean {
    const p = this.v14.pallets.find((x) => x.name.toString() === pallet);
    return !!p?.storage.isSome && p.storage.unwrap().items.some((i) => i.name.toString() === item);
  }

  private storageFn(pallet: string, item: string): StorageFn {
    const section = pallet.charAt(0).toLowerCase() + pallet.slice(1);
    const method = item.charAt(0).toLowerCase() + item.slice(1);
    const fn = this.decorated.query[section]?.[method];
    if (!fn) throw new Error(`fake runtime: no storage ${pallet}.${item}`);
    return fn;
  }

  storageKey(pallet: string, item: string, ...keys: unknown[]): string {
    const fn = this.storageFn(pallet, item);
    // The decorated function returns the key as Bytes (length-prefixed); RPC wants the raw key.
    const prefixed = fn(...keys);
    const [offset] = compactFromU8a(prefixed);
    return u8aToHex(prefixed.subarray(offset));
  }

  storageValue(pallet: string, item: string, value: unknown): string {
    const fn = this.storageFn(pallet, item);
    const type = fn.meta.type;
    const id = type.isPlain ? type.asPlain : type.asMap.value;
    // toU8a, not toHex: toHex of an integer codec is its big-endian number, not its SCALE bytes.
    return u8aToHex(
      this.registry.createTypeUnsafe<Codec>(this.registry.createLookupType(id), [value]).toU8a(),
    );
  }

  errorIndex(pallet: string, name: string): number {
    const p = this.pallet(pallet);
    const variants = this.v14.lookup.getSiType(p.errors.unwrap().type).def.asVariant.variants;
    const v = variants.find((x) => x.name.toString() === name);
    if (!v) throw new Error(`fake runtime: ${pallet} has no error ${name}`);
    return v.index.toNumber();
  }

  hasEvent(pallet: string, name: string): boolean {
    const p = this.pallet(pallet);
    if (p.events.isNone) return false;
    return this.v14.lookup
      .getSiType(p.events.unwrap().type)
      .def.asVariant.variants.some((v) => v.name.toString() === name);
  }

  /** SCALE of RuntimeEvent: [pallet index, variant index, ...fields], fields encoded with their metadata types. */
  encodeEvent(pallet: string, name: string, values: unknown[]): Uint8Array {
    const p = this.pallet(pallet);
    const variants = this.v14.lookup.getSiType(p.events.unwrap().type).def.asVariant.variants;
    const v = variants.find((x) => x.name.toString() === name);
    if (!v) throw new Error(`fake runtime: ${pallet} has no event ${name}`);
    if (v.fields.length !== values.length)
      throw new Error(`fake runtime: ${pallet}.${name} takes ${v.fields.length} fields`);
    const fields = v.fields.map((f, i) =>
      this.registry.createTypeUnsafe<Codec>(this.registry.createLookupType(f.type), [values[i]]).toU8a(),
    );
    return u8aConcat(Uint8Array.of(p.index.toNumber(), v.index.toNumber()), ...fields);
  }

  /** SCALE of Vec<EventRecord> with phase ApplyExtrinsic(index) and no topics. */
  encodeEventRecords(records: { extrinsic: number; event: Uint8Array }[]): string {
    const parts = records.map((r) => {
      const phase = new Uint8Array(5);
      phase[0] = 0;
      new DataView(phase.buffer).setUint32(1, r.extrinsic, true);
      return u8aConcat(phase, r.event, Uint8Array.of(0));
    });
    return u8aToHex(u8aConcat(compactToU8a(records.length), ...parts));
  }

  /** An unsigned Timestamp.set inherent, as every real block carries first. */
  timestampInherent(nowMs: number): Uint8Array {
    const call = this.decorated.tx.timestamp!.set!(nowMs).toU8a();
    return compactAddLength(u8aConcat(Uint8Array.of(0x04), call));
  }

  decodeCall(call: Uint8Array): { section: string; method: string; args: Record<string, unknown> } {
    const c = this.registry.createType("Call", call);
    const json = c.toJSON() as { args?: Record<string, unknown> };
    return { section: c.section, method: c.method, args: json.args ?? {} };
  }
}

export interface ChainContext {
  genesisHash: string;
  specVersion: number;
  txVersion: number;
  /** Number of the block the transaction is validated for (best + 1). */
  currentBlock: number;
  blockHashAt(n: number): string | undefined;
}

export interface ParsedExtrinsic {
  hash: string;
  hex: string;
  signed: boolean;
  signer?: string;
  signerPublicKey?: string;
  nonce?: number;
  tip?: bigint;
  era?: { immortal: true } | { period: number; phase: number; birth: number };
  call: Uint8Array;
  /** The exact bytes the signature must cover (before hashing when > 256 bytes). */
  signingPayload?: string;
  signatureValid: boolean;
  verifyError?: string;
}

function readEra(bytes: Uint8Array, current: number) {
  if (bytes[0] === 0) return { length: 1, era: { immortal: true as const } };
  const encoded = bytes[0]! | (bytes[1]! << 8);
  const period = 2 << (encoded % 16);
  const quantizeFactor = Math.max(period >> 12, 1);
  const phase = (encoded >> 4) * quantizeFactor;
  const birth = Math.floor((Math.max(current, phase) - phase) / period) * period + phase;
  return { length: 2, era: { period, phase, birth } };
}

type SignedExtension = FakeRuntime["metadata"]["asV14"]["extrinsic"]["signedExtensions"][number];

/** What a signed extrinsic's extensions carry: their bytes in order and the values the pool reads. */
interface ExtensionsRead {
  extraParts: Uint8Array[];
  additionalParts: Uint8Array[];
  nonce?: number;
  tip?: bigint;
  era: ParsedExtrinsic["era"];
  /** Where the call starts in the body. */
  end: number;
}

/**
 * Parse a v4 extrinsic by hand and verify its sr25519 signature over
 * call ‖ extra ‖ additional, where extra/additional come from the metadata's signed
 * extensions in order: spec/tx version, genesis, the era's birth block hash, nonce, tip,
 * CheckMetadataHash mode (additional None when the mode is 0).
 */
export function parseAndVerify(rt: FakeRuntime, hex: string, ctx: ChainContext): ParsedExtrinsic {
  const bytes = hexToU8a(hex);
  const hash = u8aToHex(blake2AsU8a(bytes, 256));
  const [offset, len] = compactFromU8a(bytes);
  const body = bytes.subarray(offset);
  if (body.length !== len.toNumber()) throw new Error("length prefix does not match");
  const version = body[0]!;
  if ((version & 0x7f) !== 4) throw new Error(`extrinsic version ${version & 0x7f} unsupported`);
  if ((version & 0x80) === 0)
    return {
      hash,
      hex,
      signed: false,
      call: body.subarray(1),
      signatureValid: false,
      verifyError: "unsigned",
    };
  const { signerPk, signature } = readSigner(body);
  const exts = readExtensions(rt, body, 1 + 33 + 65, ctx);
  const call = body.subarray(exts.end);
  const payload = u8aConcat(call, ...exts.extraParts, ...exts.additionalParts);
  const message = payload.length > 256 ? blake2AsU8a(payload, 256) : payload;
  const signatureValid = sr25519Verify(message, signature, signerPk);
  return {
    hash,
    hex,
    signed: true,
    signer: encodeAddress(signerPk, 42),
    signerPublicKey: u8aToHex(signerPk),
    nonce: exts.nonce,
    tip: exts.tip,
    era: exts.era,
    call,
    signingPayload: u8aToHex(payload),
    signatureValid,
    ...(signatureValid ? {} : { verifyError: "bad signature" }),
  };
}

/** The signer (MultiAddress::Id only) and its sr25519 signature, right after the version byte. */
function readSigner(body: Uint8Array): { signerPk: Uint8Array; signature: Uint8Array } {
  let p = 1;
  if (body[p] !== 0x00) throw new Error("only MultiAddress::Id signers are supported");
  const signerPk = body.subarray(p + 1, p + 33);
  p += 33;
  const sigType = body[p]!;
  if (sigType !== 0x01) throw new Error(`signature type ${sigType} is not sr25519`);
  return { signerPk, signature: body.subarray(p + 1, p + 65) };
}

/** Each signed extension in metadata order: its extra bytes from the body, then its additional-signed bytes. */
function readExtensions(rt: FakeRuntime, body: Uint8Array, start: number, ctx: ChainContext): ExtensionsRead {
  const read: ExtensionsRead = { extraParts: [], additionalParts: [], era: undefined, end: start };
  for (const ext of rt.metadata.asV14.extrinsic.signedExtensions) {
    const id = ext.identifier.toString();
    const rest = body.subarray(read.end);
    let extra: Uint8Array;
    let metadataHashMode = 0;
    if (id === "CheckMortality") {
      const e = readEra(rest, ctx.currentBlock);
      extra = rest.subarray(0, e.length);
      read.era = e.era;
    } else {
      const codec = rt.registry.createTypeUnsafe<Codec>(rt.registry.createLookupType(ext.type), [rest]);
      extra = rest.subarray(0, codec.encodedLength);
      if (id === "CheckNonce") read.nonce = compactFromU8a(extra)[1].toNumber();
      if (id === "ChargeTransactionPayment") read.tip = BigInt(compactFromU8a(extra)[1].toString());
      if (id === "CheckMetadataHash") metadataHashMode = extra[0] ?? 0;
    }
    read.extraParts.push(extra);
    read.end += extra.length;
    const additional = additionalSigned(rt, ext, id, ctx, read.era, metadataHashMode);
    if (additional) read.additionalParts.push(additional);
  }
  return read;
}

const u32le = (n: number) => {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, n, true);
  return b;
};

/** One extension's additional-signed bytes (what the signer signs but does not send); undefined when none. */
function additionalSigned(
  rt: FakeRuntime,
  ext: SignedExtension,
  id: string,
  ctx: ChainContext,
  era: ParsedExtrinsic["era"],
  metadataHashMode: number,
): Uint8Array | undefined {
  switch (id) {
    case "CheckSpecVersion":
      return u32le(ctx.specVersion);
    case "CheckTxVersion":
      return u32le(ctx.txVersion);
    case "CheckGenesis":
      return hexToU8a(ctx.genesisHash);
    case "CheckMortality": {
      if (!era || "immortal" in era) return hexToU8a(ctx.genesisHash);
      const h = ctx.blockHashAt(era.birth);
      if (!h) throw new Error(`ancient birth block ${era.birth}`);
      return hexToU8a(h);
    }
    case "CheckMetadataHash":
      if (metadataHashMode !== 0)
        throw new Error("CheckMetadataHash mode Enabled is not supported by the fake");
      return Uint8Array.of(0);
    default: {
      const add = rt.metadata.asV14.lookup.getTypeDef(ext.additionalSigned).type;
      if (add !== "Null" && add !== "()")
        throw new Error(`unknown signed extension ${id} with additional ${add}`);
      return undefined;
    }
  }
}
