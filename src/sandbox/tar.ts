/**
 * Archives in and out of containers (the engine's archive API speaks tar). Uploads are assembled
 * in memory: policy files, SKILL.md, tests and one deliverable are all small and bounded.
 */
import { Readable } from "node:stream";
import tar from "tar-stream";

export interface TarEntry {
  /** Path inside the archive, relative (no leading slash). */
  name: string;
  type?: "file" | "directory";
  data?: Buffer | string;
  mode?: number;
  uid?: number;
  gid?: number;
}

/** A deterministic tar (fixed mtime, given order) of the entries. */
export async function packTar(entries: readonly TarEntry[]): Promise<Buffer> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  const done = new Promise<Buffer>((resolve, reject) => {
    pack.on("data", (c) => {
      chunks.push(c as Buffer);
    });
    pack.on("end", () => resolve(Buffer.concat(chunks)));
    pack.on("error", reject);
  });
  const mtime = new Date(0);
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

/**
 * Read the first entry of a tar stream from GET /archive (the path itself). A file over `maxBytes`
 * is not buffered: reported as too_large so a runaway deliverable cannot exhaust our memory.
 */
export async function readFirstEntry(stream: NodeJS.ReadableStream, maxBytes: number): Promise<ArchivedPath> {
  const extract = tar.extract();
  return new Promise<ArchivedPath>((resolve, reject) => {
    let result: ArchivedPath | undefined;
    extract.on("entry", (header, body, next) => {
      if (result !== undefined) {
        body.resume();
        body.on("end", next);
        return;
      }
      const size = header.size ?? 0;
      if (header.type === "file" || header.type === "contiguous-file") {
        if (size > maxBytes) {
          result = { kind: "too_large", size };
          body.resume();
          body.on("end", next);
          return;
        }
        const parts: Buffer[] = [];
        body.on("data", (c) => {
          parts.push(c as Buffer);
        });
        body.on("end", () => {
          result = { kind: "file", data: Buffer.concat(parts), mode: (header.mode ?? 0o644) & 0o7777, size };
          next();
        });
        return;
      }
      if (header.type === "directory") result = { kind: "directory" };
      else if (header.type === "symlink" || header.type === "link")
        result = { kind: "symlink", target: header.linkname ?? "" };
      else result = { kind: "other", type: String(header.type) };
      body.resume();
      body.on("end", next);
    });
    extract.on("finish", () => resolve(result ?? { kind: "other", type: "empty-archive" }));
    extract.on("error", reject);
    (stream as Readable).on("error", reject);
    (stream as Readable).pipe(extract);
  });
}

export function bufferStream(buf: Buffer): Readable {
  return Readable.from([buf]);
}
