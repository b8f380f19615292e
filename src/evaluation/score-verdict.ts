/**
 * The verdict as the platform receives it (POST /api/v2/epoch/{id}/score), in upstream's shape
 * (validator.py `_summarize_eval` + `_harness_metadata`, miner_eval.py's judge entries):
 * `challenger` = `{score, qualified, scenario_results}` where each scenario is
 * `{score, weight: 1.0, qualified, judge}`, or `{score: 0, qualified: false, rejected: true,
 * rejection_detail: <bare code>}`; then `spec_number`, `llm_base_url`, `llm_model`, `judge_model`
 * and the bench's digests and identity.
 */
import type { ScoreVerdict } from "../platform/index.js";
import { pyRound6, round4 } from "../precision.js";
import { LOCKED_JUDGE_MODEL, llmModelLabel } from "../subnet.js";
import type { ScenarioVerdict, Verdict } from "./types.js";

export const HARNESS_LABEL = "trajrl-bench";

/**
 * Whether upstream's harness would have raised in this episode — its sidecar never got healthy
 * (`_start_policy_sidecar` raises), or an upstream/infra failure we charged to the pack after it
 * followed it through every re-run (upstream's first attempt raised). Upstream's episode result is
 * then the exception's: no cost and no meter summary, sent as null.
 */
function raised(s: ScenarioVerdict): boolean {
  return s.chargedToPack === true || (s.judge !== undefined && s.judge.policySetupS === null);
}

function judgeOf(s: ScenarioVerdict, v: Verdict): Record<string, unknown> {
  const j = s.judge;
  const threw = raised(s);
  return {
    overall_score: round4(s.quality),
    qualification_gate: s.quality > 0,
    // Upstream's `round(cost, 6) if cost is not None else None` (miner_eval.py judge entries).
    cost_usd: threw ? null : pyRound6(s.costUsd),
    harness: HARNESS_LABEL,
    sandbox_version: v.provenance.bench?.benchVersion ?? "unknown",
    // The meter summary's `by_model` (meter.py `EpisodeUsage.summary` at 020768bd): sorted, round(·, 6).
    cost_by_model: Object.fromEntries(
      Object.entries(s.byModel)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([m, u]) => [m, pyRound6(u.costUsd)]),
    ),
    meter_calls: threw ? null : (j?.meterCalls ?? null),
    meter_refused: j?.meterRefused ?? 0,
    provenance: j?.provenance ?? null,
    policy_setup_s: j?.policySetupS ?? null,
    policy_stalled: j?.policyStalled ?? false,
    policy_scan: v.provenance.policyScan ?? null,
  };
}

export function toScoreVerdict(v: Verdict): ScoreVerdict {
  const bench = v.provenance.bench;
  const meta = {
    // The locked endpoint on the subnet (src/config.ts); a local run's override or the simulator is named as such.
    llm_base_url: v.provenance.llm.baseUrl,
    // The agent's model is `auto`: the policy behind the sidecar decides what answers.
    llm_model: llmModelLabel(v.provenance.llm.defaultModel),
    judge_model: LOCKED_JUDGE_MODEL,
    ...(bench?.benchImageHash ? { bench_image_hash: bench.benchImageHash } : {}),
    ...(bench?.harnessImageHash ? { harness_image_hash: bench.harnessImageHash } : {}),
    ...(bench?.benchVersion ? { bench_version: bench.benchVersion } : {}),
    ...(bench?.harnessName ? { harness_name: bench.harnessName } : {}),
    ...(bench?.harnessVersion ? { harness_version: bench.harnessVersion } : {}),
  };
  if (v.rejected)
    return {
      spec_number: v.spec,
      // Upstream sends its bare rejection codes; the message stays in our logs and database.
      challenger: { score: 0, qualified: false, rejected: true, rejection_detail: v.rejection?.code ?? null },
      ...meta,
    };
  const scenario_results: Record<string, unknown> = {};
  for (const s of v.scenarios)
    scenario_results[s.scenario] = {
      score: round4(s.quality),
      weight: 1.0,
      qualified: s.quality > 0,
      judge: judgeOf(s, v),
    };
  return {
    spec_number: v.spec,
    challenger: { score: v.score, qualified: v.qualified, scenario_results },
    ...meta,
  };
}
