/**
 * The platform's wire shapes, parsed once at the boundary with zod. Field names stay the wire's
 * (snake_case) so every field can be checked against docs/API.md by eye; see README.md here.
 * Lenient where the server is known to vary (numeric strings from Postgres NUMERIC/BIGINT, fields
 * added over time) or where the Python daemon falls back (block numbers, uids: `int()` or null),
 * strict where a wrong value would make us act wrongly (ids, hashes, flags). Pure.
 */
import { z } from "zod";
import { pyInt } from "../pack/index.js";

/**
 * A finite number, or a decimal string (Postgres NUMERIC/BIGINT arrive as strings: `"score": "0.92"`).
 * `"1e400"` is a valid decimal string but not a number we can compute with: refused, like NaN.
 */
const numeric = z
  .union([
    z.number(),
    z
      .string()
      .regex(/^-?\d+(\.\d+)?([eE][-+]?\d+)?$/)
      .transform(Number),
  ])
  .refine(Number.isFinite, "not a finite number");
const int = z.number().int();
/** A positive safe-integer id that may arrive as a string (`"since_epoch_id": "100"`). */
const id = z
  .union([int, z.string().regex(/^\d+$/).transform(Number)])
  .pipe(z.number().int().min(0).max(Number.MAX_SAFE_INTEGER));
/** Missing and null both mean "not given"; the parsed value is `null` either way. */
const opt = <T extends z.ZodType>(s: T) => s.nullish().transform((v) => (v ?? null) as z.output<T> | null);

// ---------------------------------------------------------------------------------------------
// GET /api/v2/epoch/current
// ---------------------------------------------------------------------------------------------

/**
 * A number the Python daemon reads with `int()` and falls back on (`_opt_int`, `challenger_uid`,
 * `start_block`): `"123"`, `123.0`, `" 123 "` are 123; anything `int()` refuses is null, never a
 * failed response. Pure Python semantics: src/pack `pyInt`.
 */
const pyIntOrNull = z
  .unknown()
  .optional()
  .transform((v) => pyInt(v));

/** Python truthiness of a JSON value (`x or 0`). */
const truthy = (v: unknown) =>
  !(
    v === undefined ||
    v === null ||
    v === false ||
    v === 0 ||
    v === "" ||
    (Array.isArray(v) && v.length === 0)
  ) && !(typeof v === "object" && v !== null && !Array.isArray(v) && Object.keys(v).length === 0);

/**
 * The epoch length `_epoch_has_budget` divides by, from the fields as the server sent them:
 * `int(epoch_length_blocks or 0)`, else `int((end_block or 0) - (start_block or 0))` (a subtraction
 * Python can only do on numbers), else 0, which passes the gate.
 */
export function budgetLengthBlocks(raw: Record<string, unknown>): number {
  const declared = pyInt(truthy(raw.epoch_length_blocks) ? raw.epoch_length_blocks : 0) ?? 0;
  if (declared > 0) return declared;
  const num = (v: unknown) => (truthy(v) ? v : 0);
  const end = num(raw.end_block);
  const start = num(raw.start_block);
  const arith = (v: unknown) => typeof v === "number" || typeof v === "boolean";
  if (!arith(end) || !arith(start)) return 0;
  return pyInt(Number(end) - Number(start)) ?? 0;
}

const challengeEpochFields = z.object({
  /** `int(epoch["challenge_epoch_id"])`; an epoch without a usable id is skipped upstream, refused here. */
  challenge_epoch_id: pyIntOrNull.pipe(z.number().int().min(0)),
  challenger_hotkey: z.string().min(1),
  challenger_pack_hash: z
    .string()
    .min(1)
    .transform((s) => s.toLowerCase()),
  /** Gated: present only for a validator-signed request or an epoch older than 24 h. */
  challenger_pack_url: opt(z.string()),
  /** Not documented in API.md; the Python daemon reads it with `int()`, -1 when unusable (null here). */
  challenger_uid: pyIntOrNull,
  start_block: pyIntOrNull,
  end_block: pyIntOrNull,
  epoch_length_blocks: pyIntOrNull,
  /** Not derived by the Python daemon's tick (it never reads it there); null when not a string. */
  status: z
    .unknown()
    .optional()
    .transform((v) => (typeof v === "string" ? v : null)),
  created_at: z
    .unknown()
    .optional()
    .transform((v) => (typeof v === "string" ? v : null)),
  /** The scoring spec the server schedules; `resolve_eval_spec` reads it with `int()`. null → the local spec. */
  spec_number: pyIntOrNull,
  /** Not on the wire: `_epoch_has_budget`'s length, from the raw fields (budgetLengthBlocks). */
  budget_length_blocks: z.number().int(),
});

export const challengeEpochSchema = z.preprocess(
  (raw) =>
    raw !== null && typeof raw === "object" && !Array.isArray(raw)
      ? { ...raw, budget_length_blocks: budgetLengthBlocks(raw as Record<string, unknown>) }
      : raw,
  challengeEpochFields,
);
export type ChallengeEpoch = z.output<typeof challengeEpochSchema>;

export const seatedWinnerSchema = z.object({
  hotkey: z.string().min(1),
  /** Informational (the daemon resolves the uid from the metagraph by hotkey); -1 means unknown. */
  uid: opt(int).transform((u) => (u !== null && u < 0 ? null : u)),
  pack_hash: opt(z.string()),
  pack_url: opt(z.string()),
  score: opt(numeric),
  since_epoch_id: opt(id),
  spec_number: opt(int),
});
export type SeatedWinner = z.output<typeof seatedWinnerSchema>;

export const epochCurrentSchema = z.object({
  success: z.boolean().optional(),
  /** null in a 200 means "no epoch", like a 404. */
  epoch: opt(challengeEpochSchema),
  /**
   * Advisory only (daemons read the seat from /winner/current); a malformed block here must not
   * cost us the epoch, so it degrades to null instead of failing the response.
   */
  winner: opt(seatedWinnerSchema).catch(null),
  /** `_opt_int`: the server's chain view, null when its RPC is down or the value is not `int()`-able. */
  current_block: pyIntOrNull,
  elapsed_blocks: pyIntOrNull,
  remaining_blocks: pyIntOrNull,
});
export type EpochCurrent = z.output<typeof epochCurrentSchema>;

// ---------------------------------------------------------------------------------------------
// GET /api/v2/winner/current
// ---------------------------------------------------------------------------------------------

export const finalizedEpochSchema = z
  .object({
    challenge_epoch_id: id,
    challenger_hotkey: z.string().min(1),
    challenger_pack_hash: z.string().min(1),
    challenger_pack_url: opt(z.string()),
    outcome: z.string(),
    winner_replaced: z.boolean().optional(),
    finalized_at: z.string(),
    spec_number: opt(int),
    start_block: opt(int),
    end_block: opt(int),
  })
  // winner_replaced is "a boolean projection of outcome"; derive it when an older server omits it.
  .transform((e) => ({ ...e, winner_replaced: e.winner_replaced ?? e.outcome === "winner_replaced" }));
export type FinalizedEpoch = z.output<typeof finalizedEpochSchema>;

export const voteSchema = z.object({
  validator_hotkey: z.string().min(1),
  /** Frozen at score POST; null for rows older than the server's migration 070. */
  validator_stake: opt(numeric.refine((n) => n >= 0, "negative stake")),
  challenger_pack_hash: opt(z.string()),
  challenger_score: opt(numeric),
  challenger_qualified: opt(z.boolean()),
  challenger_rejected: opt(z.boolean()),
  winner_pack_hash: opt(z.string()),
  winner_score: opt(numeric),
  winner_qualified: opt(z.boolean()),
  winner_rejected: opt(z.boolean()),
});
export type Vote = z.output<typeof voteSchema>;

export const winnerCurrentSchema = z.object({
  success: z.boolean().optional(),
  winner: opt(seatedWinnerSchema),
  finalized_epoch: opt(finalizedEpochSchema),
  submissions: z
    .array(voteSchema)
    .nullish()
    .transform((v) => v ?? []),
});
export type WinnerCurrent = z.output<typeof winnerCurrentSchema>;

/** What a 404 from /winner/current means (the Python client treats it as cold start). */
export const COLD_START: WinnerCurrent = { winner: null, finalized_epoch: null, submissions: [] };

// ---------------------------------------------------------------------------------------------
// POST bodies we send (validated before they are queued, so a bad verdict fails at enqueue)
// ---------------------------------------------------------------------------------------------

const text = z.string().min(1);

export const challengerVerdictSchema = z
  .object({
    /** Σ episode scores, [0, 100] on the server. */
    score: z.number().min(0).max(100),
    qualified: z.boolean(),
    rejected: z.boolean().optional(),
    rejection_detail: z.string().nullable().optional(),
    scenario_results: z.record(z.string(), z.unknown()).optional(),
  })
  .refine((c) => !c.rejected || (c.score === 0 && !c.qualified), {
    message: "a rejected verdict must have score 0 and qualified false",
  });
export type ChallengerVerdict = z.output<typeof challengerVerdictSchema>;

/** Everything of a score POST except the signing fields and `version`, which the client adds per attempt. */
export const scoreVerdictSchema = z.object({
  spec_number: int.min(0),
  challenger: challengerVerdictSchema,
  llm_base_url: text.optional(),
  llm_model: text.optional(),
  judge_model: text.optional(),
  bench_image_hash: text.optional(),
  harness_image_hash: text.optional(),
  bench_version: text.optional(),
  harness_name: text.optional(),
  harness_version: text.optional(),
});
export type ScoreVerdict = z.output<typeof scoreVerdictSchema>;

/** The full score body as it goes on the wire (what the fake platform parses too). */
export const scoreBodySchema = scoreVerdictSchema.extend({
  validator_hotkey: text,
  timestamp: int.min(0),
  signature: text,
  version: text,
});
export type ScoreBody = z.output<typeof scoreBodySchema>;

export const SCENARIO_STATES = ["running", "verifying", "complete"] as const;
export type ScenarioState = (typeof SCENARIO_STATES)[number];

export const scenarioProgressEventSchema = z.object({
  miner_hotkey: text,
  /** -1 when the epoch block carries no uid (as the Python daemon sends). */
  miner_uid: int,
  scenario_name: text.refine((s) => !s.includes(":"), "scenario names are part of a ':'-joined message"),
  scenario_index: int.min(0),
  total_scenarios: int.min(0),
  state: z.enum(SCENARIO_STATES),
  quality: z.number().min(0).max(1).optional(),
  cost_usd: z.number().min(0).optional(),
  duration_s: z.number().min(0).optional(),
  timed_out: z.boolean().optional(),
  spec_number: int.min(0).optional(),
  harness_name: text.optional(),
  harness_version: text.optional(),
  llm_model: text.optional(),
});
export type ScenarioProgressEvent = z.input<typeof scenarioProgressEventSchema>;

export const heartbeatInfoSchema = z.object({
  last_set_weights_at: int.min(0).optional(),
  last_eval_at: int.min(0).optional(),
  bench_image_hash: text.optional(),
  harness_image_hash: text.optional(),
  bench_version: text.optional(),
  llm_model: text.optional(),
  llm_base_url: text.optional(),
  /** Set while the validator discards its runs (≤ 256 characters); absent when healthy. */
  health_issue: text.refine((s) => Array.from(s).length <= 256, "at most 256 characters").optional(),
});
export type HeartbeatInfo = z.input<typeof heartbeatInfoSchema>;

// ---------------------------------------------------------------------------------------------
// Responses to our POSTs
// ---------------------------------------------------------------------------------------------

export const scoreReceiptSchema = z.object({
  success: z.literal(true),
  challenge_epoch_id: id,
  validator_hotkey: z.string(),
  challenger: opt(z.object({ hotkey: z.string(), pack_hash: z.string() })),
  block_height: opt(int),
});
export type ScoreReceipt = z.output<typeof scoreReceiptSchema>;

export const heartbeatReceiptSchema = z.object({
  success: z.literal(true),
  validator: opt(z.looseObject({ hotkey: z.string() })),
});

export const logReceiptSchema = z.object({
  success: z.literal(true),
  log_id: z.union([z.string(), z.number()]).transform(String),
  size_bytes: opt(int),
});
export type LogReceipt = z.output<typeof logReceiptSchema>;

/** `{success: false, error}` (documented) or `{error}`/`{message}` (seen on other routes). */
export const errorBodySchema = z.object({
  error: z.string().optional(),
  message: z.string().optional(),
});

/** The failure's text for logs and 409 classification, at most 200 characters as the Python client logs. */
export function errorText(body: string): string {
  try {
    const parsed = errorBodySchema.safeParse(JSON.parse(body));
    if (parsed.success) {
      const t = parsed.data.error ?? parsed.data.message;
      if (t !== undefined) return t.slice(0, 200);
    }
  } catch {
    // not JSON: fall through to the raw text
  }
  return body.slice(0, 200);
}

/** One line naming what was wrong, for logs and error messages. */
export function describeZodError(err: z.ZodError): string {
  return err.issues
    .slice(0, 5)
    .map((i) => `${i.path.length ? i.path.join(".") : "(root)"}: ${i.message}`)
    .join("; ");
}
