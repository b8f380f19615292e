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

/**
 * Start the policy runtime on the host and wait until it answers its health check.
 * Rejects with PolicyError `policy_exit_before_health` (message: the exit and the stderr tail) when
 * the policy dies first, `policy_health_timeout` when it never answers; InputError for a missing dir.
 */
export async function startPolicyServer(opts: PolicyServerOptions): Promise<PolicyServer> {
  const policyDir = resolve(opts.policyDir);
  let isDir = false;
  try {
    isDir = statSync(policyDir).isDirectory();
  } catch {
    isDir = false;
  }
  if (!isDir) throw new InputError("policy_dir_missing", `${opts.policyDir}: not a directory`);
  const python = findPython(opts.python).path;
  const host = opts.host ?? "127.0.0.1";
  const port = opts.port && opts.port > 0 ? opts.port : await freePort(host);
  // A minimal environment: the policy (miners' code) sees what an episode gives it and nothing
  // of this process's own (API keys included).
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

  const keep = opts.keepLines ?? 5000;
  const lines: string[] = [];
  let partial = "";
  let errText = "";
  child.stdout?.setEncoding("utf8");
  child.stderr?.setEncoding("utf8");
  child.stdout?.on("data", (chunk: string) => {
    const parts = (partial + chunk).split("\n");
    partial = parts.pop() ?? "";
    for (const line of parts) {
      lines.push(line);
      if (lines.length > keep) lines.shift();
      opts.onStdoutLine?.(line);
    }
  });
  child.stderr?.on("data", (chunk: string) => {
    errText = (errText + chunk).slice(-STDERR_KEEP);
    opts.onStderr?.(chunk);
  });
  let exitInfo: PolicyExit | undefined;
  const exited = new Promise<PolicyExit>((resolveExit) => {
    child.on("close", (code, signal) => {
      live.delete(pid);
      killGroup(pid, "SIGKILL"); // anything the policy left behind
      if (partial) {
        lines.push(partial);
        opts.onStdoutLine?.(partial);
        partial = "";
      }
      exitInfo = { code, signal };
      resolveExit(exitInfo);
    });
  });
  const onAbort = () => killGroup(pid, "SIGKILL");
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  exited.then(() => opts.signal?.removeEventListener("abort", onAbort));

  const stop = async (graceMs = 5000): Promise<PolicyExit> => {
    if (exitInfo) return exitInfo;
    killGroup(pid, "SIGTERM");
    const timer = setTimeout(() => killGroup(pid, "SIGKILL"), graceMs);
    const e = await exited;
    clearTimeout(timer);
    return e;
  };

  const baseUrl = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  const deadline = performance.now() + (opts.healthTimeoutMs ?? 30_000);
  for (;;) {
    if (exitInfo) {
      throw new PolicyError(
        "policy_exit_before_health",
        `the policy exited (${exitText(exitInfo)}) before answering its health check${errText ? `:\n${tail(errText)}` : ""}`,
        { detail: { exit: exitInfo, stderr: errText } },
      );
    }
    if (opts.signal?.aborted) {
      await stop(0);
      throw opts.signal.reason ?? new Error("aborted");
    }
    const health = await answers(`${baseUrl}/health`);
    if (health === 200) break;
    // A raw policy serves the OpenAI endpoints only.
    if (health !== undefined && (await answers(`${baseUrl}/v1/models`)) === 200) break;
    if (performance.now() > deadline) {
      await stop(1000);
      throw new PolicyError(
        "policy_health_timeout",
        `the policy did not answer GET /health or /v1/models on port ${port} within ${opts.healthTimeoutMs ?? 30_000} ms${errText ? `:\n${tail(errText)}` : ""}`,
      );
    }
    await Promise.race([sleep(50), exited]);
  }

  return {
    baseUrl,
    url: `${baseUrl}/v1`,
    port,
    pid,
    exited,
    logLines: () => [...lines],
    events: () => lines.map(parsePolicyLogLine).filter((e): e is PolicyLogEvent => e !== undefined),
    turns: () =>
      lines
        .map(parsePolicyLogLine)
        .filter((e): e is Extract<PolicyLogEvent, { event: "turn" }> => e?.event === "turn"),
    stderr: () => errText,
    stop,
  };
}
