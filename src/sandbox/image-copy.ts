/**
 * Images from one engine to another through their APIs: `GET /images/get` (one tar for all the
 * references, shared layers once) piped into `POST /images/load`. The image ids are content
 * addresses, so what arrives is byte for byte what the source engine runs: every engine of the pool
 * runs the very images whose digests the verdict reports, and no engine needs a build mirror.
 */
import { PassThrough, type Readable } from "node:stream";
import { InfraError, isAbortError } from "../errors.js";
import { type Docker, dockerMessage, isNotFound } from "./docker.js";

/** The engine's id of `ref`, or undefined when it has no such image. */
export async function imageIdOf(docker: Docker, ref: string): Promise<string | undefined> {
  try {
    return ((await docker.getImage(ref).inspect()) as { Id?: string }).Id;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw new InfraError("image_inspect_failed", `inspecting ${ref}: ${dockerMessage(err)}`, { cause: err });
  }
}

/** Read a load/pull answer to its end; the engine reports failures inside the stream. */
async function drainJsonLines(stream: Readable, what: string, onChunk?: () => void): Promise<string[]> {
  const said: string[] = [];
  let buf = "";
  let error: string | undefined;
  for await (const chunk of stream) {
    onChunk?.();
    buf += chunk.toString();
    for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (!line) continue;
      try {
        const ev = JSON.parse(line) as {
          stream?: string;
          error?: string;
          errorDetail?: { message?: string };
        };
        if (ev.error || ev.errorDetail) error = ev.errorDetail?.message ?? ev.error;
        else if (ev.stream?.trim()) said.push(ev.stream.trim());
      } catch {
        said.push(line);
      }
    }
    if (buf.length > 1 << 20) buf = "";
  }
  if (error) throw new InfraError("image_copy_failed", `${what}: ${error}`);
  return said;
}

export interface CopyProgress {
  bytes: number;
}

/**
 * Copy `refs` (tags or ids present on `from`) to `to` in one stream. Resolves with the bytes moved.
 * Fails with `image_copy_failed` (infra) naming the side that failed, or when no byte moved and the
 * target said nothing for `stallMs` (an engine that accepts the stream and stops reading must not
 * hold the copy, and every episode waiting on it, forever).
 */
export async function copyImages(
  from: Docker,
  to: Docker,
  refs: readonly string[],
  opts: { signal?: AbortSignal; onProgress?: (p: CopyProgress) => void; stallMs?: number } = {},
): Promise<{ bytes: number }> {
  const stallMs = opts.stallMs ?? 600_000;
  const stall = new AbortController();
  const signal = opts.signal ? AbortSignal.any([opts.signal, stall.signal]) : stall.signal;
  let timer: NodeJS.Timeout | undefined;
  const alive = () => {
    clearTimeout(timer);
    timer = setTimeout(
      () =>
        stall.abort(
          new InfraError(
            "image_copy_failed",
            `copying ${refs.join(", ")}: no progress for ${Math.round(stallMs / 1000)} s`,
          ),
        ),
      stallMs,
    );
    timer.unref();
  };
  /** The stall's own error, else `err` as it came. */
  const why = (err: unknown) => (stall.signal.aborted ? stall.signal.reason : err);
  alive();
  try {
    let source: Readable;
    try {
      type SaveMany = (o: Record<string, unknown>) => Promise<unknown>;
      source = (await (from as unknown as { getImages: SaveMany }).getImages({
        names: [...refs],
        abortSignal: signal,
      })) as Readable;
    } catch (err) {
      if (stall.signal.aborted || isAbortError(err)) throw why(err);
      throw new InfraError(
        "image_copy_failed",
        `saving ${refs.join(", ")} on the source engine: ${dockerMessage(err)}`,
        { cause: err },
      );
    }
    let bytes = 0;
    let last = 0;
    const counted = new PassThrough();
    source.on("data", (c: Buffer) => {
      alive();
      bytes += c.length;
      if (bytes - last >= 8 * 1024 * 1024) {
        last = bytes;
        opts.onProgress?.({ bytes });
      }
    });
    source.on("error", (err) => counted.destroy(err));
    source.pipe(counted);
    const onStall = () => {
      source.destroy();
      counted.destroy(stall.signal.reason as Error);
    };
    stall.signal.addEventListener("abort", onStall, { once: true });
    try {
      const answer = (await to.loadImage(
        counted as never,
        { quiet: true, abortSignal: signal } as never,
      )) as unknown as Readable;
      await drainJsonLines(answer, `loading ${refs.join(", ")} into the engine`, alive);
    } catch (err) {
      source.destroy();
      if (stall.signal.aborted) throw why(err);
      if (isAbortError(err)) throw err;
      if (err instanceof InfraError) throw err;
      throw new InfraError("image_copy_failed", `loading ${refs.join(", ")}: ${dockerMessage(err)}`, {
        cause: err,
      });
    } finally {
      stall.signal.removeEventListener("abort", onStall);
    }
    opts.onProgress?.({ bytes });
    return { bytes };
  } finally {
    clearTimeout(timer);
  }
}

/** Pull `repo@sha256:…` on `to`, then tag it `ref` (what the episode creates containers from). */
export async function pullDigestAs(
  to: Docker,
  repoDigest: string,
  ref: string,
  opts: { auth?: Record<string, string>; signal?: AbortSignal } = {},
): Promise<void> {
  const stream = (await to.pull(repoDigest, {
    ...(opts.auth ? { authconfig: opts.auth } : {}),
    ...(opts.signal ? { abortSignal: opts.signal } : {}),
  } as never)) as unknown as Readable;
  await drainJsonLines(stream, `pulling ${repoDigest}`);
  const at = ref.lastIndexOf(":");
  const slash = ref.lastIndexOf("/");
  const [repo, tag] = at > slash ? [ref.slice(0, at), ref.slice(at + 1)] : [ref, "latest"];
  await to.getImage(repoDigest).tag({ repo, tag });
}
