import type Dockerode from "dockerode";
import { InfraError, isAbortError } from "../errors.js";
import { callDeadline, dockerMessage, engine, engineTimeouts, isNotFound } from "./docker.js";
import {
  type ArchivedPath,
  classifyStat,
  type PathStat,
  packTar,
  parsePathStat,
  readFirstEntry,
  type TarEntry,
} from "./tar.js";

/** Upload files into a created (or running) container; paths in `entries` are relative to `dest`. */
export async function putFiles(
  c: Dockerode.Container,
  dest: string,
  entries: readonly TarEntry[],
): Promise<void> {
  const tar = await packTar(entries);
  await engine("archive_put_failed", `uploading into ${c.id.slice(0, 12)}:${dest}`, () =>
    c.putArchive(tar, { path: dest }),
  );
}

export type FetchedPath = ArchivedPath | { kind: "missing" };

/**
 * What a path in a container is, from the archive API's stat header (`HEAD /archive`): no byte
 * of the file is sent. undefined when the path does not exist.
 */
export async function statPath(
  c: Dockerode.Container,
  path: string,
  signal?: AbortSignal,
): Promise<PathStat | undefined> {
  const { callMs } = engineTimeouts(c);
  const dl = callDeadline(callMs, signal);
  let res: NodeJS.ReadableStream & { headers?: Record<string, string | string[] | undefined> };
  try {
    res = (await c.infoArchive({ path, abortSignal: dl.signal })) as typeof res;
  } catch (err) {
    dl.clear();
    if (isNotFound(err)) return undefined;
    if (dl.timedOut())
      throw new InfraError(
        "docker_timeout",
        `stat of ${path} in ${c.id.slice(0, 12)}: no answer within ${callMs} ms`,
      );
    if (isAbortError(err)) throw err;
    throw new InfraError(
      "archive_stat_failed",
      `stat of ${path} in ${c.id.slice(0, 12)}: ${dockerMessage(err)}`,
      {
        cause: err,
      },
    );
  }
  dl.clear();
  (res as unknown as { destroy?: () => void }).destroy?.();
  const stat = parsePathStat(res.headers?.["x-docker-container-path-stat"]);
  if (!stat)
    throw new InfraError(
      "archive_stat_failed",
      `stat of ${path} in ${c.id.slice(0, 12)}: no usable stat header`,
    );
  return stat;
}

/**
 * One path out of a container (running or stopped), at most `maxBytes` of it. The stat decides
 * first: a missing path, a directory, a symlink, anything not a regular file, or a file larger
 * than `maxBytes` (a sparse 16 TiB file included) is answered without reading a byte. Only a
 * regular file within the limit is copied, under a deadline (`copyMs` of the client, or the
 * caller's `signal`), and the stream is destroyed as soon as its one entry is read or turns out
 * to be something else (a file swapped between the stat and the copy).
 */
export async function getPath(
  c: Dockerode.Container,
  path: string,
  maxBytes: number,
  opts: { signal?: AbortSignal } = {},
): Promise<FetchedPath> {
  const stat = await statPath(c, path, opts.signal);
  if (stat === undefined) return { kind: "missing" };
  const decided = classifyStat(stat, maxBytes);
  if (decided) return decided;
  const { copyMs } = engineTimeouts(c);
  const dl = callDeadline(copyMs, opts.signal);
  const timeout = () =>
    new InfraError(
      "docker_timeout",
      `copying ${path} (${stat.size} bytes) out of ${c.id.slice(0, 12)}: not done within ${copyMs} ms`,
    );
  let stream: NodeJS.ReadableStream;
  try {
    stream = await c.getArchive({ path, abortSignal: dl.signal });
  } catch (err) {
    dl.clear();
    if (isNotFound(err)) return { kind: "missing" };
    if (dl.timedOut()) throw timeout();
    if (isAbortError(err)) throw err;
    throw new InfraError(
      "archive_get_failed",
      `reading ${path} from ${c.id.slice(0, 12)}: ${dockerMessage(err)}`,
      {
        cause: err,
      },
    );
  }
  try {
    return await readFirstEntry(stream, maxBytes, dl.signal);
  } catch (err) {
    if (dl.timedOut()) throw timeout();
    if (isAbortError(err)) throw err;
    throw new InfraError(
      "archive_get_failed",
      `reading ${path} from ${c.id.slice(0, 12)}: ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  } finally {
    dl.clear();
  }
}
