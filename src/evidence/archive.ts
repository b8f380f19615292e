/**
 * The evidence archive: a deterministic .tar.gz of `manifest.json`, `signature.json` and
 * `blobs/<sha256>` (every stored file once, by content). Its id is the sha256 of manifest.json,
 * which names every file by digest: the archive is content-addressed through its manifest.
 * Reading is bounded (compressed and expanded size, entry count) and finds the evidence inside a
 * platform log archive too (`evidence/<id>.tar.gz`).
 */
import { gunzipSync, gzipSync } from "node:zlib";
import tar from "tar-stream";
import { InputError } from "../errors.js";
import { sha256Hex } from "../hash.js";
import { packTar, type TarEntry } from "../sandbox/index.js";
import type { SignatureFile } from "./manifest.js";

export const MANIFEST_FILE = "manifest.json";
export const SIGNATURE_FILE = "signature.json";
export const BLOB_DIR = "blobs/";
/** Where a log archive carries its evaluation's evidence. */
export const LOG_ARCHIVE_EVIDENCE = /^evidence\/([0-9a-f]{64})\.tar\.gz$/;

const MiB = 1024 * 1024;
/** Bounds on what is read: an evidence file is the validator's, but it may come from anyone. */
export const READ_LIMITS = { compressed: 256 * MiB, expanded: 1024 * MiB, entries: 20_000 } as const;

export interface SealedEvidence {
  /** sha256 of manifest.json. */
  id: string;
  gz: Buffer;
}

export interface OpenedEvidence {
  manifest: Buffer;
  signature: Buffer | undefined;
  /** Every blobs/<name> of the archive, by the name it is stored under. */
  blobs: Map<string, Buffer>;
}

export async function packEvidence(
  manifest: Buffer,
  signature: SignatureFile,
  blobs: ReadonlyMap<string, Buffer>,
): Promise<SealedEvidence> {
  const entries: TarEntry[] = [
    { name: MANIFEST_FILE, data: manifest },
    { name: SIGNATURE_FILE, data: `${JSON.stringify(signature, null, 1)}\n` },
    { name: BLOB_DIR, type: "directory" },
    ...[...blobs.keys()].sort().map((sha) => ({ name: `${BLOB_DIR}${sha}`, data: blobs.get(sha)! })),
  ];
  const gz = gzipSync(await packTar(entries), { level: 9 });
  return { id: sha256Hex(manifest), gz };
}

/** Every regular file of a tar (the caller bounded its size; the entries are bounded here). */
export async function readTar(data: Buffer): Promise<Map<string, Buffer>> {
  const files = new Map<string, Buffer>();
  const extract = tar.extract();
  let n = 0;
  const done = new Promise<void>((resolve, reject) => {
    extract.on("entry", (header, stream, next) => {
      n++;
      if (n > READ_LIMITS.entries) {
        reject(new InputError("evidence_invalid", `more than ${READ_LIMITS.entries} entries`));
        stream.resume();
        return;
      }
      const chunks: Buffer[] = [];
      stream.on("data", (c) => {
        chunks.push(c as Buffer);
      });
      stream.on("end", () => {
        if (header.type === "file") files.set(header.name.replace(/^\.\//, ""), Buffer.concat(chunks));
        next();
      });
      stream.on("error", reject);
    });
    extract.on("finish", resolve);
    extract.on("error", (err: Error) =>
      reject(new InputError("evidence_invalid", `not a tar archive: ${err.message}`)),
    );
  });
  extract.end(data);
  await done;
  return files;
}

function gunzip(data: Buffer, what: string): Buffer {
  if (data.length > READ_LIMITS.compressed)
    throw new InputError("evidence_invalid", `${what} is larger than ${READ_LIMITS.compressed} bytes`);
  try {
    return gunzipSync(data, { maxOutputLength: READ_LIMITS.expanded });
  } catch (err) {
    throw new InputError("evidence_invalid", `${what} is not a gzip file: ${(err as Error).message}`);
  }
}

function opened(files: Map<string, Buffer>): OpenedEvidence {
  const blobs = new Map<string, Buffer>();
  for (const [name, data] of files)
    if (name.startsWith(BLOB_DIR)) blobs.set(name.slice(BLOB_DIR.length), data);
  return { manifest: files.get(MANIFEST_FILE)!, signature: files.get(SIGNATURE_FILE), blobs };
}

/**
 * The evidence in `data`: an evidence archive itself, or each evidence a log archive carries
 * (`evidence/<id>.tar.gz`). None → an input error naming what the file is.
 */
export async function openEvidence(
  data: Buffer,
  what: string,
): Promise<Array<{ name: string; evidence: OpenedEvidence }>> {
  const files = await readTar(gunzip(data, what));
  if (files.has(MANIFEST_FILE)) return [{ name: what, evidence: opened(files) }];
  const inner = [...files.keys()].filter((n) => LOG_ARCHIVE_EVIDENCE.test(n)).sort();
  if (inner.length === 0)
    throw new InputError(
      "evidence_invalid",
      `${what} holds no manifest.json and no evidence/<id>.tar.gz: not a verdict's evidence nor a log archive that carries one`,
    );
  const out: Array<{ name: string; evidence: OpenedEvidence }> = [];
  for (const name of inner) {
    const nested = await readTar(gunzip(files.get(name)!, `${what}:${name}`));
    if (!nested.has(MANIFEST_FILE))
      throw new InputError("evidence_invalid", `${what}:${name} holds no manifest.json`);
    out.push({ name: `${what}:${name}`, evidence: opened(nested) });
  }
  return out;
}
