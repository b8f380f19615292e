/** A container's output, bounded: captured logs, the engine's stream frames, exec. */
import { PassThrough } from "node:stream";
import type Dockerode from "dockerode";
import { InfraError } from "../errors.js";
import { callDeadline, engine, engineTimeouts } from "./docker.js";

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
