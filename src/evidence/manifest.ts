/**
 * The evidence manifest: what a verdict was made of, as one JSON document signed by the validator.
 * Every file it names is addressed by sha256 (stored under blobs/<sha256> when it is in the archive,
 * or named by digest alone, with the reason). Parsed with zod here, once, when read back.
 */
import { z } from "zod";
import type { GradingRecord } from "../episode/index.js";

export const EVIDENCE_SCHEMA = "trajrl-evidence/1";

const sha256 = z.string().regex(/^[0-9a-f]{64}$/, "a lowercase hex sha256");
const count = z.number().int().nonnegative();

/** Why a file is named by its digest alone. */
export const OMISSION = {
  overBudget: "over_budget",
  uploadCap: "upload_cap",
} as const;

export const blobRefSchema = z.object({
  sha256,
  bytes: count,
  /** In the archive under blobs/<sha256>; else the digest alone and `omitted` says why. */
  stored: z.boolean(),
  omitted: z.enum([OMISSION.overBudget, OMISSION.uploadCap]).nullable(),
});
export type BlobRef = z.infer<typeof blobRefSchema>;

/** The files of an episode the evidence names (the deliverable is the one a re-grade needs). */
export const EPISODE_FILES = ["deliverable", "ctrf.json", "turns.jsonl", "transcript.txt"] as const;
export type EpisodeFileName = (typeof EPISODE_FILES)[number];

/** src/episode grading-record.ts, as read back from grading.json. */
export const gradingRecordSchema = z.object({
  schema: z.literal(1),
  graded: z.boolean(),
  grader: z.enum(["harness", "files", "bench"]),
  image: z.object({ ref: z.string(), id: z.string(), repo_digest: z.string().nullable() }),
  tests: z.object({ kind: z.enum(["scenario", "tests_files"]), digest: sha256.nullable() }),
  agent_output_path: z.string().min(1),
  timeout_ms: z.number().positive(),
  declared_tests: count.nullable(),
  network: z.enum(["none", "bridge"]),
  deliverable: z.object({ kind: z.string(), bytes: count.nullable(), sha256: sha256.nullable() }),
  report: z.object({ reward_text: z.string().nullable() }),
  grade: z
    .object({
      quality: z.number().min(0).max(1),
      tests: count,
      passed: count,
      reward: z.number().nullable(),
      failure: z.string().nullable(),
    })
    .nullable(),
});
/** A, once the compiler has checked that it is assignable to B. */
type Checked<A extends B, B> = A;
/** The keys one of A and B has and the other lacks. */
type KeysApart<A, B> = Exclude<keyof A, keyof B> | Exclude<keyof B, keyof A>;
type Out = z.output<typeof gradingRecordSchema>;
/**
 * grading.json as read back: the schema's output, held to src/episode's GradingRecord (the type the
 * episode writes) both ways — each assignable to the other, no key on one side alone (the last term
 * is `{}` when none is) — so a field added to one and forgotten in the other does not compile.
 */
export type GradingRecordJson = Checked<Out, Checked<GradingRecord, z.input<typeof gradingRecordSchema>>> &
  Record<Checked<KeysApart<GradingRecord, Out>, never>, never>;

export const evidenceEpisodeSchema = z.object({
  scenario: z.string().min(1),
  episode_id: z.string().min(1),
  attempts: count,
  status: z.enum(["scored", "failed"]),
  failure: z.object({ class: z.string(), code: z.string() }).nullable(),
  /** The episode's quality as the verdict holds it (before the wire's rounding). */
  quality: z.number().min(0).max(1),
  cost_usd: z.number().nonnegative(),
  /**
   * grade: the verdict's quality is the grader's; zero: the episode scored 0 whatever the grader
   * said (not graded, or a failure that zeroes it: `failure` says which).
   */
  score_rule: z.enum(["grade", "zero"]),
  /** What graded it (grading.json), null when the episode left no record (it ended before grading). */
  grading: gradingRecordSchema.nullable(),
  files: z.partialRecord(z.enum(EPISODE_FILES), blobRefSchema),
  receipts: z.object({
    count,
    /** Σ usd_pico of this episode's receipts (exact, decimal). */
    usd_pico: z.string().regex(/^\d+$/),
    /** Rows the meter did not keep (past its 2 000 per episode): the sum is then short. */
    dropped: count,
  }),
});
export type EvidenceEpisode = z.infer<typeof evidenceEpisodeSchema>;

export const manifestSchema = z.object({
  schema: z.literal(EVIDENCE_SCHEMA),
  created_at: z.string(),
  validator: z.object({
    version: z.string(),
    /** The ss58 address that signs signature.json. */
    hotkey: z.string().min(1),
    /** hotkey: the validator's wallet hotkey; local: a key of the machine that ran `eval` without a wallet. */
    signer: z.enum(["hotkey", "local"]),
  }),
  evaluation: z.object({
    id: z.string().nullable(),
    source: z.enum(["local", "epoch"]),
    epoch_id: z.string().nullable(),
    label: z.string().nullable(),
    started_at: z.string().nullable(),
    finished_at: z.string().nullable(),
  }),
  pack_hash: z.string().min(1),
  spec: count,
  suite: z.string().nullable(),
  bench: z.record(z.string(), z.unknown()).nullable(),
  price_table_hash: z.string().nullable(),
  /** The verdict payload as posted (POST /api/v2/epoch/{id}/score without its signing fields). */
  payload: z.record(z.string(), z.unknown()),
  /** Every final episode's receipts, hash-chained in episode order (receipts.jsonl). */
  receipts: z.object({ file: blobRefSchema, count, head: sha256 }),
  episodes: z.array(evidenceEpisodeSchema),
});
export type Manifest = z.infer<typeof manifestSchema>;

/** signature.json: the manifest's sha256 signed, as the platform's messages are (prefix:ss58:ts:extra). */
export const signatureSchema = z.object({
  signer: z.string().min(1),
  kind: z.enum(["hotkey", "local"]),
  timestamp: count,
  message: z.string(),
  signature: z.string().regex(/^0x[0-9a-f]{128}$/i),
});
export type SignatureFile = z.infer<typeof signatureSchema>;

/** The manifest's bytes: the exact bytes signed and hashed (the evidence's id). */
export function manifestBytes(m: Manifest): Buffer {
  return Buffer.from(`${JSON.stringify(m, null, 1)}\n`, "utf8");
}
