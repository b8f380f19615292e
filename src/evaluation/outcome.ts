/**
 * An episode's result as the evaluation counts it: the episode layer's EpisodeResult mapped to
 * the evaluation's EpisodeOutcome (quality, failure, cost by model, timings, image digests).
 */
import type { EpisodeResult } from "../episode/index.js";
import type { ModelUsage as MeterModelUsage, UsageSummary } from "../meter/index.js";
import type { EpisodeOutcome, MeterFacts, ModelUsage } from "./types.js";

/** The meter's per-model usage in the evaluation's spelling; typed both ways, so no field is left behind. */
const usageOf = (u: Record<string, MeterModelUsage>): Record<string, ModelUsage> =>
  Object.fromEntries(
    Object.entries(u).map(([m, x]): [string, ModelUsage] => [
      m,
      {
        calls: x.calls,
        costUsd: x.cost_usd,
        promptTokens: x.prompt_tokens,
        cachedTokens: x.cached_tokens,
        completionTokens: x.completion_tokens,
      },
    ]),
  );

/** Calls that reached the provider and came back whole with a bill (not an error status, not cut). */
function billedCalls(usage: UsageSummary | null): number {
  if (!usage) return 0;
  return Math.max(0, usage.calls - usage.errors - usage.cut);
}

function meterFacts(u: UsageSummary): MeterFacts {
  return {
    calls: u.calls,
    errors: u.errors,
    cut: u.cut,
    refused: { ...u.refused },
    estimatedUsd: u.estimated_usd,
    longestWaitS: u.longest_wait_s,
  };
}

export function outcomeOf(r: EpisodeResult): EpisodeOutcome {
  const images: Record<string, string> = {};
  if (r.images.sidecar) images.sidecar = r.images.sidecar.id;
  if (r.images.scenario) images[`scenario/${r.scenario}`] = r.images.scenario.id;
  return {
    scenario: r.scenario,
    status: r.status,
    quality: r.quality,
    tests: r.tests,
    passed: r.passed,
    ...(r.failure ? { failure: r.failure } : {}),
    costUsd: r.cost_usd,
    byModel: usageOf(r.by_model),
    billedCalls: billedCalls(r.usage),
    ...(r.usage ? { meter: meterFacts(r.usage) } : {}),
    truncatedBeforeToolCall: r.truncated_before_tool_call,
    agent: { exitCode: r.agent.exit_code, killedBy: r.agent.killed_by },
    timings: {
      setupMs: Math.round(r.timings.images_ms + r.timings.setup_ms),
      agentMs: Math.round(r.timings.agent_ms),
      verifyMs: Math.round(r.timings.verify_ms),
      totalMs: Math.round(r.timings.total_ms),
    },
    imageDigests: images,
    artifactsDir: r.artifacts.dir,
    judge: {
      meterCalls: r.usage?.calls ?? 0,
      meterRefused: (r.usage?.refused_cap ?? 0) + (r.usage?.refused_model ?? 0),
      provenance: r.provenance,
      policySetupS:
        r.timings.policy_setup_ms === null ? null : Math.round(r.timings.policy_setup_ms / 10) / 100,
      policyStalled: r.notes.includes("policy_stalled"),
    },
  };
}
