/**
 * Pure rules of an evaluation: what to do with an episode's outcome, and how outcomes become a
 * verdict or a discard. The rules, and where they differ from upstream's, are in ./README.md.
 */
import type { ErrorCode } from "../errors.js";
import { round4 } from "../precision.js";
import type {
  EpisodeFailure,
  EpisodeOutcome,
  ModelUsage,
  Provenance,
  ScenarioVerdict,
  Verdict,
} from "./types.js";

export const MAX_ATTEMPTS = 4; // the first run + 3 re-runs (upstream's scenario_incomplete_max_retries = 3)

export type Disposition = "final" | "retry" | "unresolved";

/** The re-run reason of a truncation: the model cut off before the agent's first tool call. */
export const TRUNCATED = "truncated_before_tool_call" as const;

/** Why a scenario runs again: a failure's code or a truncation. */
export type RetryReason = ErrorCode | typeof TRUNCATED;

/**
 * Codes only the validator's side produces, whatever the pack does: never charged to a pack.
 * (engine_restarted: the Docker engine went away; sidecar_killed: a kill we did not send; aborted:
 * our own shutdown.)
 */
const VALIDATOR_ONLY: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  "engine_restarted",
  "sidecar_killed",
  "aborted",
]);

/** Why an outcome is not a result yet (an upstream/infra failure's code, or a truncation), else null. */
export function retryReason(outcome: EpisodeOutcome): RetryReason | null {
  const f = outcome.failure;
  if (f !== undefined && (f.class === "upstream" || f.class === "infra")) return f.code;
  return outcome.truncatedBeforeToolCall ? TRUNCATED : null;
}

export function dispose(outcome: EpisodeOutcome, attempt: number, maxAttempts = MAX_ATTEMPTS): Disposition {
  const why = retryReason(outcome);
  if (why === null) return "final";
  if (attempt < maxAttempts) return "retry";
  // Upstream keeps the last truncated episode as the scenario's result (_retry_episode_on_incomplete).
  return why === TRUNCATED ? "final" : "unresolved";
}

/**
 * Back-off before re-run `attempt` (1-based) of one scenario, scaled for tests. A truncation waits
 * as upstream waits for a provider's rate-limit window to pass (20 s × 3ᵏ: 20, 60, 180 s); other
 * re-runs 2, 8, 30 s.
 */
export function backoffMs(attempt: number, scale = 1, reason?: RetryReason | null): number {
  const k = Math.max(0, attempt - 1);
  if (reason === TRUNCATED) return Math.round(20_000 * 3 ** Math.min(k, 2) * scale);
  const table = [2_000, 8_000, 30_000];
  return Math.round((table[Math.min(k, table.length - 1)] ?? 30_000) * scale);
}

/**
 * Issue 20 item 8: a failure that follows the pack across re-runs is the pack's. Every attempt of
 * the scenario (all `maxAttempts` of them) ended with the same upstream/infra code, and in each the
 * meter saw the provider answer this pack's policy with a bill: the provider was up and the pack's
 * policy was in control when the failure came, every time. Then the scenario is charged to the pack
 * as a policy fault (quality 0) instead of discarding the run. Codes only our side produces never
 * qualify; neither does a truncation (kept as it came, as upstream keeps it).
 */
export function followsThePack(
  attempts: readonly EpisodeOutcome[],
  maxAttempts = MAX_ATTEMPTS,
): EpisodeFailure | null {
  if (attempts.length < maxAttempts || attempts.length === 0) return null;
  const code = retryReason(attempts[0]!);
  if (code === null || code === TRUNCATED || VALIDATOR_ONLY.has(code)) return null;
  if (attempts.some((a) => retryReason(a) !== code || a.billedCalls <= 0)) return null;
  return {
    class: "policy",
    code,
    message: `${attempts.length} attempts in a row ended with ${code} while the provider answered this pack's policy in each (billed calls ${attempts.map((a) => a.billedCalls).join(", ")}): the failure follows the pack`,
  };
}

/** The outcome a scenario is scored with when its failure follows the pack (see followsThePack). */
export function chargedToPack(last: EpisodeOutcome, failure: EpisodeFailure): EpisodeOutcome {
  return { ...last, status: "scored", quality: 0, failure, chargedToPack: true };
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
 * A provider that kept a call this long without a byte was hanging: reservations booked for calls
 * it never answered are what an outage leaves behind, not evidence of a bill.
 */
export const PROVIDER_HANG_S = 60;

/**
 * Whether the meter saw the provider bill this episode: upstream's "the meter's cost > 0". Our meter
 * also books calls whose usage never came (cut, timed out, aborted by the episode's close) at their
 * reservation — upstream's never settles those. They count as a bill, as the provider bills them
 * (issue 36 item 6: a policy that leaves its calls in flight must not make its episode read as
 * "nothing billed"), unless the provider kept a call of the episode waiting PROVIDER_HANG_S without
 * a byte: then nothing says it was answering, as in an outage.
 */
export function providerBilled(o: EpisodeOutcome): boolean {
  if (!(o.costUsd > 0)) return false;
  const m = o.meter;
  if (m === undefined || o.costUsd > m.estimatedUsd) return true;
  return m.longestWaitS < PROVIDER_HANG_S;
}

/**
 * Upstream's `_looks_like_provider_failure` (sandbox_harness.py), read on our outcomes: no episode
 * billed anything (providerBilled), and every episode shows the agent failing — stopped (deadline,
 * watchdog, a dead policy) or exited non-zero — or failed upstream through every re-run. An agent
 * that never ran, or whose exit is unknown, is not a failure (upstream's `chat_exit is None`); no
 * episodes is not a provider failure.
 */
export function looksLikeProviderFailure(outcomes: readonly EpisodeOutcome[]): boolean {
  if (outcomes.length === 0) return false;
  if (outcomes.some(providerBilled)) return false;
  return outcomes.every((o) => {
    if (o.failure?.class === "upstream" && o.status === "failed") return true;
    const a = o.agent;
    if (a === undefined) return false;
    return a.killedBy !== null || (a.exitCode !== null && a.exitCode !== 0);
  });
}

const REFUSAL_NAMES: Record<string, string> = {
  model: "for the allowlist",
  cap: "for the cap",
  invalid_request: "as malformed",
  body_too_large: "as too large",
};

/**
 * The message of a provider-failure discard (issue 31 item 6): what the meter saw, so an operator
 * does not chase a provider that was never called. Calls refused by the meter, by reason; calls
 * forwarded and how many failed there; how the episodes ended (a policy sidecar's exit among them).
 * The key, credits and network are named only when calls reached the provider and failed.
 */
export function providerFailureMessage(outcomes: readonly EpisodeOutcome[]): string {
  let forwarded = 0;
  let failed = 0;
  const refused = new Map<string, number>();
  for (const o of outcomes) {
    const m = o.meter;
    if (m === undefined) continue;
    forwarded += m.calls;
    failed += m.errors + m.cut;
    for (const [k, n] of Object.entries(m.refused)) refused.set(k, (refused.get(k) ?? 0) + n);
  }
  const seen = [`${forwarded} forwarded to the provider${forwarded > 0 ? ` (${failed} failed there)` : ""}`];
  for (const [k, n] of [...refused].sort((a, b) => b[1] - a[1]))
    seen.push(`${n} refused ${REFUSAL_NAMES[k] ?? `(${k})`}`);
  const ends = new Map<string, { n: number; message: string }>();
  for (const o of outcomes) {
    const code =
      o.failure?.code ?? (o.agent?.killedBy ? `killed by ${o.agent.killedBy}` : "agent exited non-zero");
    const e = ends.get(code) ?? { n: 0, message: o.failure?.message ?? "" };
    e.n++;
    ends.set(code, e);
  }
  const ended = [...ends].map(([code, e]) => `${code} ×${e.n}${e.message ? ` (${e.message})` : ""}`);
  const refusedAny = [...refused.values()].some((n) => n > 0);
  const hint =
    forwarded > 0 && failed > 0
      ? "Check the LLM key, credits and network."
      : forwarded > 0
        ? "The provider answered without a bill, or its calls never came back."
        : refusedAny
          ? "The provider was never called: the meter refused every call the policy made."
          : "The provider was never called: check the policy sidecar's route to the meter, or the policy made no call.";
  return `every episode's agent failed and no model call was billed (upstream's provider-failure rule). The meter saw ${seen.join(", ")}; episodes ended: ${ended.join("; ")}. ${hint}`;
}

/**
 * Whether the run can be scored at all; null → score it. In order (upstream checks its own
 * infrastructure first, PR #331, then the provider):
 *   validator_infra       every episode failed for the validator's own infrastructure (through
 *                         every re-run): never blame a miner for our infra
 *   llm_provider_failure  upstream's provider-failure rule (looksLikeProviderFailure)
 *   infra_incomplete      ours: any episode left unresolved after its re-runs (upstream would post
 *                         a 0 for it: a score the validator cannot vouch for)
 */
export type DiscardCode = Extract<ErrorCode, "validator_infra" | "llm_provider_failure" | "infra_incomplete">;

export function discardReason(
  finals: ReadonlyArray<{ outcome: EpisodeOutcome; disposition: Disposition }>,
  maxAttempts = MAX_ATTEMPTS,
): { code: DiscardCode; message: string } | null {
  if (finals.length === 0) return null;
  const unresolved = finals.filter((f) => f.disposition === "unresolved");
  const names = (fs: typeof finals) =>
    fs.map((f) => `${f.outcome.scenario} (${f.outcome.failure?.code ?? "truncated"})`).join(", ");
  if (finals.every((f) => f.disposition === "unresolved" && f.outcome.failure?.class === "infra"))
    return {
      code: "validator_infra",
      message: `every episode failed for the validator's own infrastructure after ${maxAttempts} attempts: ${names(finals)}`,
    };
  const outcomes = finals.map((f) => f.outcome);
  if (looksLikeProviderFailure(outcomes))
    return { code: "llm_provider_failure", message: providerFailureMessage(outcomes) };
  if (unresolved.length > 0)
    return {
      code: "infra_incomplete",
      message: `episodes failed for reasons that are not the miner's after ${maxAttempts} attempts: ${names(unresolved)}`,
    };
  return null;
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
    ...(outcome.chargedToPack ? { chargedToPack: true } : {}),
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
  code: ErrorCode;
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
