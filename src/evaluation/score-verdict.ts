/**
 * The verdict as the platform wants it posted (POST /api/v2/validators/challenge-score): the
 * `challenger` block plus provenance fields.
 */
import type { ScoreVerdict } from "../platform/index.js";
import type { Verdict } from "./types.js";

/** The verdict as the platform wants it posted: the `challenger` block plus provenance fields. */
export function toScoreVerdict(v: Verdict): ScoreVerdict {
  const scenario_results: Record<string, unknown> = {};
  for (const s of v.scenarios) {
    scenario_results[s.scenario] = {
      overall_score: s.quality,
      qualification_gate: s.quality > 0,
      tests: s.tests,
      passed: s.passed,
      cost_usd: Math.round(s.costUsd * 1e6) / 1e6,
      by_model: Object.fromEntries(
        Object.entries(s.byModel).map(([m, u]) => [m, { calls: u.calls, cost_usd: u.costUsd }]),
      ),
      attempts: s.attempts,
      ...(s.failure ? { failure: `${s.failure.class}:${s.failure.code}` } : {}),
      harness: v.provenance.harness.name,
    };
  }
  const digests = Object.entries(v.provenance.imageDigests)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, d]) => `${k}=${d}`)
    .join(",");
  return {
    spec_number: v.spec,
    challenger: {
      score: v.score,
      qualified: v.qualified,
      ...(v.rejected
        ? { rejected: true, rejection_detail: `${v.rejection?.code}: ${v.rejection?.message}` }
        : { scenario_results }),
    },
    llm_base_url: v.provenance.llm.baseUrl,
    // The agent's model name: the policy behind the sidecar decides what answers.
    llm_model: "auto",
    ...(digests ? { harness_image_hash: digests } : {}),
    harness_name: v.provenance.harness.name,
    harness_version: v.provenance.harness.version,
  };
}
