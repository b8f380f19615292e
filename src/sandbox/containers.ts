/**
 * Container lifecycle with limits, archives in and out, exec and bounded log capture. Every wait
 * takes an AbortSignal: a deadline or a shutdown is a signal, never a sleep somewhere.
 */
import { PassThrough } from "node:stream";
import type Dockerode from "dockerode";
import { InfraError, isAbortError } from "../errors.js";
import {
  callDeadline,
  type Docker,
  dockerMessage,
  dockerStatus,
  engine,
  engineTimeouts,
  ignoreGone,
  isNotFound,
} from "./docker.js";
import {
  type ArchivedPath,
  classifyStat,
  type PathStat,
  packTar,
  parsePathStat,
  readFirstEntry,
  type TarEntry,
} from "./tar.js";

export interface Limits {
  /** CPUs as a float (1 = one core). */
  cpus: number;
  memoryBytes: number;
  pidsLimit: number;
}

const GiB = 1024 ** 3;
export const SIDECAR_LIMITS: Limits = { cpus: 1, memoryBytes: GiB, pidsLimit: 256 };
export const SCENARIO_LIMITS: Limits = { cpus: 2, memoryBytes: 4 * GiB, pidsLimit: 1024 };

export type NetworkAttachment =
  | { kind: "none" }
  /** The engine host's own network namespace (the firewall helper only; no episode container). */
  | { kind: "host" }
  | { kind: "network"; name: string; aliases?: readonly string[]; ipv4?: string };

export interface ContainerSpec {
  name: string;
  image: string;
  cmd?: readonly string[];
  entrypoint?: readonly string[];
  env?: Readonly<Record<string, string>>;
  /** uid[:gid] or a user name known to the image. */
  user?: string;
  workingDir?: string;
  labels: Readonly<Record<string, string>>;
  limits: Limits;
  network: NetworkAttachment;
  extraHosts?: readonly string[];
  readOnlyRoot?: boolean;
  /** mount point → tmpfs options, e.g. {"/tmp": "rw,nosuid,nodev,size=64m"} */
  tmpfs?: Readonly<Record<string, string>>;
  /** Drop every capability (sidecar and agent; the built-in suite's verifier adds back `capAdd`). */
  dropAllCaps?: boolean;
  /** Capabilities kept on top of `dropAllCaps` (e.g. "CHOWN", "SETUID"). */
  capAdd?: readonly string[];
  /** Run a tiny init as PID 1 (reaps zombies, forwards SIGTERM to the real process). */
  init?: boolean;
  /** Bound on the engine's log file for this container. */
  logMaxBytes?: number;
  /** Keep stdin open for one attach (sendStdin): how files reach a read-only container. */
  stdin?: boolean;
  /**
   * A size limit on the writable layer (`StorageOpt.size`), where the engine's storage driver
   * supports one (overlay2 on xfs with pquota, btrfs, zfs, devicemapper); elsewhere the container
   * is created without it and the caller's disk watchdog is the bound (`storageLimited` says which).
   */
  storageBytes?: number;
  /** `none`: the engine keeps no log (the meter relay, whose stdout is the episode's traffic). */
  logDriver?: "json-file" | "none";
}

/**
 * The upstream resolver every episode container's embedded DNS forwards outside names to: the
 * loopback of the container's own namespace, where nothing listens. Names on the episode's
 * networks (`policy`, `meter`) still resolve; anything else fails inside the container. Setting an
 * upstream at all is what matters on engines hit by CVE-2024-29018: without one, the embedded
 * resolver of an internal network forwards through the host's loopback resolver (src/sandbox/dns.ts).
 */
export const EPISODE_DNS_UPSTREAM = "127.0.0.1";

export function createOptions(spec: ContainerSpec): Dockerode.ContainerCreateOptions {
  const net = spec.network;
  const hostConfig: Dockerode.HostConfig = {
    NanoCpus: Math.round(spec.limits.cpus * 1e9),
    Memory: spec.limits.memoryBytes,
    // Equal to Memory: no swap, so the memory limit is real.
    MemorySwap: spec.limits.memoryBytes,
    PidsLimit: spec.limits.pidsLimit,
    ReadonlyRootfs: spec.readOnlyRoot ?? false,
    SecurityOpt: ["no-new-privileges"],
    NetworkMode: net.kind === "network" ? net.name : net.kind,
    Init: spec.init ?? false,
    LogConfig:
      spec.logDriver === "none"
        ? { Type: "none", Config: {} }
        : {
            Type: "json-file",
            Config: { "max-size": String(spec.logMaxBytes ?? 8 * 1024 * 1024), "max-file": "1" },
          },
  };
  // The host's namespace takes no resolver setting (the engine refuses --dns with --network host).
  if (net.kind !== "host") hostConfig.Dns = [EPISODE_DNS_UPSTREAM];
  if (spec.dropAllCaps) hostConfig.CapDrop = ["ALL"];
  if (spec.capAdd?.length) hostConfig.CapAdd = [...spec.capAdd];
  if (spec.tmpfs) hostConfig.Tmpfs = { ...spec.tmpfs };
  if (spec.extraHosts?.length) hostConfig.ExtraHosts = [...spec.extraHosts];
  if (spec.storageBytes !== undefined) hostConfig.StorageOpt = { size: String(spec.storageBytes) };
  // IPv6 off inside: no link-local path to the host's [::] listeners.
  if (net.kind === "network") hostConfig.Sysctls = { "net.ipv6.conf.all.disable_ipv6": "1" };
  const opts: Dockerode.ContainerCreateOptions = {
    name: spec.name,
    Image: spec.image,
    Labels: { ...spec.labels },
    Env: Object.entries(spec.env ?? {}).map(([k, v]) => `${k}=${v}`),
    HostConfig: hostConfig,
    AttachStdin: spec.stdin ?? false,
    AttachStdout: false,
    AttachStderr: false,
    Tty: false,
    OpenStdin: spec.stdin ?? false,
    StdinOnce: spec.stdin ?? false,
  };
  if (spec.cmd) opts.Cmd = [...spec.cmd];
  if (spec.entrypoint) opts.Entrypoint = [...spec.entrypoint];
  if (spec.user) opts.User = spec.user;
  if (spec.workingDir) opts.WorkingDir = spec.workingDir;
  if (net.kind === "network")
    opts.NetworkingConfig = {
      EndpointsConfig: {
        [net.name]: {
          Aliases: [...(net.aliases ?? [])],
          ...(net.ipv4 ? { IPAMConfig: { IPv4Address: net.ipv4 } } : {}),
        },
      },
    };
  return opts;
}

/** Engines (clients) known to refuse `StorageOpt.size`: asked once, then created without it. */
const noStorageOpt = new WeakSet<object>();
const STORAGE_OPT_REFUSED = /storage-?opt|storage option|quota/i;

export async function createContainer(docker: Docker, spec: ContainerSpec): Promise<Dockerode.Container> {
  const what = `creating container ${spec.name}`;
  if (spec.storageBytes !== undefined && !noStorageOpt.has(docker.modem)) {
    try {
      return await docker.createContainer(createOptions(spec));
    } catch (err) {
      if (dockerStatus(err) === undefined || !STORAGE_OPT_REFUSED.test(dockerMessage(err)))
        return engine("container_create_failed", what, () => Promise.reject(err));
      noStorageOpt.add(docker.modem);
    }
  }
  const { storageBytes: _, ...rest } = spec;
  return engine("container_create_failed", what, () => docker.createContainer(createOptions(rest)));
}

/** Attach a created container to a second network (the engine takes one network at create time). */
export async function connectNetwork(
  docker: Docker,
  network: string,
  container: string,
  aliases: readonly string[] = [],
  ipv4?: string,
): Promise<void> {
  await engine("network_connect_failed", `connecting ${container} to ${network}`, () =>
    docker.getNetwork(network).connect({
      Container: container,
      EndpointConfig: { Aliases: [...aliases], ...(ipv4 ? { IPAMConfig: { IPv4Address: ipv4 } } : {}) },
    }),
  );
}

export async function startContainer(c: Dockerode.Container): Promise<void> {
  await engine("container_start_failed", `starting container ${c.id.slice(0, 12)}`, () => c.start());
}

/**
 * Resolve with the exit code once the container is not running; reject with the signal's reason
 * when aborted first (the container keeps running: the caller decides to kill it).
 */
export async function waitExit(c: Dockerode.Container, signal?: AbortSignal): Promise<number> {
  signal?.throwIfAborted();
  const res = (await engine("container_wait_failed", `waiting for ${c.id.slice(0, 12)}`, () =>
    c.wait({ condition: "not-running", ...(signal ? { abortSignal: signal } : {}) }),
  )) as { StatusCode?: number };
  return typeof res?.StatusCode === "number" ? res.StatusCode : -1;
}

/**
 * Ask nicely (SIGTERM, so the agent can write its summary), then SIGKILL after `graceMs`.
 * Resolves when the container has stopped. A container already gone or stopped is fine.
 */
export async function stopContainer(c: Dockerode.Container, graceMs: number): Promise<void> {
  try {
    await c.kill({ signal: "SIGTERM" });
  } catch (err) {
    if (isNotFound(err) || /is not running/i.test(dockerMessage(err))) return;
    throw new InfraError("container_kill_failed", `signalling ${c.id.slice(0, 12)}: ${dockerMessage(err)}`, {
      cause: err,
    });
  }
  const grace = AbortSignal.timeout(Math.max(1, graceMs));
  try {
    await waitExit(c, grace);
    return;
  } catch (err) {
    if (!isAbortError(err) && !grace.aborted) throw err;
  }
  await ignoreGone(() => c.kill({ signal: "SIGKILL" }));
  await waitExit(c, AbortSignal.timeout(30_000)).catch(() => undefined);
}

export async function removeContainer(docker: Docker, idOrName: string): Promise<void> {
  await engine("container_remove_failed", `removing container ${idOrName}`, () =>
    ignoreGone(() => docker.getContainer(idOrName).remove({ force: true, v: true })),
  );
}

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

/**
 * The engine refuses archive uploads into a read-only root filesystem (and a tmpfs is not visible
 * to it), so files for a read-only container travel on its stdin: attach before start, then
 * `send` once started. The container's command reads them (e.g. `tar -x -C /policy`); stdin
 * closes after the one attach (StdinOnce), which ends that read.
 */
export async function attachStdin(c: Dockerode.Container): Promise<{ send(data: Buffer): Promise<void> }> {
  const { copyMs } = engineTimeouts(c);
  const attach = callDeadline(copyMs);
  let stream: NodeJS.ReadWriteStream & { destroy?: () => void };
  try {
    stream = (await engine("container_attach_failed", `attaching to ${c.id.slice(0, 12)}`, () =>
      c.attach({
        stream: true,
        stdin: true,
        stdout: false,
        stderr: false,
        hijack: true,
        abortSignal: attach.signal,
      }),
    )) as NodeJS.ReadWriteStream & { destroy?: () => void };
  } catch (err) {
    if (attach.timedOut())
      throw new InfraError(
        "docker_timeout",
        `attaching to ${c.id.slice(0, 12)}: no answer within ${copyMs} ms`,
      );
    throw err;
  } finally {
    attach.clear();
  }
  stream.on("error", () => undefined);
  return {
    // Bounded too: a container that never reads its stdin must not hold the episode.
    send: (data: Buffer) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          stream.destroy?.();
          reject(
            new InfraError(
              "docker_timeout",
              `writing stdin of ${c.id.slice(0, 12)}: not taken within ${copyMs} ms`,
            ),
          );
        }, copyMs);
        stream.write(data, (err) => {
          if (err) {
            clearTimeout(timer);
            return reject(new InfraError("container_stdin_failed", `writing stdin: ${err.message}`));
          }
          stream.end(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }),
  };
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

/** Bytes of the container's writable layer, as the engine counts them (`GET /containers/{id}/json?size=1`). */
export async function layerBytes(c: Dockerode.Container): Promise<number | undefined> {
  const info = await c.inspect({ size: true } as Dockerode.ContainerInspectOptions).catch(() => undefined);
  const size = (info as { SizeRw?: unknown } | undefined)?.SizeRw;
  return typeof size === "number" && Number.isFinite(size) ? size : undefined;
}

/**
 * The disk watchdog of a container whose writable layer has no limit of the engine's: measure
 * the layer every `pollMs` (one measurement at a time: the engine walks the layer) until
 * `signal`; resolves with the size once it is past `limitBytes` (the caller kills), or undefined
 * when `signal` fired first. `seen` keeps the last measurement. The engine counts a file's
 * apparent size, so a sparse file counts whole: an upper bound of what the host's disk holds.
 */
export async function watchLayer(
  c: Dockerode.Container,
  limitBytes: number,
  pollMs: number,
  signal: AbortSignal,
  seen: { bytes?: number } = {},
): Promise<number | undefined> {
  while (!signal.aborted) {
    const t0 = performance.now();
    const size = await layerBytes(c);
    if (signal.aborted) return undefined;
    if (size !== undefined) {
      seen.bytes = size;
      if (size > limitBytes) return size;
    }
    const wait = Math.max(0, pollMs - (performance.now() - t0));
    await new Promise<void>((resolve) => {
      const t = setTimeout(done, wait);
      function done() {
        clearTimeout(t);
        signal.removeEventListener("abort", done);
        resolve();
      }
      signal.addEventListener("abort", done, { once: true });
    });
  }
  return undefined;
}

/** Keeps the head and the tail of a byte stream within a cap (the middle of a long log is dropped). */
export class CappedText {
  private head: Buffer[] = [];
  private headLen = 0;
  private tail: Buffer[] = [];
  private tailLen = 0;
  dropped = 0;
  constructor(private readonly cap: number) {}
  push(chunk: Buffer): void {
    const half = Math.floor(this.cap / 2);
    if (this.headLen < half) {
      const take = chunk.subarray(0, half - this.headLen);
      this.head.push(take);
      this.headLen += take.length;
      chunk = chunk.subarray(take.length);
    }
    if (!chunk.length) return;
    this.tail.push(chunk);
    this.tailLen += chunk.length;
    while (this.tailLen > this.cap - half && this.tail.length) {
      const first = this.tail[0]!;
      const excess = this.tailLen - (this.cap - half);
      if (first.length <= excess) {
        this.tail.shift();
        this.tailLen -= first.length;
        this.dropped += first.length;
      } else {
        this.tail[0] = first.subarray(excess);
        this.tailLen -= excess;
        this.dropped += excess;
      }
    }
  }
  toString(): string {
    const h = Buffer.concat(this.head).toString("utf8");
    const t = Buffer.concat(this.tail).toString("utf8");
    return this.dropped ? `${h}\n[… ${this.dropped} bytes dropped …]\n${t}` : h + t;
  }
  get truncated(): boolean {
    return this.dropped > 0;
  }
}

/** Split the engine's multiplexed stdout/stderr frames (8-byte headers) into two capped texts. */
export function demuxFrames(buf: Buffer, out: CappedText, err: CappedText): void {
  let off = 0;
  while (off + 8 <= buf.length) {
    const kind = buf[off];
    const len = buf.readUInt32BE(off + 4);
    const body = buf.subarray(off + 8, Math.min(buf.length, off + 8 + len));
    if (kind === 2) err.push(body);
    else out.push(body);
    off += 8 + len;
  }
}

export interface CapturedLogs {
  stdout: string;
  stderr: string;
  truncated: boolean;
}

export async function readLogs(c: Dockerode.Container, capBytes = 1024 * 1024): Promise<CapturedLogs> {
  const raw = await engine("container_logs_failed", `reading logs of ${c.id.slice(0, 12)}`, () =>
    c.logs({ stdout: true, stderr: true, follow: false }),
  );
  const out = new CappedText(capBytes);
  const err = new CappedText(capBytes);
  demuxFrames(Buffer.isBuffer(raw) ? raw : Buffer.from(String(raw)), out, err);
  return { stdout: out.toString(), stderr: err.toString(), truncated: out.truncated || err.truncated };
}

export interface ExecOptions {
  user?: string;
  env?: Readonly<Record<string, string>>;
  workingDir?: string;
  signal?: AbortSignal;
  outputCap?: number;
}

export interface ExecResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/**
 * Run a command in a running container and collect its output (capped). On abort the stream is
 * dropped and the call rejects; the process itself dies with the container.
 */
export async function execIn(
  c: Dockerode.Container,
  cmd: readonly string[],
  opts: ExecOptions = {},
): Promise<ExecResult> {
  opts.signal?.throwIfAborted();
  const exec = await engine("exec_failed", `exec in ${c.id.slice(0, 12)}`, () =>
    c.exec({
      Cmd: [...cmd],
      AttachStdout: true,
      AttachStderr: true,
      ...(opts.user ? { User: opts.user } : {}),
      ...(opts.workingDir ? { WorkingDir: opts.workingDir } : {}),
      ...(opts.env ? { Env: Object.entries(opts.env).map(([k, v]) => `${k}=${v}`) } : {}),
    }),
  );
  const { callMs } = engineTimeouts(c);
  const started = callDeadline(callMs, opts.signal);
  const stream = await engine("exec_failed", `exec start in ${c.id.slice(0, 12)}`, () =>
    exec.start({ hijack: true, stdin: false, abortSignal: started.signal }),
  )
    .catch((err) => {
      if (started.timedOut())
        throw new InfraError(
          "docker_timeout",
          `exec start in ${c.id.slice(0, 12)}: no answer within ${callMs} ms`,
        );
      throw err;
    })
    .finally(() => started.clear());
  const cap = opts.outputCap ?? 1024 * 1024;
  const out = new CappedText(cap);
  const err = new CappedText(cap);
  const o = new PassThrough();
  const e = new PassThrough();
  o.on("data", (b: Buffer) => out.push(b));
  e.on("data", (b: Buffer) => err.push(b));
  c.modem.demuxStream(stream, o, e);
  await new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      (stream as unknown as { destroy?: () => void }).destroy?.();
      reject(opts.signal?.reason ?? new DOMException("aborted", "AbortError"));
    };
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    stream.on("end", () => {
      opts.signal?.removeEventListener("abort", onAbort);
      resolve();
    });
    stream.on("error", (x: Error) => {
      opts.signal?.removeEventListener("abort", onAbort);
      reject(x);
    });
  });
  const info = await engine("exec_failed", "exec inspect", () => exec.inspect());
  return { exitCode: info.ExitCode ?? -1, stdout: out.toString(), stderr: err.toString() };
}

export async function inspectContainer(c: Dockerode.Container): Promise<Dockerode.ContainerInspectInfo> {
  return engine("container_inspect_failed", `inspecting ${c.id.slice(0, 12)}`, () => c.inspect());
}
