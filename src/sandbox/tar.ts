/**
 * Archives in and out of containers (the engine's archive API speaks tar). Uploads are assembled
 * in memory: policy files, SKILL.md, tests and one deliverable are all small and bounded. Reads
 * are decided by the path's stat and the entry's header, never by draining what a container left.
 */
import { Readable } from "node:stream";
import tar from "tar-stream";
import { z } from "zod";

export interface TarEntry {
  /** Path inside the archive, relative (no leading slash). */
  name: string;
  type?: "file" | "directory";
  data?: Buffer | string;
  mode?: number;
  uid?: number;
  gid?: number;
}

/** A tar of the entries in the given order; deterministic with the default mtime (the epoch). */
export async function packTar(entries: readonly TarEntry[], opts: { mtime?: Date } = {}): Promise<Buffer> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  const done = new Promise<Buffer>((resolve, reject) => {
    pack.on("data", (c) => {
      chunks.push(c as Buffer);
    });
    pack.on("end", () => resolve(Buffer.concat(chunks)));
    pack.on("error", reject);
  });
  const mtime = opts.mtime ?? new Date(0);
  for (const e of entries) {
    const name = e.name.replace(/^\/+/, "");
    if (e.type === "directory") {
      pack.entry({ name, type: "directory", mode: e.mode ?? 0o755, uid: e.uid ?? 0, gid: e.gid ?? 0, mtime });
    } else {
      const data = typeof e.data === "string" ? Buffer.from(e.data, "utf8") : (e.data ?? Buffer.alloc(0));
      pack.entry(
        { name, type: "file", mode: e.mode ?? 0o644, uid: e.uid ?? 0, gid: e.gid ?? 0, mtime },
        data,
      );
    }
  }
  pack.finalize();
  return done;
}

export type ArchivedPath =
  | { kind: "file"; data: Buffer; mode: number; size: number }
  | { kind: "directory" }
  | { kind: "symlink"; target: string }
  | { kind: "other"; type: string }
  | { kind: "too_large"; size: number };

/** What the engine's archive API says of a path before any byte of it is sent (`X-Docker-Container-Path-Stat`). */
export const PathStatSchema = z
  .object({
    name: z.string(),
    size: z.number().int().nonnegative(),
    /** Go's os.FileMode: permission bits and the type in the high bits. */
    mode: z.number().int().nonnegative(),
    linkTarget: z.string().optional(),
  })
  .passthrough();
export type PathStat = z.infer<typeof PathStatSchema>;

/** The stat header's value (base64 JSON), parsed at the boundary; undefined when absent or malformed. */
export function parsePathStat(header: string | string[] | undefined): PathStat | undefined {
  const raw = Array.isArray(header) ? header[0] : header;
  if (!raw) return undefined;
  try {
    const r = PathStatSchema.safeParse(JSON.parse(Buffer.from(raw, "base64").toString("utf8")));
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
}

// Go's os.FileMode type bits (io/fs): the mode is a uint32, above what JS bitwise operators keep.
const MODE_BITS = {
  directory: 31,
  symlink: 27,
  device: 26,
  namedPipe: 25,
  socket: 24,
  charDevice: 21,
  irregular: 19,
} as const;
const bit = (mode: number, n: number) => Math.floor(mode / 2 ** n) % 2 === 1;

/**
 * Decide from the stat alone: a path that is not a regular file, or one larger than `maxBytes`,
 * is answered without reading it (a sparse 16 TiB file costs its writer nothing and would cost
 * the reader hours). undefined: a regular file within the limit, to be copied. Pure.
 */
export function classifyStat(stat: PathStat, maxBytes: number): ArchivedPath | undefined {
  if (bit(stat.mode, MODE_BITS.directory)) return { kind: "directory" };
  if (bit(stat.mode, MODE_BITS.symlink)) return { kind: "symlink", target: stat.linkTarget ?? "" };
  for (const [type, n] of Object.entries(MODE_BITS)) if (bit(stat.mode, n)) return { kind: "other", type };
  if (stat.size > maxBytes) return { kind: "too_large", size: stat.size };
  return undefined;
}

/**
 * Read the first entry of a tar stream from GET /archive (the path itself) and stop: a regular
 * file within `maxBytes` is buffered; anything else, or a file whose header says it is larger, is
 * answered at its header and the stream destroyed at once (never drained). A body that runs past
 * its header's size or `maxBytes` is cut off too. `signal` ends the read with its reason.
 */
export async function readFirstEntry(
  stream: NodeJS.ReadableStream,
  maxBytes: number,
  signal?: AbortSignal,
): Promise<ArchivedPath> {
  const source = stream as Partial<Readable> & NodeJS.ReadableStream;
  const extract = tar.extract();
  return new Promise<ArchivedPath>((resolve, reject) => {
    let settled = false;
    const stop = () => {
      signal?.removeEventListener("abort", onAbort);
      source.unpipe(extract);
      source.destroy?.();
      extract.destroy();
    };
    const done = (r: ArchivedPath) => {
      if (settled) return;
      settled = true;
      stop();
      resolve(r);
    };
    const fail = (err: unknown) => {
      if (settled) return;
      settled = true;
      stop();
      reject(err);
    };
    const onAbort = () => fail(signal?.reason ?? new DOMException("aborted", "AbortError"));
    if (signal?.aborted) return onAbort();
    signal?.addEventListener("abort", onAbort, { once: true });
    source.on("error", fail);
    extract.on("error", fail);
    extract.on("entry", (header, body) => {
      body.on("error", () => undefined);
      const size = header.size ?? 0;
      if (header.type === "file" || header.type === "contiguous-file") {
        if (size > maxBytes) return done({ kind: "too_large", size });
        const parts: Buffer[] = [];
        let got = 0;
        body.on("data", (chunk: unknown) => {
          const c = chunk as Buffer;
          got += c.length;
          if (got > size || got > maxBytes) return done({ kind: "too_large", size: Math.max(size, got) });
          parts.push(c);
        });
        body.on("end", () =>
          done({ kind: "file", data: Buffer.concat(parts), mode: (header.mode ?? 0o644) & 0o7777, size }),
        );
        return;
      }
      if (header.type === "directory") return done({ kind: "directory" });
      if (header.type === "symlink" || header.type === "link")
        return done({ kind: "symlink", target: header.linkname ?? "" });
      done({ kind: "other", type: String(header.type) });
    });
    extract.on("finish", () => done({ kind: "other", type: "empty-archive" }));
    source.pipe(extract);
  });
}

export function bufferStream(buf: Buffer): Readable {
  return Readable.from([buf]);
}
