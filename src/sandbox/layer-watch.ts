/**
 * The disk watchdog of a container's writable layer: its bytes and its inodes, each against a
 * bound. The engine counts bytes (`SizeRw`, by walking the layer: a million empty files take it
 * ~44 s and show 0 bytes); inodes are counted by a helper container that sees the layer's upper
 * directory read-only and walks it only as far as the bound (`find | head`), so a layer of a
 * million files costs one bound's worth of walking. Either bound passed ends the watch with what
 * was measured; the caller kills.
 *
 * The helper (role `layer-count`): the watched container's own image (it has `find`), no network,
 * read-only root, every capability dropped but DAC_READ_SEARCH (a directory its owner closed is
 * still walked), its only mount the layer's upper directory, read-only; `sleep` until removed.
 * Engines whose layers are not overlay2 directories, and images without `sh`/`find` (tried once,
 * then the helper goes), have no inode count: the byte bound stays, `layer.inode_count_unavailable`.
 */
import { randomBytes } from "node:crypto";
import type Dockerode from "dockerode";
import type { Logger } from "../log.js";
import { execIn } from "./container-output.js";
import { createContainer, removeContainer, startContainer } from "./containers.js";
import type { Docker } from "./docker.js";
import type { EpisodeScope } from "./reaper.js";
import { RUNC_RUNTIME } from "./runtime.js";

export interface LayerBounds {
  limitBytes: number;
  /** Files, directories, links and whiteouts the layer may hold. */
  limitInodes: number;
  pollMs: number;
}

export interface LayerWatch extends LayerBounds {
  /** Where the inode counter is made, and the scope that removes it whatever happens. */
  docker: Docker;
  scope: EpisodeScope;
  log?: Logger;
}

/** What was measured last (each undefined until measured). */
export interface LayerUse {
  bytes?: number;
  inodes?: number;
}

/** Bytes of the container's writable layer, as the engine counts them (`GET /containers/{id}/json?size=1`). */
export async function layerBytes(c: Dockerode.Container): Promise<number | undefined> {
  const info = await c.inspect({ size: true } as Dockerode.ContainerInspectOptions).catch(() => undefined);
  const size = (info as { SizeRw?: unknown } | undefined)?.SizeRw;
  return typeof size === "number" && Number.isFinite(size) ? size : undefined;
}

/** Resolves after `ms`, or at once when `signal` fires. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

/** Counts a layer's entries up to a bound: `count(n)` is exact below n+1, n+1 at or past it. */
export interface LayerCounter {
  count(upTo: number, signal?: AbortSignal): Promise<number | undefined>;
  close(): Promise<void>;
}

/** The inode counter of `c`'s writable layer, or undefined where it cannot be counted (then the bytes alone are watched). */
export async function openLayerCounter(
  c: Dockerode.Container,
  w: Pick<LayerWatch, "docker" | "scope" | "log">,
): Promise<LayerCounter | undefined> {
  // With ?size=1, as the watchdog's own inspects: the episode's one plain inspect stays the collect's
  // (test/integration/episode-engine-timeouts.test.ts holds exactly that one).
  const info = await c.inspect({ size: true } as Dockerode.ContainerInspectOptions).catch(() => undefined);
  const data = info?.GraphDriver?.Data as { UpperDir?: string } | undefined;
  const upper = info?.GraphDriver?.Name === "overlay2" ? data?.UpperDir : undefined;
  if (!info || !upper) {
    w.log?.warn({ driver: info?.GraphDriver?.Name }, "layer.inode_count_unavailable");
    return undefined;
  }
  const name = `${info.Name.replace(/^\//, "").slice(0, 100)}-count-${randomBytes(3).toString("hex")}`;
  const helper = await startCounter(w, name, info.Image, upper);
  const counter: LayerCounter = {
    count: (upTo, signal) => countEntries(helper, upTo, signal),
    close: () => removeContainer(w.docker, name).catch(() => undefined),
  };
  // An image without `sh`, `find`, `head` or `wc` cannot count: said once, and the helper goes at once.
  if ((await counter.count(0)) !== undefined) return counter;
  w.log?.warn({ image: info.Config?.Image }, "layer.inode_count_unavailable");
  await counter.close();
  return undefined;
}

/** The helper container (see the top of this file), started; removed again when it does not start. */
async function startCounter(
  w: Pick<LayerWatch, "docker" | "scope">,
  name: string,
  image: string,
  upper: string,
): Promise<Dockerode.Container> {
  w.scope.trackContainer(name);
  const helper = await createContainer(w.docker, RUNC_RUNTIME, {
    name,
    image,
    entrypoint: ["sleep"],
    cmd: ["2147483647"],
    user: "0:0",
    labels: w.scope.labels("layer-count"),
    limits: { cpus: 0.5, memoryBytes: 64 * 1024 * 1024, pidsLimit: 32 },
    network: { kind: "none" },
    readOnlyRoot: true,
    dropAllCaps: true,
    capAdd: ["DAC_READ_SEARCH"],
    readOnlyBinds: [{ source: upper, target: "/layer" }],
    logDriver: "none",
  });
  try {
    await startContainer(helper);
  } catch (err) {
    await removeContainer(w.docker, name).catch(() => undefined);
    throw err;
  }
  return helper;
}

/** Entries of /layer in `helper`, exact below upTo+1 (upTo+1 at or past it); undefined when the walk failed. */
async function countEntries(
  helper: Dockerode.Container,
  upTo: number,
  signal?: AbortSignal,
): Promise<number | undefined> {
  const limit = AbortSignal.timeout(60_000);
  // /layer itself is the first line; a name with a newline counts twice (the count errs upwards only).
  const r = await execIn(
    helper,
    ["sh", "-c", `find /layer -xdev 2>/dev/null | head -n ${upTo + 2} | wc -l`],
    {
      signal: signal ? AbortSignal.any([signal, limit]) : limit,
    },
  ).catch(() => undefined);
  const n = Number(r?.stdout.trim());
  return r?.exitCode === 0 && Number.isInteger(n) && n > 0 ? n - 1 : undefined;
}

/** Poll `measure` every `pollMs` until it passes `limit` (resolves with it) or `signal` fires (undefined). */
async function pollPast(
  measure: () => Promise<number | undefined>,
  limit: number,
  pollMs: number,
  signal: AbortSignal,
): Promise<number | undefined> {
  while (!signal.aborted) {
    const t0 = performance.now();
    const n = await measure();
    if (signal.aborted) return undefined;
    if (n !== undefined && n > limit) return n;
    await pause(Math.max(0, pollMs - (performance.now() - t0)), signal);
  }
  return undefined;
}

/**
 * Watch `c`'s writable layer until `signal`: resolves with what was measured once the bytes or the
 * inodes are past their bound (the caller kills), or undefined when `signal` fired first; either
 * way its counter container is removed by then. `seen` keeps the last measurements. The engine counts a file's apparent size (a sparse file counts
 * whole); the inode count is exact up to its bound. Each measurement runs one at a time.
 */
export async function watchLayer(
  c: Dockerode.Container,
  w: LayerWatch,
  signal: AbortSignal,
  seen: LayerUse = {},
): Promise<LayerUse | undefined> {
  const done = new AbortController();
  const both = AbortSignal.any([signal, done.signal]);
  let counter: LayerCounter | undefined;
  const bytes = pollPast(
    async () => (seen.bytes = (await layerBytes(c)) ?? seen.bytes),
    w.limitBytes,
    w.pollMs,
    both,
  );
  const inodes = openLayerCounter(c, w)
    .catch((err: Error) => {
      w.log?.warn({ err: err.message }, "layer.inode_count_unavailable");
      return undefined;
    })
    .then((opened) => {
      counter = opened;
      if (!opened || both.aborted) return undefined;
      const measure = async () => (seen.inodes = (await opened.count(w.limitInodes, both)) ?? seen.inodes);
      return pollPast(measure, w.limitInodes, w.pollMs, both);
    });
  try {
    // The byte loop ends only past its bound or at the signal; the inode loop may have no counter.
    const over = await Promise.race([
      bytes.then((n) => (n === undefined ? undefined : { bytes: n })),
      inodes.then((n) => (n === undefined ? new Promise<never>(() => {}) : { inodes: n })),
    ]);
    return over === undefined ? undefined : { ...seen, ...over };
  } finally {
    // The counter is gone when the watch returns (nothing of an episode may outlive it); a byte
    // measurement still in flight is only an inspect and ends on its own.
    done.abort();
    await inodes.catch(() => undefined);
    await counter?.close();
  }
}
