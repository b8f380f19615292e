/**
 * Log archives on their way to the platform: written to DATA_DIR/log-archives, recorded in
 * platform_log_uploads, uploaded, deleted once the server has them. Whatever did not go through
 * (platform down, process stopped) is replayed at start and on every heartbeat tick; an archive
 * the server refuses for good (4xx) or that keeps failing is abandoned, never retried forever.
 */
import { randomBytes } from "node:crypto";
import { mkdir, readFile, rename, unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { ARTIFACT_FILES } from "../episode/index.js";
import type { Logger } from "../log.js";
import { MAX_LOG_ARCHIVE_BYTES, type PlatformClient } from "../platform/index.js";
import type { LogUpload, LogUploadRepo } from "../store/index.js";
import { evalIdOf } from "./decide.js";
import type { FinishedEvaluation } from "./eval-loop.js";
import { type ArchiveEntry, buildArchive, collectFiles, upstreamEpisodeFiles } from "./log-archive.js";

/** The Python daemon replays the last 2 days of pending uploads (validator.py `_replay_pending_uploads`). */
export const REPLAY_WINDOW_MS = 2 * 24 * 60 * 60 * 1000;
/** Attempts before a retryable failure is given up. */
export const MAX_UPLOAD_ATTEMPTS = 8;

/** The multipart fields of an eval log upload besides the signing ones, as stored in `meta`. */
const metaSchema = z.object({
  miner_hotkey: z.string().min(1),
  miner_uid: z.coerce.number().int(),
  block_height: z.coerce.number().int().min(0),
  pack_hash: z.string().min(1),
  epoch_number: z.coerce.number().int().min(0).optional(),
  spec_number: z.coerce.number().int().min(0).optional(),
});
export type EvalLogMeta = z.input<typeof metaSchema>;

export interface LogUploaderDeps {
  repo: LogUploadRepo;
  client: Pick<PlatformClient, "uploadLogs">;
  /** Where archives wait: DATA_DIR/log-archives. */
  dir: string;
  log: Logger;
  now: () => number;
  maxBytes?: number;
}

export class LogUploader {
  private readonly log: Logger;
  constructor(private readonly d: LogUploaderDeps) {
    this.log = d.log.child({ component: "log-uploads" });
  }

  /** Build the archive, write it to disk and record it for upload. */
  async archive(args: {
    evalId: string;
    epochId: number;
    meta: EvalLogMeta;
    entries: ArchiveEntry[];
    /** Entries kept whole (the evidence: a cut archive would not verify). */
    pinned?: ArchiveEntry[];
  }): Promise<LogUpload> {
    const meta = metaSchema.parse(args.meta);
    const built = await buildArchive(args.entries, this.d.maxBytes ?? MAX_LOG_ARCHIVE_BYTES, args.pinned);
    await mkdir(this.d.dir, { recursive: true });
    const path = join(this.d.dir, `${args.evalId}.tar.gz`);
    const tmp = `${path}.${randomBytes(4).toString("hex")}.tmp`;
    await writeFile(tmp, built.gz);
    await rename(tmp, path);
    const u = this.d.repo.enqueue({
      kind: "eval",
      evalId: args.evalId,
      epochId: args.epochId,
      meta: dropUndefined(meta),
      archivePath: path,
      sizeBytes: built.gz.length,
      nowMs: this.d.now(),
    });
    this.log.info(
      {
        evalId: args.evalId,
        epoch: args.epochId,
        bytes: built.gz.length,
        files: built.files,
        truncated: Object.keys(built.truncated).length,
      },
      "logs.archived",
    );
    return u;
  }

  /** One upload attempt: uploaded (and deleted), failed (stays pending for a replay), or abandoned. */
  async upload(u: LogUpload, signal?: AbortSignal): Promise<"uploaded" | "failed" | "abandoned"> {
    const log = this.log.child({ evalId: u.evalId, epoch: u.epochId });
    const meta = metaSchema.safeParse(u.meta);
    if (!meta.success) {
      this.d.repo.abandon(u.id, "stored upload fields are invalid");
      log.warn("logs.upload_abandoned");
      return "abandoned";
    }
    let archive: Buffer;
    try {
      archive = await readFile(u.archivePath);
    } catch {
      this.d.repo.abandon(u.id, "archive file is gone");
      log.warn({ reason: "archive file is gone" }, "logs.upload_abandoned");
      return "abandoned";
    }
    const r = await this.d.client.uploadLogs(
      { eval_id: u.evalId, ...meta.data, archive: new Uint8Array(archive) },
      { signal },
    );
    if (r.ok) {
      this.d.repo.markUploaded(u.id, this.d.now());
      await unlink(u.archivePath).catch(() => {});
      log.info({ bytes: archive.length, logId: r.receipt?.log_id }, "logs.uploaded");
      return "uploaded";
    }
    const reason = `${r.code}${r.status === null ? "" : ` (HTTP ${r.status})`}: ${r.message}`;
    if (r.code === "aborted") return "failed";
    if (!r.retryable || u.attempts + 1 >= MAX_UPLOAD_ATTEMPTS) {
      this.d.repo.markFailed(u.id, reason);
      this.d.repo.abandon(u.id, reason);
      await unlink(u.archivePath).catch(() => {});
      log.warn({ reason }, "logs.upload_abandoned");
      return "abandoned";
    }
    this.d.repo.markFailed(u.id, reason);
    log.warn({ reason, attempts: u.attempts + 1 }, "logs.upload_failed");
    return "failed";
  }

  /** Upload every pending archive of the replay window, oldest first. */
  async replay(signal?: AbortSignal): Promise<Record<"uploaded" | "failed" | "abandoned", number>> {
    const counts = { uploaded: 0, failed: 0, abandoned: 0 };
    for (const u of this.d.repo.pending(this.d.now() - REPLAY_WINDOW_MS)) {
      if (signal?.aborted) break;
      counts[await this.upload(u, signal)]++;
    }
    if (counts.uploaded + counts.failed + counts.abandoned > 0) this.log.info(counts, "logs.replayed");
    return counts;
  }
}

function dropUndefined(o: Record<string, string | number | undefined>): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out;
}

/**
 * One evaluation's log archive: verdict.json, the daemon's lines written while it ran, its
 * artifacts (DATA_DIR/runs/<evaluation>), each episode's policy.log and meter.json as upstream
 * uploads them, and the verdict's evidence whole (the deliverables ride there, not twice);
 * recorded, then uploaded.
 */
export async function archiveEvaluation(
  uploader: LogUploader,
  f: FinishedEvaluation,
  dataDir: string,
  signal: AbortSignal,
  evidence?: ArchiveEntry,
): Promise<void> {
  const entries: ArchiveEntry[] = [
    { name: "verdict.json", data: Buffer.from(`${JSON.stringify(f.verdict, null, 1)}\n`) },
    ...(f.log !== null ? [{ name: "validator.log", data: Buffer.from(f.log) }] : []),
  ];
  if (f.evaluationId) {
    const { entries: files, skipped } = await collectFiles(
      join(dataDir, "runs", f.evaluationId),
      "artifacts",
    );
    entries.push(
      ...upstreamEpisodeFiles(files.filter((e) => !e.name.endsWith(`/${ARTIFACT_FILES.deliverable}`))),
    );
    if (skipped.length) entries.push({ name: "SKIPPED.txt", data: Buffer.from(`${skipped.join("\n")}\n`) });
  }
  const u = await uploader.archive({
    evalId: evalIdOf(f.plan.epochId, f.startedAtMs),
    epochId: f.plan.epochId,
    meta: {
      miner_hotkey: f.plan.challengerHotkey,
      miner_uid: f.plan.challengerUid,
      block_height: f.blockHeight,
      pack_hash: f.plan.packHash,
      epoch_number: f.plan.epochId,
      spec_number: f.verdict.spec_number,
    },
    entries,
    ...(evidence ? { pinned: [evidence] } : {}),
  });
  await uploader.upload(u, signal);
}
