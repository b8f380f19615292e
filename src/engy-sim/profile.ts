/**
 * Per-model behaviour of the simulator. Shipped defaults live in profiles.json (the simulator's
 * own list of the eight allowlisted Engy models, ordered cheap → strong); a profile file or object
 * given at start overrides any subset of fields, model by model.
 */
import { readFile } from "node:fs/promises";
import { z } from "zod";
import { InputError } from "../errors.js";
import { faultRuleSchema } from "./faults.js";
import defaults from "./profiles.json" with { type: "json" };

export const modelProfileSchema = z.strictObject({
  /** Price tier, for humans: must agree with price-table.json (expensive = strong). */
  tier: z.enum(["cheap", "mid", "strong"]),
  /** Time to first token at latencyScale 1, ms. */
  ttft_ms: z.number().min(0).max(600_000),
  /** Streaming speed at latencyScale 1. */
  tokens_per_s: z.number().positive().max(1_000_000),
  /** Probability of producing the correct next action (the reference solution / a correct hint). */
  skill: z.number().min(0).max(1),
  /** Text tokens the model writes per turn besides its tool calls. */
  verbosity: z.number().int().min(0).max(8192),
  /** Probability that a tool-call turn carries broken JSON arguments. */
  malformed_tool_json_rate: z.number().min(0).max(1),
  /** Prefix caching on/off. */
  cache: z.boolean(),
});
export type ModelProfile = z.infer<typeof modelProfileSchema>;

export const simProfileSchema = z.strictObject({
  version: z.literal(1),
  /** When the reference attempt fails, probability of the partial solution (if the scenario has one). */
  partial_rate: z.number().min(0).max(1),
  /** A correct hint in the conversation turns success p into 1 − (1 − p)(1 − hint_boost). */
  hint_boost: z.number().min(0).max(1),
  /** Attempts per session (a visibly failed attempt is retried until this many). */
  max_attempts: z.number().int().min(1).max(10),
  models: z.record(z.string(), modelProfileSchema),
  faults: z.array(faultRuleSchema),
  /** How the simulator counts tokens (tokens.ts): "plain", or "adversarial" for the cap's tests. */
  tokenizer: z.enum(["plain", "adversarial"]).default("plain"),
});
export type SimProfile = z.infer<typeof simProfileSchema>;

/** What a caller may pass: any subset, merged over the defaults. */
export const simProfileOverrideSchema = z.strictObject({
  version: z.literal(1).optional(),
  partial_rate: simProfileSchema.shape.partial_rate.optional(),
  hint_boost: simProfileSchema.shape.hint_boost.optional(),
  max_attempts: simProfileSchema.shape.max_attempts.optional(),
  models: z.record(z.string(), modelProfileSchema.partial()).optional(),
  faults: z.array(faultRuleSchema).optional(),
  tokenizer: z.enum(["plain", "adversarial"]).optional(),
});
export type SimProfileOverride = z.input<typeof simProfileOverrideSchema>;

export const DEFAULT_PROFILE: SimProfile = simProfileSchema.parse(defaults);

/** The eight model ids, in the order of the shipped profile (cheap → strong). */
export const SIM_MODELS: readonly string[] = Object.freeze(Object.keys(DEFAULT_PROFILE.models));

/** Merge an override over the defaults; only the shipped models exist (GET /v1/models lists exactly them). */
export function resolveProfile(override: SimProfileOverride | undefined, source = "profile"): SimProfile {
  if (override === undefined) return DEFAULT_PROFILE;
  const parsed = simProfileOverrideSchema.safeParse(override);
  if (!parsed.success) {
    const why = parsed.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ");
    throw new InputError("invalid_sim_profile", `${source}: ${why}`);
  }
  const o = parsed.data;
  const models: Record<string, ModelProfile> = {};
  for (const id of SIM_MODELS) models[id] = { ...DEFAULT_PROFILE.models[id]!, ...(o.models?.[id] ?? {}) };
  const unknown = Object.keys(o.models ?? {}).filter((id) => !SIM_MODELS.includes(id));
  if (unknown.length)
    throw new InputError("invalid_sim_profile", `${source}: unknown model(s) ${unknown.join(", ")}`);
  return simProfileSchema.parse({
    version: 1,
    partial_rate: o.partial_rate ?? DEFAULT_PROFILE.partial_rate,
    hint_boost: o.hint_boost ?? DEFAULT_PROFILE.hint_boost,
    max_attempts: o.max_attempts ?? DEFAULT_PROFILE.max_attempts,
    models,
    faults: o.faults ?? DEFAULT_PROFILE.faults,
    tokenizer: o.tokenizer ?? DEFAULT_PROFILE.tokenizer,
  });
}

export async function loadProfileFile(path: string): Promise<SimProfile> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    throw new InputError(
      "file_not_readable",
      `${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new InputError("invalid_sim_profile", `${path}: not JSON (${(err as Error).message})`);
  }
  return resolveProfile(json as SimProfileOverride, path);
}
