/**
 * The scan worker (scan-pool.ts): scans one body at a time off the daemon's event loop and hands
 * the body's memory back with the result.
 */
import { parentPort } from "node:worker_threads";
import { InvalidRequest, scanChatBody } from "./request.js";
import type { ScanReply } from "./scan-pool.js";

interface ScanJob {
  id: number;
  buf: ArrayBuffer;
  length: number;
}

parentPort?.on("message", (job: ScanJob) => {
  const reply: ScanReply = { id: job.id, buf: job.buf };
  try {
    reply.scan = scanChatBody(Buffer.from(job.buf, 0, job.length));
  } catch (err) {
    if (err instanceof InvalidRequest) reply.invalid = err.message;
    else reply.error = err instanceof Error ? err.message : String(err);
  }
  parentPort?.postMessage(reply, [job.buf]);
});
