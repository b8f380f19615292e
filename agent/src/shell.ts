/**
 * Running one shell command for the `terminal` tool: `bash -lc` in its own process group (so a
 * timeout kills everything it started, not just bash), stdin closed (nothing can wait for input),
 * stdout and stderr interleaved into one bounded head+tail buffer.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { constants } from "node:os";
import { performance } from "node:perf_hooks";
import { HeadTailBuffer } from "./output.js";

export interface CommandResult {
  output: string;
  /** null when the process was killed by a signal or never started. */
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  durationMs: number;
  totalBytes: number;
  omittedBytes: number;
  /** Set when the command could not be started at all. */
  spawnError?: string;
}

export interface CommandOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
  outputCap: number;
  /** Grace between SIGTERM and SIGKILL of the group after a timeout. */
  killGraceMs?: number;
  /** Run as this user (the agent is root and its tools are not). */
  user?: { uid: number; gid: number };
}

/** Process groups started by this agent: a signal handler kills them before the agent exits. */
const groups = new Set<number>();

export function killAllCommandGroups(sig: NodeJS.Signals = "SIGKILL"): void {
  for (const pgid of groups) killGroup(pgid, sig);
}

/** Track a process group started elsewhere (a tool worker) so that a signal handler kills it too. */
export function trackGroup(pgid: number): () => void {
  groups.add(pgid);
  return () => groups.delete(pgid);
}

export function killGroup(pgid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pgid, sig);
  } catch {
    // ESRCH: the group is gone already.
  }
}

/** How long pipes held open by a background job (`server &`) may delay the result. */
const PIPE_DRAIN_MS = 300;

export function runCommand(command: string, opts: CommandOptions): Promise<CommandResult> {
  const started = performance.now();
  const buf = new HeadTailBuffer(opts.outputCap);
  return new Promise((resolve) => {
    let child: ChildProcess;
    try {
      child = spawn("bash", ["-lc", command], {
        cwd: opts.cwd,
        env: opts.env,
        detached: true,
        stdio: ["ignore", "pipe", "pipe"],
        ...(opts.user ? { uid: opts.user.uid, gid: opts.user.gid } : {}),
      });
    } catch (e) {
      resolve(failed((e as Error).message));
      return;
    }
    const pgid = child.pid;
    if (pgid !== undefined) groups.add(pgid);
    let timedOut = false;
    let settled = false;
    let exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
    let drainTimer: NodeJS.Timeout | undefined;
    let killTimer: NodeJS.Timeout | undefined;

    const onData = (d: Buffer) => buf.push(d);
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);

    const timer = setTimeout(() => {
      if (pgid === undefined) return;
      timedOut = true;
      killGroup(pgid, "SIGTERM");
      killTimer = setTimeout(() => killGroup(pgid, "SIGKILL"), opts.killGraceMs ?? 2000);
    }, opts.timeoutMs);

    const finish = (spawnError?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(drainTimer);
      child.stdout?.destroy();
      child.stderr?.destroy();
      if (pgid !== undefined) {
        if (timedOut) {
          // The leader is gone; make sure nothing it started outlives the timeout.
          clearTimeout(killTimer);
          killGroup(pgid, "SIGKILL");
        }
        groups.delete(pgid);
      }
      if (spawnError !== undefined) {
        resolve(failed(spawnError, performance.now() - started));
        return;
      }
      const sig = exit?.signal ?? null;
      resolve({
        output: buf.text(),
        exitCode: exit?.code ?? null,
        signal: sig,
        timedOut,
        durationMs: performance.now() - started,
        totalBytes: buf.totalBytes,
        omittedBytes: buf.omittedBytes,
      });
    };

    child.on("error", (e) => finish(e.message));
    child.on("exit", (code, signal) => {
      exit = { code, signal };
      drainTimer = setTimeout(() => finish(), PIPE_DRAIN_MS);
    });
    child.on("close", () => finish());
  });
}

function failed(message: string, durationMs = 0): CommandResult {
  return {
    output: "",
    exitCode: null,
    signal: null,
    timedOut: false,
    durationMs,
    totalBytes: 0,
    omittedBytes: 0,
    spawnError: message,
  };
}

/** The conventional shell status of a signal death (128 + n), for reporting. */
export function signalStatus(sig: string | null): number | null {
  if (sig === null) return null;
  const n = (constants.signals as Record<string, number>)[sig];
  return n === undefined ? null : 128 + n;
}
