/**
 * What a verdict posts (src/evaluation/score-verdict.ts) against upstream's shapes: the scenario
 * scores and their sum as Python rounds them (validator.py `_summarize_eval`), the judge entry's
 * dollars as `round(x, 6)` and the meter summary's `by_model` (meter.py `EpisodeUsage.summary` at
 * 020768bd: sorted, rounded), and null cost and meter calls for an episode upstream's harness would
 * have raised in (its result is the exception's: `round(cost, 6) if cost is not None else None`).
 */
import { describe, expect, it } from "vitest";
import {
  buildVerdict,
  chargedToPack,
  type EpisodeOutcome,
  type Provenance,
  scenarioVerdict,
  toScoreVerdict,
} from "../../src/evaluation/index.js";

const provenance: Provenance = {
  priceTableHash: "p".repeat(64),
  imageDigests: {},
  validatorVersion: "test",
  harness: { name: "t", version: "0" },
  llm: { baseUrl: "https://api.engy.ai/v1", simulated: false, defaultModel: "qwen3.8-27b" },
  capUsd: 0.3,
  concurrency: 1,
  bench: { source: "registry", harnessImageHash: "sha256:a", benchVersion: "4.1.0", harnessName: "Hermes" },
};

function outcome(scenario: string, o: Partial<EpisodeOutcome> = {}): EpisodeOutcome {
  return {
    scenario,
    status: "scored",
    quality: 0,
    tests: 32,
    passed: 0,
    costUsd: 0,
    byModel: {},
    billedCalls: 0,
    truncatedBeforeToolCall: false,
    timings: { setupMs: 1, agentMs: 1, verifyMs: 1, totalMs: 3 },
    imageDigests: {},
    judge: { meterCalls: 0, meterRefused: 0, provenance: null, policySetupS: 1.5, policyStalled: false },
    ...o,
  };
}

const usage = (costUsd: number) => ({
  calls: 1,
  costUsd,
  promptTokens: 1,
  cachedTokens: 0,
  completionTokens: 1,
});

function post(outcomes: EpisodeOutcome[]) {
  const v = buildVerdict({
    evaluationId: "ev",
    packHash: "ab".repeat(32),
    spec: 27,
    scenarios: outcomes.map((o) => scenarioVerdict(o, 1, `ep-${o.scenario}`)),
    provenance,
    startedAt: "2026-12-05T00:00:00Z",
    finishedAt: "2026-12-05T00:10:00Z",
  });
  const body = toScoreVerdict(v);
  const results = (body.challenger.scenario_results ?? {}) as Record<
    string,
    { score: number; judge: Record<string, unknown> }
  >;
  return { body, results };
}

describe("the score a verdict posts", () => {
  it("scores and their sum as Python's round(x, 4): 1/32 → 0.0312, three of them 0.0936", () => {
    const { body, results } = post([
      outcome("a", { quality: 1 / 32 }),
      outcome("b", { quality: 1 / 32 }),
      outcome("c", { quality: 3 / 160 }),
    ]);
    expect(results.a!.score).toBe(0.0312);
    expect(results.a!.judge.overall_score).toBe(0.0312);
    expect(results.c!.score).toBe(0.0187);
    expect(body.challenger.score).toBe(0.0811); // round(0.0312 + 0.0312 + 0.0187, 4)
  });

  it("the judge's dollars: round(x, 6), by model sorted by name, as upstream's meter summary", () => {
    const { results } = post([
      outcome("a", {
        quality: 1,
        costUsd: 1 / 128, // 0.0078125 exactly: a tie, to even (half up gave 0.007813)
        byModel: { "qwen3.8-27b": usage(5 / 128), "glm-5.2": usage(3 / 128) },
        judge: { meterCalls: 2, meterRefused: 0, provenance: null, policySetupS: 1.5, policyStalled: false },
      }),
    ]);
    const j = results.a!.judge;
    expect(j.cost_usd).toBe(0.007812);
    expect(Object.keys(j.cost_by_model as object)).toEqual(["glm-5.2", "qwen3.8-27b"]);
    expect(j.cost_by_model).toEqual({ "glm-5.2": 0.023438, "qwen3.8-27b": 0.039062 }); // python3: round(x, 6)
    expect(j.meter_calls).toBe(2);
  });

  it("an episode upstream's harness would have raised in sends null cost and meter calls", () => {
    const neverHealthy = outcome("a", {
      costUsd: 0,
      judge: { meterCalls: 0, meterRefused: 0, provenance: null, policySetupS: null, policyStalled: false },
      failure: { class: "policy", code: "policy_health_timeout", message: "not healthy within 60 s" },
    });
    const followed = chargedToPack(
      outcome("b", {
        status: "failed",
        costUsd: 0.01,
        billedCalls: 3,
        judge: { meterCalls: 3, meterRefused: 0, provenance: null, policySetupS: 2, policyStalled: false },
        failure: { class: "upstream", code: "upstream_errors", message: "x" },
      }),
      { class: "policy", code: "upstream_errors", message: "follows the pack" },
    );
    const graded = outcome("c", {
      quality: 0.5,
      costUsd: 0.02,
      judge: { ...outcome("c").judge!, meterCalls: 4 },
    });
    const { body, results } = post([neverHealthy, followed, graded]);
    for (const name of ["a", "b"]) {
      expect(results[name]!.judge.cost_usd, name).toBeNull();
      expect(results[name]!.judge.meter_calls, name).toBeNull();
      expect(results[name]!.score, name).toBe(0);
    }
    expect(results.c!.judge).toMatchObject({ cost_usd: 0.02, meter_calls: 4 });
    expect(body.challenger).toMatchObject({ score: 0.5, qualified: true });
  });
});
