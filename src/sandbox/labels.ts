/**
 * Labels on every container and network an episode makes: the reaper finds leftovers by them
 * (a crashed daemon, a SIGKILL) and tests count them to prove nothing is left behind.
 */
import { createHash, randomBytes } from "node:crypto";
import { hostname } from "node:os";

export const LABEL = {
  /** sidecar | agent | verifier | check | net-agent | net-meter | probe */
  role: "trajrl.role",
  /** The process that made it (see SandboxSession). */
  session: "trajrl.session",
  episode: "trajrl.episode",
  /** Unix seconds after which anything may remove it, whoever made it. */
  expires: "trajrl.expires",
  /** Host and pid of the owning process: a dead owner on this host means an orphan, reaped at once. */
  host: "trajrl.host",
  pid: "trajrl.pid",
} as const;

export type Role = "sidecar" | "agent" | "verifier" | "check" | "net-agent" | "net-meter" | "probe";

export interface SandboxSession {
  /** Random per process: what this process made, as opposed to what a sibling process made. */
  readonly id: string;
  readonly host: string;
  readonly pid: number;
}

export function newSession(): SandboxSession {
  return { id: randomBytes(6).toString("hex"), host: hostname(), pid: process.pid };
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
  return `${safe.slice(0, max - 9)}-${createHash("sha256").update(s).digest("hex").slice(0, 8)}`;
}

export function safeName(s: string, max = 40): string {
  const cleaned = s.replace(/[^a-zA-Z0-9_.-]/g, "-").replace(/^[^a-zA-Z0-9]+/, "");
  return (cleaned || "x").slice(0, max);
}
