/**
 * Run the sidecar runtime as a host process (no Docker): `policy serve`, the sidecar tests, and
 * anything else that wants a miner's policy on a local port. The process is the SDK file every
 * sidecar runs (`python trajrl_policy.py`), so policy.py / policy.json / pin behave exactly as in an
 * episode.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { statSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { request } from "undici";
import { InputError, PolicyError } from "../errors.js";
import { type PolicyLogEvent, parsePolicyLogLine } from "./log.js";
import { LAUNCHER } from "./paths.js";
import { findPython } from "./python.js";

export interface PolicyServerOptions {
  /** Directory with policy.py or policy.json (neither → pin on defaultModel). */
  policyDir: string;
  /** OpenAI-compatible base URL the policy calls (…/v1): the meter, the simulator, or Engy. */
  upstreamUrl: string;
  /** Bearer token for the upstream (EPISODE_TOKEN); omitted → "Bearer " with nothing after it. */
  token?: string;
  /** Default: a free loopback port chosen here. */
  port?: number;
  /** Listen address; default 127.0.0.1 (a local endpoint is nobody else's business). */
  host?: string;
  /** DEFAULT_MODEL for the runtime; default qwen3.8-27b. */
  defaultModel?: string;
  /** Interpreter override (TRAJRL_PYTHON); default: probe (see findPython). */
  python?: string;
  /** How long to wait for GET /health (or /v1/models for raw policies); default 30 s. */
  healthTimeoutMs?: number;
  signal?: AbortSignal;
  /** Every stdout line of the policy (its log), as it arrives. */
  onStdoutLine?: (line: string) => void;
  /** stderr as it arrives (tracebacks, the reasons a policy could not start). */
  onStderr?: (chunk: string) => void;
  /** stdout lines kept in memory for logLines(); default 5000 (oldest dropped). */
  keepLines?: number;
}

export interface PolicyExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface PolicyServer {
  /** http://host:port */
  baseUrl: string;
  /** baseUrl + "/v1": what an agent gets as LLM_BASE_URL. */
  url: string;
  port: number;
  pid: number;
  exited: Promise<PolicyExit>;
  /** stdout lines so far (the policy log), oldest first. */
  logLines(): string[];
  /** The policy log's events among them, parsed. */
  events(): PolicyLogEvent[];
  /** The turn events among them. */
  turns(): Extract<PolicyLogEvent, { event: "turn" }>[];
  /** The last 64 KiB of stderr. */
  stderr(): string;
  /** SIGTERM to the process group, SIGKILL after graceMs (default 5000). */
  stop(graceMs?: number): Promise<PolicyExit>;
}

const STDERR_KEEP = 64 * 1024;
const live = new Set<number>();
let exitHookInstalled = false;

function killGroup(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
  } catch {
    // already gone
  }
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // A policy server must not outlive the process that started it (it holds a port).
  process.on("exit", () => {
    for (const pid of live) killGroup(pid, "SIGKILL");
  });
}

/** A free TCP port on host (the usual bind-then-close; the tiny race is acceptable for local use). */
export async function freePort(host = "127.0.0.1"): Promise<number> {
  return await new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => resolvePort(port));
    });
  });
}

async function answers(url: string): Promise<number | undefined> {
  try {
    const r = await request(url, { method: "GET", headersTimeout: 2000, bodyTimeout: 2000 });
    await r.body.dump();
    return r.statusCode;
  } catch {
    return undefined;
  }
}

function exitText(e: PolicyExit): string {
  return e.signal ? `signal ${e.signal}` : `status ${e.code}`;
}

function tail(text: string, lines = 40): string {
  const all = text.trimEnd().split("\n");
  return all.slice(-lines).join("\n");
}

/** The policy's directory, absolute; InputError when it is not a directory. */
function policyDirOf(dir: string): string {
  const policyDir = resolve(dir);
  let isDir = false;
  try {
    isDir = statSync(policyDir).isDirectory();
  } catch {
    isDir = false;
  }
  if (!isDir) throw new InputError("policy_dir_missing", `${dir}: not a directory`);
  return policyDir;
}

/**
 * A minimal environment: the policy (miners' code) sees what an episode gives it and nothing of
 * this process's own (API keys included).
 */
function policyEnv(
  opts: PolicyServerOptions,
  policyDir: string,
  host: string,
  port: number,
): Record<string, string> {
  const env: Record<string, string> = {
    PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    LANG: "C.UTF-8",
    PYTHONDONTWRITEBYTECODE: "1",
    PYTHONUNBUFFERED: "1",
    POLICY_PORT: String(port),
    POLICY_HOST: host,
    POLICY_DIR: policyDir,
    // As upstream's sidecar has it: the SDK's folder, then the policy's.
    PYTHONPATH: `${dirname(LAUNCHER)}:${policyDir}`,
    UPSTREAM_URL: opts.upstreamUrl,
    DEFAULT_MODEL: opts.defaultModel ?? "qwen3.8-27b",
  };
  if (opts.token) env.EPISODE_TOKEN = opts.token;
  return env;
}

/**
 * The running policy process: its stdout lines (the policy log, the newest `keep`), its stderr
 * tail, its exit, and stop(). Its own process group, so stop() reaches whatever policy.py started.
 */
class PolicyProcess {
  readonly lines: string[] = [];
  errText = "";
  exitInfo: PolicyExit | undefined;
  readonly exited: Promise<PolicyExit>;
  private partial = "";

  constructor(
    child: ChildProcess,
    readonly pid: number,
    private readonly opts: PolicyServerOptions,
  ) {
    child.stdout?.setEncoding("utf8");
    child.stderr?.setEncoding("utf8");
    child.stdout?.on("data", (chunk: string) => this.onStdout(chunk));
    child.stderr?.on("data", (chunk: string) => {
      this.errText = (this.errText + chunk).slice(-STDERR_KEEP);
      opts.onStderr?.(chunk);
    });
    this.exited = new Promise<PolicyExit>((resolveExit) => {
      child.on("close", (code, signal) => resolveExit(this.onClose(code, signal)));
    });
    const onAbort = () => killGroup(pid, "SIGKILL");
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    this.exited.then(() => opts.signal?.removeEventListener("abort", onAbort));
  }

  private onStdout(chunk: string): void {
    const keep = this.opts.keepLines ?? 5000;
    const parts = (this.partial + chunk).split("\n");
    this.partial = parts.pop() ?? "";
    for (const line of parts) {
      this.lines.push(line);
      if (this.lines.length > keep) this.lines.shift();
      this.opts.onStdoutLine?.(line);
    }
  }

  private onClose(code: number | null, signal: NodeJS.Signals | null): PolicyExit {
    live.delete(this.pid);
    killGroup(this.pid, "SIGKILL"); // anything the policy left behind
    if (this.partial) {
      this.lines.push(this.partial);
      this.opts.onStdoutLine?.(this.partial);
      this.partial = "";
    }
    this.exitInfo = { code, signal };
    return this.exitInfo;
  }

  /** SIGTERM to the process group, SIGKILL after graceMs. */
  readonly stop = async (graceMs = 5000): Promise<PolicyExit> => {
    if (this.exitInfo) return this.exitInfo;
    killGroup(this.pid, "SIGTERM");
    const timer = setTimeout(() => killGroup(this.pid, "SIGKILL"), graceMs);
    const e = await this.exited;
    clearTimeout(timer);
    return e;
  };
}

/** Spawn the SDK runtime under python in its own process group, registered for the exit hook. */
function spawnPolicy(
  opts: PolicyServerOptions,
  python: string,
  policyDir: string,
  env: Record<string, string>,
) {
  installExitHook();
  const child: ChildProcess = spawn(python, ["-B", LAUNCHER], {
    cwd: policyDir,
    env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true, // its own process group: stop() reaches whatever policy.py started too
  });
  const pid = child.pid;
  if (pid === undefined) throw new PolicyError("policy_spawn_failed", `cannot start ${python}`);
  live.add(pid);
  return new PolicyProcess(child, pid, opts);
}

/**
 * Poll GET /health (a raw policy: /v1/models) until it answers 200. Throws PolicyError
 * `policy_exit_before_health` when the process exits first, `policy_health_timeout` past the
 * deadline (after stopping it), or the abort reason.
 */
async function waitForHealth(
  p: PolicyProcess,
  baseUrl: string,
  port: number,
  opts: PolicyServerOptions,
): Promise<void> {
  const deadline = performance.now() + (opts.healthTimeoutMs ?? 30_000);
  for (;;) {
    if (p.exitInfo) {
      throw new PolicyError(
        "policy_exit_before_health",
        `the policy exited (${exitText(p.exitInfo)}) before answering its health check${p.errText ? `:\n${tail(p.errText)}` : ""}`,
        { detail: { exit: p.exitInfo, stderr: p.errText } },
      );
    }
    if (opts.signal?.aborted) {
      await p.stop(0);
      throw opts.signal.reason ?? new Error("aborted");
    }
    const health = await answers(`${baseUrl}/health`);
    if (health === 200) return;
    // A raw policy serves the OpenAI endpoints only.
    if (health !== undefined && (await answers(`${baseUrl}/v1/models`)) === 200) return;
    if (performance.now() > deadline) {
      await p.stop(1000);
      throw new PolicyError(
        "policy_health_timeout",
        `the policy did not answer GET /health or /v1/models on port ${port} within ${opts.healthTimeoutMs ?? 30_000} ms${p.errText ? `:\n${tail(p.errText)}` : ""}`,
      );
    }
    await Promise.race([sleep(50), p.exited]);
  }
}

/** The handle over a healthy policy process. */
function serverOf(p: PolicyProcess, baseUrl: string, port: number): PolicyServer {
  const lines = p.lines;
  return {
    baseUrl,
    url: `${baseUrl}/v1`,
    port,
    pid: p.pid,
    exited: p.exited,
    logLines: () => [...lines],
    events: () => lines.map(parsePolicyLogLine).filter((e): e is PolicyLogEvent => e !== undefined),
    turns: () =>
      lines
        .map(parsePolicyLogLine)
        .filter((e): e is Extract<PolicyLogEvent, { event: "turn" }> => e?.event === "turn"),
    stderr: () => p.errText,
    stop: p.stop,
  };
}

/**
 * Start the policy runtime on the host and wait until it answers its health check.
 * Rejects with PolicyError `policy_exit_before_health` (message: the exit and the stderr tail) when
 * the policy dies first, `policy_health_timeout` when it never answers; InputError for a missing dir.
 */
export async function startPolicyServer(opts: PolicyServerOptions): Promise<PolicyServer> {
  const policyDir = policyDirOf(opts.policyDir);
  const python = findPython(opts.python).path;
  const host = opts.host ?? "127.0.0.1";
  const port = opts.port && opts.port > 0 ? opts.port : await freePort(host);
  const p = spawnPolicy(opts, python, policyDir, policyEnv(opts, policyDir, host, port));
  const baseUrl = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  await waitForHealth(p, baseUrl, port, opts);
  return serverOf(p, baseUrl, port);
}
