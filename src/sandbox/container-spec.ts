import type Dockerode from "dockerode";
import { type ContainerRuntime, gvisorProcessBounds } from "./runtime.js";

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
  /**
   * Resolve outside names as the engine does (no `--dns`): only for a network with a route out,
   * the registry bench's grader, whose tools may be fetched by name. Every other container gets
   * EPISODE_DNS_UPSTREAM.
   */
  outsideNames?: boolean;
  /** Host paths mounted read-only: the layer counter's view of a watched layer, nothing else. */
  readOnlyBinds?: ReadonlyArray<{ source: string; target: string }>;
}

/**
 * The upstream resolver every episode container's embedded DNS forwards outside names to: the
 * loopback of the container's own namespace, where nothing listens. Names on the episode's
 * networks (`policy`, `meter`) still resolve; anything else fails inside the container. Setting an
 * upstream at all is what matters on engines hit by CVE-2024-29018: without one, the embedded
 * resolver of an internal network forwards through the host's loopback resolver (src/sandbox/dns.ts).
 */
export const EPISODE_DNS_UPSTREAM = "127.0.0.1";

/**
 * `runtime`: the OCI runtime, always explicit (src/sandbox/runtime.ts decides which). Under gVisor
 * the pids limit is the guest's RLIMIT_NPROC and the engine's limit a backstop on host tasks.
 */
export function createOptions(
  spec: ContainerSpec,
  runtime: ContainerRuntime,
): Dockerode.ContainerCreateOptions {
  const net = spec.network;
  const gvisor = runtime.gvisor ? gvisorProcessBounds(spec.limits) : undefined;
  const hostConfig: Dockerode.HostConfig = {
    Runtime: runtime.name,
    NanoCpus: Math.round(spec.limits.cpus * 1e9),
    Memory: spec.limits.memoryBytes,
    // Equal to Memory: no swap, so the memory limit is real.
    MemorySwap: spec.limits.memoryBytes,
    PidsLimit: gvisor?.hostTasks ?? spec.limits.pidsLimit,
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
  if (net.kind !== "host" && !spec.outsideNames) hostConfig.Dns = [EPISODE_DNS_UPSTREAM];
  if (gvisor) hostConfig.Ulimits = [{ Name: "nproc", Soft: gvisor.nproc, Hard: gvisor.nproc }];
  if (spec.dropAllCaps) hostConfig.CapDrop = ["ALL"];
  if (spec.capAdd?.length) hostConfig.CapAdd = [...spec.capAdd];
  if (spec.tmpfs) hostConfig.Tmpfs = { ...spec.tmpfs };
  if (spec.extraHosts?.length) hostConfig.ExtraHosts = [...spec.extraHosts];
  if (spec.storageBytes !== undefined) hostConfig.StorageOpt = { size: String(spec.storageBytes) };
  if (spec.readOnlyBinds?.length)
    hostConfig.Binds = spec.readOnlyBinds.map((b) => `${b.source}:${b.target}:ro`);
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
