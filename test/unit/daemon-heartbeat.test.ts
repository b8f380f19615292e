/** The heartbeat's fields, upstream's tests/test_validator_modes.py TestHeartbeatFields case for case. */
import { describe, expect, it } from "vitest";
import { heartbeatInfo } from "../../src/daemon/index.js";
import { MARK } from "../../src/store/index.js";

const llm = { defaultModel: "qwen3.8-27b", baseUrl: "https://api.engy.ai/v1" };
function marks(m: Record<string, { at: number; detail?: string | null }>) {
  return {
    get: (name: string) => (m[name] ? { name, at: m[name].at, detail: m[name].detail ?? null } : undefined),
  };
}

describe("heartbeatInfo", () => {
  it("weight-only reports last_set_weights_at only, even with eval marks left from an eval-mode run", () => {
    const m = marks({
      [MARK.lastSetWeightsAt]: { at: 1_234_000 },
      [MARK.lastEvalAt]: { at: 99_000, detail: "sidecar=sha256:aa" },
    });
    expect(heartbeatInfo({ evaluating: false, marks: m, llm })).toEqual({ last_set_weights_at: 1234 });
  });

  it("weight-only before any weights: nothing but the signed envelope (None is left out)", () => {
    expect(heartbeatInfo({ evaluating: false, marks: marks({}), llm })).toEqual({});
  });

  it("an evaluating validator adds its evaluation telemetry", () => {
    const m = marks({
      [MARK.lastSetWeightsAt]: { at: 1_234_000 },
      [MARK.lastEvalAt]: { at: 5_678_999, detail: "sidecar=sha256:aa" },
    });
    expect(heartbeatInfo({ evaluating: true, marks: m, llm })).toEqual({
      last_set_weights_at: 1234,
      last_eval_at: 5678,
      harness_image_hash: "sidecar=sha256:aa",
      llm_model: "qwen3.8-27b",
      llm_base_url: "https://api.engy.ai/v1",
    });
  });
});
