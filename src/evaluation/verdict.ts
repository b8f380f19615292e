/**
 * Pure rules of an evaluation: what to do with an episode's outcome, and how outcomes become a verdict.
 * Upstream and infra faults never score against a miner: they are retried, and what stays unresolved
 * discards the run instead of counting as 0.
 */
import type { EpisodeOutcome, ModelUsage, Provenance, ScenarioVerdict, Verdict } from "./types.js";

export const MAX_ATTEMPTS = 4; // the first run + 3 re-runs

export type Disposition = "final" | "retry" | "unresolved";

export function dispose(outcome: EpisodeOutcome, attempt: number, maxAttempts = MAX_ATTEMPTS): Disposition {
  const ourFault =
    outcome.truncatedBeforeToolCall ||
    (outcome.failure !== undefined &&
      (outcome.failure.class === "upstream" || outcome.failure.class === "infra"));
  if (!ourFault) return "final";
  return attempt < maxAttempts ? "retry" : "unresolved";
}

/** Growing back-off between re-runs of one scenario: 2 s, 8 s, 30 s (scaled for tests). */
export function backoffMs(attempt: number, scale = 1): number {
  const table = [2_000, 8_000, 30_000];
  return Math.round((table[Math.min(attempt - 1, table.length - 1)] ?? 30_000) * scale);
}

export function round4(x: number): number {
  return Math.round((x + Number.EPSILON) * 10_000) / 10_000;
}

/** Sum money in integer micro-dollars so per-model and per-scenario totals agree to the cent and beyond. */
const toMicro = (usd: number) => Math.round(usd * 1e6);
const fromMicro = (micro: number) => micro / 1e6;

export function mergeUsage(into: Record<string, ModelUsage>, add: Record<string, ModelUsage>): void {
  for (const [model, u] of Object.entries(add)) {
    const cur = into[model] ?? {
      calls: 0,
      costUsd: 0,
      promptTokens: 0,
      cachedTokens: 0,
      completionTokens: 0,
    };
    into[model] = cur;
    cur.calls += u.calls;
    cur.costUsd = fromMicro(toMicro(cur.costUsd) + toMicro(u.costUsd));
    cur.promptTokens += u.promptTokens;
    cur.cachedTokens += u.cachedTokens;
    cur.completionTokens += u.completionTokens;
  }
}

/**
 * Unresolved episodes decide whether the run can be scored at all. Every episode failed upstream and
 * nothing was billed: the provider (or our key) was down — `llm_provider_failure`. Any other unresolved
 * episode: `infra_incomplete`. Either way the run is discarded, never scored 0.
 */
export function discardReason(
  finals: ReadonlyArray<{ outcome: EpisodeOutcome; disposition: Disposition }>,
): { code: string; message: string } | null {
  const unresolved = finals.filter((f) => f.disposition === "unresolved");
  if (unresolved.length === 0) return null;
  const billed = finals.reduce((n, f) => n + f.outcome.billedCalls, 0);
  const allUpstream = finals.every(
    (f) => f.disposition === "unresolved" && f.outcome.failure?.class === "upstream",
  );
  if (allUpstream && billed === 0) {
    return {
      code: "llm_provider_failure",
      message:
        "every episode failed at the model provider and nothing was billed; check the LLM key, credits and network",
    };
  }
  const names = unresolved.map((f) => `${f.outcome.scenario} (${f.outcome.failure?.code ?? "truncated"})`);
  return {
    code: "infra_incomplete",
    message: `episodes failed for reasons that are not the miner's after ${MAX_ATTEMPTS} attempts: ${names.join(", ")}`,
  };
}

export function scenarioVerdict(
  outcome: EpisodeOutcome,
  attempts: number,
  episodeId: string,
): ScenarioVerdict {
  return {
    scenario: outcome.scenario,
    quality: round4(outcome.quality),
    tests: outcome.tests,
    passed: outcome.passed,
    status: outcome.status,
    ...(outcome.failure ? { failure: outcome.failure } : {}),
    costUsd: outcome.costUsd,
    byModel: outcome.byModel,
    attempts,
    episodeId,
    timings: outcome.timings,
    ...(outcome.judge ? { judge: outcome.judge } : {}),
  };
}

export function buildVerdict(args: {
  evaluationId: string;
  packHash: string;
  spec: number;
  scenarios: ScenarioVerdict[];
  provenance: Provenance;
  startedAt: string;
  finishedAt: string;
}): Verdict {
  const byModel: Record<string, ModelUsage> = {};
  let micro = 0;
  let sum = 0;
  for (const s of args.scenarios) {
    sum += s.quality;
    micro += toMicro(s.costUsd);
    mergeUsage(byModel, s.byModel);
  }
  return {
    evaluationId: args.evaluationId,
    packHash: args.packHash,
    spec: args.spec,
    score: round4(sum),
    qualified: args.scenarios.some((s) => s.quality > 0),
    rejected: false,
    scenarios: args.scenarios,
    costUsd: fromMicro(micro),
    byModel,
    provenance: args.provenance,
    startedAt: args.startedAt,
    finishedAt: args.finishedAt,
  };
}

/** A pack rejected before any episode: a verdict with score 0, as the protocol wants it reported. */
export function rejectionVerdict(args: {
  evaluationId: string;
  packHash: string;
  spec: number;
  code: string;
  message: string;
  provenance: Provenance;
  at: string;
}): Verdict {
  return {
    evaluationId: args.evaluationId,
    packHash: args.packHash,
    spec: args.spec,
    score: 0,
    qualified: false,
    rejected: true,
    rejection: { code: args.code, message: args.message },
    scenarios: [],
    costUsd: 0,
    byModel: {},
    provenance: args.provenance,
    startedAt: args.at,
    finishedAt: args.at,
  };
}
