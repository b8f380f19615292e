/**
 * The validator's CLI as a child process, one home: `node --import tsx src/cli.ts ARGS…` from the
 * repository root, the way an operator or a miner runs it. Node itself is the process, not the tsx
 * wrapper: the wrapper relays a SIGTERM again when the child is slow to acknowledge it (a loaded
 * machine), and a second signal is the daemon's forced exit (143).
 *
 * The environment is the test's choice: `inherit` (this process's, the default) or `clean` (PATH
 * and HOME=/nonexistent alone, as an operator's minimal service unit), with `env` over it.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { hostname } from "node:os";
import { join } from "node:path";
import type Docker from "dockerode";
import { REPO_ROOT } from "../../src/repo.js";
import { requireDocker } from "./docker.js";

const CLI = join(REPO_ROOT, "src/cli.ts");

export interface CliOptions {
  /** Variables set over the base environment. */
  env?: Record<string, string>;
  /** `inherit` (default): this process's environment; `clean`: `{ PATH, HOME: "/nonexistent" }`. */
  base?: "inherit" | "clean";
  /** Default: the repository root. */
  cwd?: string;
  /** Kill the process with `killSignal` after this long (default: never; the test's own timeout bounds it). */
  timeoutMs?: number;
  /** Default SIGTERM (as execFile's timeout). */
  killSignal?: NodeJS.Signals;
  /** Another entry point of this repository run the same way (e.g. src/web/healthcheck.ts); default src/cli.ts. */
  entry?: string;
  /** A command the CLI runs under, e.g. `["setpriv", "--reuid=4242", …]` (its argv, node appended). */
  under?: string[];
}

export interface CliResult {
  /** The exit code; null when a signal ended the process. */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** stdout as bytes (a binary stream such as `backup -`). */
  stdoutBytes: Buffer;
  pid: number;
}

/** A started CLI process: its output so far, and its end. */
export interface CliProcess {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** stdout and stderr interleaved in the order they arrived. */
  output: () => string;
  /** The exit code once the process closed (null after a signal). */
  exited: Promise<number | null>;
  /** Everything, once the process closed. */
  done: Promise<CliResult>;
}

function environment(o: CliOptions): Record<string, string | undefined> {
  const base =
    o.base === "clean" ? { PATH: process.env.PATH ?? "", HOME: "/nonexistent" } : { ...process.env };
  return { ...base, ...o.env };
}

/** Start `trajrl-validator ARGS…`; output is collected as it comes. */
export function startCli(args: string[], o: CliOptions = {}): CliProcess {
  const argv = ["--import", "tsx", o.entry ?? CLI, ...args];
  const [command, ...prefix] = o.under ?? [process.execPath];
  const child = spawn(command!, o.under ? [...prefix, process.execPath, ...argv] : argv, {
    cwd: o.cwd ?? REPO_ROOT,
    env: environment(o),
    stdio: ["ignore", "pipe", "pipe"],
  });
  const bytes: Buffer[] = [];
  let stdout = "";
  let stderr = "";
  let output = "";
  child.stdout!.on("data", (d: Buffer) => {
    bytes.push(d);
    stdout += d.toString();
    output += d.toString();
  });
  child.stderr!.on("data", (d: Buffer) => {
    stderr += d.toString();
    output += d.toString();
  });
  const timer =
    o.timeoutMs === undefined
      ? undefined
      : setTimeout(() => child.kill(o.killSignal ?? "SIGTERM"), o.timeoutMs);
  const done = new Promise<CliResult>((resolve) =>
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const all = Buffer.concat(bytes);
      resolve({ code, signal, stdout: all.toString(), stderr, stdoutBytes: all, pid: child.pid! });
    }),
  );
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    output: () => output,
    exited: done.then((r) => r.code),
    done,
  };
}

/** Run `trajrl-validator ARGS…` to its end. */
export function runCli(args: string[], o: CliOptions = {}): Promise<CliResult> {
  return startCli(args, o).done;
}

/**
 * Containers and networks the given processes made (the sandbox labels each with its pid; other
 * test files may be running episodes too). `thisHost`: only those labelled with this machine's name.
 */
export async function leftoversOf(
  pids: number[],
  o: { docker?: Docker; thisHost?: boolean } = {},
): Promise<number> {
  const docker = o.docker ?? (await requireDocker());
  let n = 0;
  for (const pid of pids) {
    const label = [`trajrl.pid=${pid}`, ...(o.thisHost ? [`trajrl.host=${hostname()}`] : [])];
    const [cs, ns] = await Promise.all([
      docker.listContainers({ all: true, filters: { label } }),
      docker.listNetworks({ filters: { label } }),
    ]);
    n += cs.length + ns.length;
  }
  return n;
}
