/**
 * The file tools as the tool user. When the agent runs as root (so that no tool can write its
 * session record or touch its process), it never opens a path a model named itself: read_file,
 * write_file, patch and search_files run in one long-lived worker process spawned with the tool
 * user's uid and gid (`agent.js --tool-worker`), one JSON request per line on its stdin, one JSON
 * answer per line on its stdout. A worker that overruns a tool's timeout, answers too much or
 * dies is killed (its whole process group) and the next call starts a fresh one. The worker is
 * the tool user's process: a tool command may disturb it, which costs that tool call only.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { killGroup, trackGroup } from "./shell.js";
import {
  type FileToolContext,
  type FileToolRunner,
  runFileTool,
  type ToolName,
  type ToolResult,
  workerAnswerCap,
} from "./tools.js";

interface WorkerRequest {
  name: ToolName;
  args: Record<string, unknown>;
  ctx: FileToolContext;
}

const failed = (code: string, message: string): ToolResult => ({
  content: `error: ${message}`,
  record: { ok: false, error_code: code, duration_ms: 0, output_bytes: 0 },
});

export interface ToolWorkerOptions {
  /** [node, agent.js, "--tool-worker"] */
  argv: string[];
  uid: number;
  gid: number;
  cwd: string;
  env: NodeJS.ProcessEnv;
}

export class ToolWorker implements FileToolRunner {
  private child: ChildProcess | undefined;
  private untrack: () => void = () => undefined;
  private buf = "";
  private cap = Number.POSITIVE_INFINITY;
  private waiting: ((line: string | undefined) => void) | undefined;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly opts: ToolWorkerOptions) {}

  run(
    name: ToolName,
    args: Record<string, unknown>,
    ctx: FileToolContext,
    timeoutMs: number,
  ): Promise<ToolResult> {
    // One call at a time (the agent runs its tools in order; this keeps it so).
    const next = this.queue.then(() =>
      this.call({ name, args, ctx }, timeoutMs, workerAnswerCap(ctx.outputCap)),
    );
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** Kill the worker (the agent's end, a signal). */
  close(): void {
    this.kill();
  }

  private start(): ChildProcess {
    const [cmd, ...argv] = this.opts.argv;
    const child = spawn(cmd!, argv, {
      cwd: this.opts.cwd,
      env: this.opts.env,
      uid: this.opts.uid,
      gid: this.opts.gid,
      detached: true,
      stdio: ["pipe", "pipe", "ignore"],
    });
    this.child = child;
    this.buf = "";
    if (child.pid !== undefined) this.untrack = trackGroup(child.pid);
    child.stdout?.setEncoding("utf8");
    // Only the current worker speaks: a killed one's last words and its close are ignored.
    child.stdout?.on("data", (s: string) => {
      if (this.child !== child) return;
      this.buf += s;
      const i = this.buf.indexOf("\n");
      if (i >= 0) {
        const line = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + 1);
        this.settle(line);
      } else if (this.buf.length > this.cap) {
        this.buf = "";
        this.settle(undefined);
      }
    });
    child.stdin?.on("error", () => undefined);
    const gone = () => {
      if (this.child !== child) return;
      this.child = undefined;
      this.untrack();
      this.settle(undefined);
    };
    child.on("error", gone);
    child.on("close", gone);
    return child;
  }

  private settle(line: string | undefined): void {
    const w = this.waiting;
    this.waiting = undefined;
    w?.(line);
  }

  private kill(): void {
    const c = this.child;
    this.child = undefined;
    if (c?.pid !== undefined) killGroup(c.pid, "SIGKILL");
    this.untrack();
  }

  private async call(req: WorkerRequest, timeoutMs: number, cap: number): Promise<ToolResult> {
    let child: ChildProcess;
    try {
      child = this.child ?? this.start();
    } catch (e) {
      return failed("spawn_failed", `could not start the tool worker: ${(e as Error).message}`);
    }
    const answer = new Promise<string | undefined>((resolve) => {
      this.waiting = resolve;
    });
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), timeoutMs);
    });
    this.cap = cap;
    child.stdin?.write(`${JSON.stringify(req)}\n`);
    const got = await Promise.race([answer, timedOut]);
    clearTimeout(timer);
    if (got === "timeout") {
      this.waiting = undefined;
      this.kill();
      return failed("timeout", `${req.name} did not finish within ${Math.round(timeoutMs / 1000)} s`);
    }
    if (got === undefined || got.length > cap) {
      this.kill();
      return failed("tool_failed", `the tool worker failed running ${req.name}`);
    }
    try {
      const r = JSON.parse(got) as ToolResult;
      if (typeof r?.content !== "string" || typeof r?.record !== "object" || r.record === null)
        throw new Error("not a tool result");
      return r;
    } catch {
      this.kill();
      return failed("tool_failed", `the tool worker answered ${req.name} with something else`);
    }
  }
}

/** `agent.js --tool-worker`: answer one request per stdin line until stdin ends. */
export async function serveToolWorker(): Promise<void> {
  const lines = createInterface({ input: process.stdin, crlfDelay: Number.POSITIVE_INFINITY });
  for await (const line of lines) {
    if (line.trim() === "") continue;
    let r: ToolResult;
    try {
      const req = JSON.parse(line) as WorkerRequest;
      r = await runFileTool(req.name, req.args ?? {}, req.ctx);
    } catch (e) {
      r = failed("tool_failed", (e as Error).message);
    }
    await new Promise<void>((resolve) => process.stdout.write(`${JSON.stringify(r)}\n`, () => resolve()));
  }
}
