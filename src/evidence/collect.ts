/**
 * What an evaluation left, gathered for its evidence: the verdict and its episodes from SQLite
 * (src/store), each final episode's receipts (SQLite, in seq order) and files (its artifacts folder:
 * grading.json, the deliverable, ctrf.json, the session export and transcript), and the payload as
 * posted. Everything read here is parsed with zod; what is missing is left out, never thrown.
 */
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { ARTIFACT_FILES } from "../episode/index.js";
import type { Logger } from "../log.js";
import { type Db, EvaluationRepo, type EvaluationRow, ReceiptRepo } from "../store/index.js";
import { type EpisodeFileName, gradingRecordSchema, type Manifest } from "./manifest.js";
import { receiptRow } from "./receipts-chain.js";
import type { CollectedEpisode, CollectedEvidence } from "./seal.js";

const MiB = 1024 * 1024;
/** Above the episode's own copy caps (src/episode collect.ts): nothing larger is an artifact. */
const READ_CAP = 64 * MiB;

const storedVerdict = z.object({
  spec: z.number().int().nonnegative(),
  rejected: z.boolean().optional(),
  startedAt: z.string().optional(),
  finishedAt: z.string().optional(),
  scenarios: z
    .array(
      z.object({
        scenario: z.string(),
        quality: z.number(),
        status: z.enum(["scored", "failed"]),
        failure: z.object({ class: z.string(), code: z.string() }).passthrough().optional(),
        costUsd: z.number(),
        attempts: z.number().int(),
        episodeId: z.string(),
      }),
    )
    .default([]),
  provenance: z
    .object({
      priceTableHash: z.string().optional(),
      suite: z.string().optional(),
      bench: z.record(z.string(), z.unknown()).optional(),
    })
    .passthrough()
    .optional(),
});
type StoredVerdict = z.infer<typeof storedVerdict>;

const storedOutcome = z.object({ artifactsDir: z.string().optional() }).passthrough();
const meterSummary = z.object({
  summary: z.object({ rows_dropped: z.number().int().optional() }).nullable(),
});

/** The episode's files the evidence carries, by their artifact names. */
const FILES: ReadonlyArray<[EpisodeFileName, string]> = [
  ["deliverable", ARTIFACT_FILES.deliverable],
  ["ctrf.json", ARTIFACT_FILES.ctrf],
  ["turns.jsonl", ARTIFACT_FILES.turns],
  ["transcript.txt", ARTIFACT_FILES.transcript],
];

async function readBounded(path: string): Promise<Buffer | undefined> {
  const st = await stat(path).catch(() => undefined);
  if (!st?.isFile() || st.size > READ_CAP) return undefined;
  return readFile(path).catch(() => undefined);
}

async function readJson<T>(path: string, schema: z.ZodType<T>): Promise<T | null> {
  const data = await readBounded(path);
  if (!data) return null;
  try {
    const r = schema.safeParse(JSON.parse(data.toString("utf8")));
    return r.success ? r.data : null;
  } catch {
    return null;
  }
}

async function collectEpisode(
  s: StoredVerdict["scenarios"][number],
  artifactsDir: string | undefined,
  receipts: ReceiptRepo,
): Promise<CollectedEpisode> {
  const files: CollectedEpisode["files"] = {};
  let grading = null;
  let dropped = 0;
  if (artifactsDir) {
    for (const [name, file] of FILES) {
      const data = await readBounded(join(artifactsDir, file));
      if (data) files[name] = data;
    }
    grading = await readJson(join(artifactsDir, ARTIFACT_FILES.grading), gradingRecordSchema);
    dropped =
      (await readJson(join(artifactsDir, ARTIFACT_FILES.meter), meterSummary))?.summary?.rows_dropped ?? 0;
  }
  return {
    scenario: s.scenario,
    episodeId: s.episodeId,
    attempts: s.attempts,
    status: s.status,
    failure: s.failure ? { class: s.failure.class, code: s.failure.code } : null,
    quality: s.quality,
    costUsd: s.costUsd,
    grading,
    files,
    receipts: receipts.listByEpisode(s.episodeId).map(receiptRow),
    dropped,
  };
}

function evaluationOf(
  row: EvaluationRow | undefined,
  v: StoredVerdict | undefined,
  ctx: EvidenceContext,
): Manifest["evaluation"] {
  return {
    id: row?.id ?? null,
    source: row?.source ?? ctx.source,
    epoch_id: row?.epochId ?? (ctx.epochId === null ? null : String(ctx.epochId)),
    label: typeof row?.meta.label === "string" ? row.meta.label : null,
    started_at: v?.startedAt ?? row?.createdAt ?? null,
    finished_at: v?.finishedAt ?? row?.finishedAt ?? null,
  };
}

/** What the verdict is of when no evaluation row says it (a pack the daemon could not fetch). */
export interface EvidenceContext {
  packHash: string;
  epochId: number | null;
  source: "local" | "epoch";
}

export async function collectEvidence(args: {
  db: Db;
  evaluationId: string | null;
  payload: Record<string, unknown>;
  context: EvidenceContext;
  log: Logger;
}): Promise<CollectedEvidence> {
  const repo = new EvaluationRepo(args.db);
  const row = args.evaluationId ? repo.get(args.evaluationId) : undefined;
  const parsed = row?.verdict ? storedVerdict.safeParse(row.verdict) : undefined;
  if (parsed && !parsed.success)
    args.log.warn(
      { evaluation: args.evaluationId, err: parsed.error.issues[0]?.message },
      "evidence.verdict_unreadable",
    );
  const v = parsed?.success ? parsed.data : undefined;
  const dirs = new Map<string, string | undefined>();
  for (const ep of row ? repo.episodes(row.id) : []) {
    const o = storedOutcome.safeParse(ep.outcome);
    dirs.set(ep.id, o.success ? o.data.artifactsDir : undefined);
  }
  const receipts = new ReceiptRepo(args.db);
  const episodes: CollectedEpisode[] = [];
  for (const s of v?.scenarios ?? []) episodes.push(await collectEpisode(s, dirs.get(s.episodeId), receipts));
  return {
    evaluation: evaluationOf(row, v, args.context),
    packHash: row?.packHash ?? args.context.packHash,
    spec: v?.spec ?? row?.spec ?? Number(args.payload.spec_number ?? 0),
    suite: v?.provenance?.suite ?? null,
    bench: v?.provenance?.bench ?? null,
    priceTableHash: v?.provenance?.priceTableHash ?? null,
    payload: args.payload,
    episodes,
  };
}
