/**
 * Pulling an image from a registry through the engine (dockerode `pull`), with progress, a
 * deadline, and the facts a verdict records: the image id before and after (did the pull change
 * anything?) and the registry digest (RepoDigests). A failed pull falls back to the local copy
 * when there is one (the caller warns); with no local copy the image is missing: an infra error.
 */
import { InfraError, isAbortError } from "../errors.js";
import { type Docker, dockerMessage, isNotFound } from "./docker.js";

export interface RegistryAuth {
  username: string;
  password: string;
  serveraddress: string;
}

export interface PullProgress {
  ref: string;
  /** Layers seen, and how many are done (downloaded or already present). */
  layers: number;
  layersDone: number;
  /** Bytes downloaded so far over the layers that report sizes. */
  bytes: number;
  totalBytes: number;
}

export interface PulledImage {
  ref: string;
  /** The engine's image id (sha256:…). */
  id: string;
  /** The registry digest of `ref`'s repository (sha256:…), else the image id (a local-only image). */
  digest: string;
  /** The pull brought a different image than the one present before (which is removed when unused). */
  changed: boolean;
  /** The image was not here before the pull, or the pull changed it. */
  isNew: boolean;
  /** The pull failed and the local copy is used (`pullError` says why). */
  fromCache: boolean;
  pullError?: string;
}

/** `repo` of `repo:tag` / `repo@digest` / `registry:port/repo:tag`. */
export function repositoryOf(ref: string): string {
  const noDigest = ref.split("@")[0]!;
  const slash = noDigest.lastIndexOf("/");
  const colon = noDigest.lastIndexOf(":");
  return colon > slash ? noDigest.slice(0, colon) : noDigest;
}

/** The tag of a reference (`latest` when it names none), as upstream's _sandbox_tag. */
export function tagOf(ref: string): string {
  const noDigest = ref.split("@")[0]!;
  const last = noDigest.split("/").pop()!;
  return last.includes(":") ? last.slice(last.lastIndexOf(":") + 1) : "latest";
}

/** The digest for `ref` among an image's RepoDigests (`repo@sha256:…`): its own repository's, else the first. */
export function digestFor(ref: string, repoDigests: readonly string[] | undefined, id: string): string {
  const repo = repositoryOf(ref);
  const all = repoDigests ?? [];
  const own = all.find((d) => d.split("@")[0] === repo) ?? all[0];
  return own ? own.slice(own.indexOf("@") + 1) : id;
}

async function inspect(
  docker: Docker,
  ref: string,
): Promise<{ id: string; repoDigests: string[] } | undefined> {
  try {
    const info = await docker.getImage(ref).inspect();
    return { id: info.Id, repoDigests: info.RepoDigests ?? [] };
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw new InfraError("image_inspect_failed", `inspecting ${ref}: ${dockerMessage(err)}`, { cause: err });
  }
}

interface PullEvent {
  status?: string;
  id?: string;
  error?: string;
  errorDetail?: { message?: string };
  progressDetail?: { current?: number; total?: number };
}

/** Pull `ref`; on failure use the local copy when present. */
export async function pullImage(
  docker: Docker,
  ref: string,
  opts: {
    auth?: RegistryAuth;
    signal?: AbortSignal;
    timeoutMs?: number;
    onProgress?: (p: PullProgress) => void;
  } = {},
): Promise<PulledImage> {
  const before = await inspect(docker, ref);
  let pullError: string | undefined;
  const timeout = AbortSignal.timeout(opts.timeoutMs ?? 30 * 60_000);
  const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
  try {
    const stream = (await docker.pull(ref, {
      ...(opts.auth ? { authconfig: opts.auth } : {}),
      abortSignal: signal,
    })) as NodeJS.ReadableStream;
    const layers = new Map<string, { current: number; total: number; done: boolean }>();
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        (stream as NodeJS.ReadableStream & { destroy?: (e?: Error) => void }).destroy?.();
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      docker.modem.followProgress(
        stream,
        (err: Error | null, events: PullEvent[]) => {
          signal.removeEventListener("abort", onAbort);
          const failed = err?.message ?? events?.find((e) => e.error)?.error;
          if (failed) reject(new Error(failed));
          else resolve();
        },
        (e: PullEvent) => {
          if (e.error) return;
          if (!e.id || !opts.onProgress) return;
          const l = layers.get(e.id) ?? { current: 0, total: 0, done: false };
          if (e.progressDetail?.total) l.total = e.progressDetail.total;
          if (e.progressDetail?.current !== undefined && /Downloading/.test(e.status ?? ""))
            l.current = e.progressDetail.current;
          if (/Pull complete|Already exists|Download complete/.test(e.status ?? "")) {
            l.done = true;
            if (l.total) l.current = l.total;
          }
          layers.set(e.id, l);
          const all = [...layers.values()];
          opts.onProgress({
            ref,
            layers: all.length,
            layersDone: all.filter((x) => x.done).length,
            bytes: all.reduce((n, x) => n + x.current, 0),
            totalBytes: all.reduce((n, x) => n + x.total, 0),
          });
        },
      );
    });
  } catch (err) {
    if (opts.signal?.aborted) throw err;
    pullError = isAbortError(err) ? "timed out" : dockerMessage(err);
  }
  const after = await inspect(docker, ref);
  // A re-pushed tag leaves the image it replaced without a name: remove it (as upstream does) unless
  // something still uses it.
  if (before && after && before.id !== after.id)
    await docker
      .getImage(before.id)
      .remove()
      .catch(() => undefined);
  if (!after)
    throw new InfraError(
      "image_missing",
      `image ${ref} could not be pulled (${pullError ?? "no image after the pull"}) and is not present locally`,
    );
  return {
    ref,
    id: after.id,
    digest: digestFor(ref, after.repoDigests, after.id),
    changed: before !== undefined && before.id !== after.id,
    isNew: before === undefined || before.id !== after.id,
    fromCache: pullError !== undefined,
    ...(pullError !== undefined ? { pullError } : {}),
  };
}
