/** The heartbeat's fields, upstream's tests/test_validator_modes.py TestHeartbeatFields case for case. */
import { describe, expect, it } from "vitest";
import { clipChars, healthIssueOf } from "../../src/daemon/decide.js";
import { BENCH_MARK, benchTelemetryOf, HealthIssue } from "../../src/daemon/heartbeat.js";
import { heartbeatInfo } from "../../src/daemon/index.js";
import { heartbeatInfoSchema } from "../../src/platform/schemas.js";
import { MARK } from "../../src/store/index.js";

const llm = { defaultModel: "qwen3.8-27b", baseUrl: "https://api.engy.ai/v1" };
function marks(m: Record<string, { at: number; detail?: string | null }>) {
  return {
    get: (name: string) => (m[name] ? { name, at: m[name].at, detail: m[name].detail ?? null } : undefined),
  };
}

describe("heartbeatInfo", () => {
  it("weight-only omits the eval telemetry, even with eval marks and a health issue left over", () => {
    const m = marks({
      [MARK.lastSetWeightsAt]: { at: 1_234_000 },
      [MARK.lastEvalAt]: { at: 99_000 },
      [BENCH_MARK]: { at: 99_000, detail: '{"bench_image_hash":"sha256:bench"}' },
    });
    expect(heartbeatInfo({ evaluating: false, marks: m, llm, healthIssue: "left over" })).toEqual({
      last_set_weights_at: 1234,
    });
  });

  it("weight-only before any weights: nothing but the signed envelope (None is left out)", () => {
    expect(heartbeatInfo({ evaluating: false, marks: marks({}), llm })).toEqual({});
  });

  it("eval enabled reports the harness and the model, and the health issue", () => {
    const m = marks({
      [MARK.lastSetWeightsAt]: { at: 1_234_000 },
      [MARK.lastEvalAt]: { at: 5_678_999 },
      [BENCH_MARK]: {
        at: 5_000_000,
        detail: benchTelemetryOf({
          bench_image_hash: "sha256:bench",
          harness_image_hash: "sha256:scenario",
          bench_version: "4.0.23",
        }),
      },
    });
    const info = heartbeatInfo({ evaluating: true, marks: m, llm, healthIssue: "infra: broken" });
    expect(info).toEqual({
      last_set_weights_at: 1234,
      last_eval_at: 5678,
      bench_image_hash: "sha256:bench",
      harness_image_hash: "sha256:scenario",
      bench_version: "4.0.23",
      llm_model: "policy:auto (default qwen3.8-27b)",
      llm_base_url: "https://api.engy.ai/v1",
      health_issue: "infra: broken",
    });
    expect(heartbeatInfoSchema.parse(info)).toEqual(info);
  });

  it("evaluating before any bench was prepared: the digests are 'unknown', as upstream's harness before its first pull; healthy → no health_issue", () => {
    expect(heartbeatInfo({ evaluating: true, marks: marks({}), llm, healthIssue: null })).toEqual({
      bench_image_hash: "unknown",
      harness_image_hash: "unknown",
      bench_version: "unknown",
      llm_model: "policy:auto (default qwen3.8-27b)",
      llm_base_url: "https://api.engy.ai/v1",
    });
  });
});

describe("health_issue", () => {
  it("a provider failure reads as upstream's line; other discards name their code; never over 256 characters", () => {
    expect(healthIssueOf(42, "llm_provider_failure", "whatever")).toBe(
      "infra: every scenario failed with no billed model call (epoch 42); check the Engy key, credits, network, and the policy sidecar's route to the meter",
    );
    const long = healthIssueOf(
      7,
      "infra_incomplete",
      `episodes failed: ${"x (network_create_failed), ".repeat(40)}`,
    );
    expect(long.startsWith("infra: evaluation discarded (infra_incomplete, epoch 7): episodes failed")).toBe(
      true,
    );
    expect(Array.from(long)).toHaveLength(256);
    // Characters, not UTF-16 units: an astral character is never cut in half.
    const astral = clipChars("😀".repeat(300), 256);
    expect(Array.from(astral)).toHaveLength(256);
    expect(astral).toBe("😀".repeat(256));
    expect(heartbeatInfoSchema.safeParse({ health_issue: "😀".repeat(256) }).success).toBe(true);
    expect(heartbeatInfoSchema.safeParse({ health_issue: "x".repeat(257) }).success).toBe(false);
  });

  it("set by a discard, cleared by a posted score", () => {
    const h = new HealthIssue();
    expect(h.value).toBeNull();
    h.set("y".repeat(1000));
    expect(h.value).toHaveLength(256);
    h.clear();
    expect(h.value).toBeNull();
  });
});
