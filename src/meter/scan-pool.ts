/**
 * Where a request body is scanned (the CPU of pricing a call, request.ts `scanChatBody`): a small
 * body on the event loop, a large one in a worker thread, so that no body — up to the 64 MiB
 * upstream accepts, of any shape — holds the loop that serves every episode's calls, the status
 * page, the chain loops and the engine heartbeats (issue 36 item 3). The scan is linear in the
 * body's bytes wherever it runs, and gives the same result.
 *
 * Inline: bodies of at most `inlineBytes`, and at most `turnBytes` of them per turn of the loop
 * (a flood of small bodies yields between turns). Offloaded: the body's memory is handed to the
 * worker and back (transferred, not copied), one body at a time, in arrival order.
 */
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import type { Logger } from "../log.js";
import { InvalidRequest, scanChatBody } from "./request.js";
import type { RequestScan } from "./scan.js";

/** A body at most this large is scanned on the loop (well under a millisecond of scan). */
export const INLINE_BYTES = 64 * 1024;
/** Inline scanning per turn of the loop, at most (a few milliseconds at the scan's worst). */
export const TURN_BYTES = 1024 * 1024;

export interface ScanPoolOptions {
  inlineBytes?: number;
  turnBytes?: number;
}

/** A scanned body: the same bytes (a new Buffer over them when they went to the worker). */
export interface Scanned {
  raw: Buffer;
  scan: RequestScan;
}

/** The worker's answer to one body. */
export interface ScanReply {
  id: number;
  buf: ArrayBuffer;
  scan?: RequestScan;
  /** InvalidRequest's message: the body is refused (400). */
  invalid?: string;
  /** Anything else: our bug. */
  error?: string;
}

interface Job {
  length: number;
  resolve: (s: Scanned) => void;
  reject: (err: Error) => void;
}

export class ScanPool {
  private worker: Worker | null = null;
  /** The worker could not start (or died before its first answer): scans run inline. */
  private unavailable = false;
  private answered = false;
  private readonly jobs = new Map<number, Job>();
  private nextId = 1;
  private turnBytes = 0;
  private turnResetQueued = false;
  private readonly inlineBytes: number;
  private readonly turnLimit: number;

  constructor(
    private readonly log: Logger,
    opts: ScanPoolOptions = {},
  ) {
    this.inlineBytes = opts.inlineBytes ?? INLINE_BYTES;
    this.turnLimit = opts.turnBytes ?? TURN_BYTES;
  }

  /** Scan a body. Rejects with InvalidRequest for a body the meter refuses. */
  async scan(raw: Buffer): Promise<Scanned> {
    if (raw.length > this.inlineBytes) {
      const w = this.ensureWorker();
      if (w !== null) return this.offload(w, raw);
    }
    await this.turn(raw.length);
    return { raw, scan: scanChatBody(raw) };
  }

  /** Bodies being scanned off the loop. */
  get offloaded(): number {
    return this.jobs.size;
  }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = null;
    this.unavailable = true;
    this.failAll(new Error("the meter stopped"));
    if (w !== null) await w.terminate();
  }

  /** Wait for a turn of the loop while this turn's inline scanning is spent. */
  private async turn(bytes: number): Promise<void> {
    while (this.turnBytes > 0 && this.turnBytes + bytes > this.turnLimit)
      await new Promise<void>((r) => setImmediate(r));
    this.turnBytes += bytes;
    if (this.turnResetQueued) return;
    this.turnResetQueued = true;
    setImmediate(() => {
      this.turnBytes = 0;
      this.turnResetQueued = false;
    });
  }

  private offload(w: Worker, raw: Buffer): Promise<Scanned> {
    const id = this.nextId++;
    // The worker gets the body's memory itself: a Buffer that owns its whole ArrayBuffer (a large
    // body read by readBody does) is transferred; another one is copied into one that does.
    let buf = raw.buffer as ArrayBuffer;
    if (raw.byteOffset !== 0 || raw.byteLength !== buf.byteLength) buf = Uint8Array.from(raw).buffer;
    return new Promise<Scanned>((resolve, reject) => {
      if (this.jobs.size === 0) w.ref();
      this.jobs.set(id, { length: raw.length, resolve, reject });
      try {
        w.postMessage({ id, buf, length: raw.length }, [buf]);
      } catch {
        // An ArrayBuffer Node will not transfer (a pooled one): send a copy.
        const copy = Uint8Array.from(raw).buffer;
        w.postMessage({ id, buf: copy, length: raw.length }, [copy]);
      }
    });
  }

  private reply(m: ScanReply): void {
    this.answered = true;
    const job = this.jobs.get(m.id);
    if (job === undefined) return;
    this.jobs.delete(m.id);
    if (this.jobs.size === 0) this.worker?.unref();
    if (m.scan !== undefined) job.resolve({ raw: Buffer.from(m.buf, 0, job.length), scan: m.scan });
    else if (m.invalid !== undefined) job.reject(new InvalidRequest(m.invalid));
    else job.reject(new Error(`scan worker: ${m.error ?? "no answer"}`));
  }

  private failAll(err: Error): void {
    const jobs = [...this.jobs.values()];
    this.jobs.clear();
    for (const j of jobs) j.reject(err);
  }

  /** The worker, started on first use; null when it cannot start (the scan then runs inline). */
  private ensureWorker(): Worker | null {
    if (this.worker !== null || this.unavailable) return this.worker;
    try {
      const w = startWorker();
      w.unref();
      w.on("message", (m: ScanReply) => this.reply(m));
      w.on("error", (err) => {
        this.log.error({ err, code: "meter_scan_worker_failed" }, "meter.scan_worker_failed");
        this.failAll(err instanceof Error ? err : new Error(String(err)));
      });
      w.on("exit", (code) => {
        if (this.worker !== w) return;
        this.worker = null;
        if (!this.answered) {
          this.unavailable = true;
          this.log.error({ code: "meter_scan_worker_failed", exit_code: code }, "meter.scan_worker_failed");
        }
        this.failAll(new Error("the scan worker exited"));
      });
      this.worker = w;
    } catch (err) {
      this.unavailable = true;
      this.log.error({ err, code: "meter_scan_worker_failed" }, "meter.scan_worker_failed");
    }
    return this.worker;
  }
}

/**
 * The worker thread: compiled JavaScript in a build. From the TypeScript source (tests, `tsx`),
 * a small script registers tsx's loader in the thread and then imports the source (Node 20 does
 * not apply an `--import`ed loader to a worker's entry file).
 */
function startWorker(): Worker {
  // (tsx's tsImport may add a query to the module's URL: the path says whether this is the source.)
  if (!new URL(import.meta.url).pathname.endsWith(".ts"))
    return new Worker(new URL("./scan-worker.js", import.meta.url));
  const api = createRequire(import.meta.url)
    .resolve("tsx/esm/api")
    .replace(/\.cjs$/, ".mjs");
  const entry = new URL("./scan-worker.ts", import.meta.url).href;
  const boot = `import(${JSON.stringify(pathToFileURL(api).href)})
    .then(({ register }) => { register(); return import(${JSON.stringify(entry)}); })
    .catch((err) => { console.error(err); process.exit(1); });`;
  return new Worker(boot, { eval: true });
}
