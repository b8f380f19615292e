/**
 * Labels on every container and network an episode makes: the reaper finds leftovers by them
 * (a crashed daemon, a SIGKILL) and tests count them to prove nothing is left behind.
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { sha256Hex } from "../hash.js";

export const LABEL = {
  /** sidecar | agent | verifier | check | net-agent | net-meter | net-grader | probe | relay | engine-firewall | layer-count */
  role: "trajrl.role",
  /** The process that made it (see SandboxSession). */
  session: "trajrl.session",
  episode: "trajrl.episode",
  /** Unix seconds after which anything may remove it, whoever made it. */
  expires: "trajrl.expires",
  /** Host and pid of the owning process: a dead owner on this host means an orphan, reaped at once. */
  host: "trajrl.host",
  pid: "trajrl.pid",
  /**
   * Which start of that pid: the kernel's boot id and the process's start time. A daemon container
   * that restarts keeps its hostname and often its pid; only this tells the new process from the old.
   */
  boot: "trajrl.boot",
  /** The owner's own container (64 hex) when it runs in one: gone from the engine means an orphan. */
  container: "trajrl.container",
  /** `runc`: the episode's scenario cannot run under gVisor (src/sandbox/runtime.ts); absent otherwise. */
  runtime: "trajrl.runtime",
} as const;

export type Role =
  | "sidecar"
  | "agent"
  | "verifier"
  | "check"
  | "net-agent"
  | "net-meter"
  | "net-grader"
  | "probe"
  | "relay"
  | "engine-firewall"
  | "layer-count";

export interface SandboxSession {
  /** Random per process: what this process made, as opposed to what a sibling process made. */
  readonly id: string;
  readonly host: string;
  readonly pid: number;
  /** processBoot(pid) at start; undefined where /proc cannot tell. */
  readonly boot?: string | undefined;
  /** This process's container id, when it runs in one. */
  readonly container?: string | undefined;
}

export function newSession(): SandboxSession {
  return {
    id: randomBytes(6).toString("hex"),
    host: hostname(),
    pid: process.pid,
    boot: processBoot(process.pid),
    container: containerIdFromMountinfo(readProc("/proc/self/mountinfo") ?? ""),
  };
}

function readProc(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

/**
 * `<kernel boot id>:<start time of pid in clock ticks since boot>`: the same pid started again (a
 * restarted container, a reboot) gives another value. undefined when the process or /proc is absent.
 */
export function processBoot(
  pid: number,
  read: (path: string) => string | undefined = readProc,
): string | undefined {
  const bootId = read("/proc/sys/kernel/random/boot_id")?.trim();
  const stat = read(`/proc/${pid}/stat`);
  if (!bootId || !stat) return undefined;
  // Field 22 (starttime); the command name (field 2) may hold spaces and parentheses: count after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const start = fields[19];
  return start && /^\d+$/.test(start) ? `${bootId}:${start}` : undefined;
}

/**
 * This process's container id: Docker bind-mounts the container's hostname, hosts and resolv.conf
 * files from /var/lib/docker/containers/<id>/ onto /etc/hostname, /etc/hosts and /etc/resolv.conf,
 * which shows in mountinfo even under a custom hostname. Only a mount ON one of those three paths
 * counts: on a host, the mount table briefly lists the same files of every container being started,
 * mounted into that container's root (…/overlay2/…/merged/etc/hostname). Taking one of those, a
 * process on the host labelled its episodes as another container's, and every other process's
 * reaper removed them as an owner's that was gone once that container was.
 */
export function containerIdFromMountinfo(mountinfo: string): string | undefined {
  for (const line of mountinfo.split("\n")) {
    // ID PARENT MAJ:MIN ROOT MOUNTPOINT …
    const [, , , root, mountPoint] = line.split(" ");
    if (mountPoint !== "/etc/hostname" && mountPoint !== "/etc/hosts" && mountPoint !== "/etc/resolv.conf")
      continue;
    const m = /\/containers\/([0-9a-f]{64})\/(hostname|hosts|resolv\.conf)$/.exec(root ?? "");
    if (m && `/etc/${m[2]}` === mountPoint) return m[1]!;
  }
  return undefined;
}

export function labelsFor(
  session: SandboxSession,
  role: Role,
  episodeId: string,
  expiresAtUnix: number,
): Record<string, string> {
  return {
    [LABEL.role]: role,
    [LABEL.session]: session.id,
    [LABEL.episode]: episodeId,
    [LABEL.expires]: String(Math.ceil(expiresAtUnix)),
    [LABEL.host]: session.host,
    [LABEL.pid]: String(session.pid),
    ...(session.boot ? { [LABEL.boot]: session.boot } : {}),
    ...(session.container ? { [LABEL.container]: session.container } : {}),
  };
}

/** Docker object names allow [a-zA-Z0-9][a-zA-Z0-9_.-]; episode ids come from us but stay safe anyway. */
/**
 * safeName, but distinct inputs stay distinct: a name longer than `max` keeps its head and ends
 * with 8 hex of its sha256 (episode ids differ only in their tail: scenario and attempt).
 */
export function uniqueName(s: string, max = 40): string {
  const safe = safeName(s, Number.MAX_SAFE_INTEGER);
  if (safe.length <= max) return safe;
  return `${safe.slice(0, max - 9)}-${sha256Hex(s).slice(0, 8)}`;
}

export function safeName(s: string, max = 40): string {
  const cleaned = s.replace(/[^a-zA-Z0-9_.-]/g, "-").replace(/^[^a-zA-Z0-9]+/, "");
  return (cleaned || "x").slice(0, max);
}
