import { describe, expect, it } from "vitest";
import { parsePolicyLogLine, sidecarBuildContext, summarisePolicyLog } from "../../src/policy/index.js";

const turn = (over: Record<string, unknown> = {}) =>
  JSON.stringify({
    event: "turn",
    ts: "2026-01-01T00:00:00.000Z",
    session: "0123456789abcdef",
    sid: 1,
    turn: 1,
    model: "kimi-k3",
    models: ["glm-5.3-flash", "kimi-k3"],
    calls: [
      { model: "glm-5.3-flash", kind: "call", status: 200, ms: 5, prompt_tokens: 10, completion_tokens: 2 },
      { model: "kimi-k3", kind: "upstream", status: 200, ms: 9, prompt_tokens: 20, completion_tokens: 3 },
    ],
    prompt_tokens: 30,
    completion_tokens: 5,
    latency_ms: 14.2,
    stream: true,
    status: "ok",
    http_status: 200,
    remaining_usd: 0.29,
    ...over,
  });

describe("policy log", () => {
  it("parses turn and listening events and ignores anything else", () => {
    expect(parsePolicyLogLine(turn())).toMatchObject({ event: "turn", model: "kimi-k3", prompt_tokens: 30 });
    expect(
      parsePolicyLogLine(
        '{"event":"listening","ts":"t","policy":"pin","host":"0.0.0.0","port":8800,"upstream":"http://meter:8790/v1","default_model":"m"}',
      ),
    ).toMatchObject({ event: "listening", port: 8800 });
    expect(parsePolicyLogLine("plain print from a raw policy")).toBeUndefined();
    expect(parsePolicyLogLine('{"event":"turn"}')).toBeUndefined();
    expect(parsePolicyLogLine('{"raw_turn": true}')).toBeUndefined();
    expect(parsePolicyLogLine(turn({ status: "exploded" }))).toBeUndefined();
    // A bad request has no session yet; unknown extra fields are kept.
    expect(
      parsePolicyLogLine(
        '{"event":"turn","ts":"t","status":"bad_request","http_status":400,"latency_ms":0.3,"x":1}',
      ),
    ).toMatchObject({ status: "bad_request", x: 1 });
  });

  it("summarises turns, statuses, calls per model and tokens", () => {
    const s = summarisePolicyLog([
      turn(),
      "noise",
      turn({
        status: "policy_error",
        http_status: 500,
        calls: [],
        prompt_tokens: null,
        completion_tokens: null,
      }),
      turn({
        status: "upstream_error",
        http_status: 402,
        calls: [{ model: "kimi-k3", kind: "upstream", status: 402, ms: 1 }],
      }),
    ]);
    expect(s).toEqual({
      turns: 3,
      statuses: { ok: 1, policy_error: 1, upstream_error: 1 },
      callsByModel: { "glm-5.3-flash": 1, "kimi-k3": 2 },
      promptTokens: 60,
      completionTokens: 10,
      policyErrors: 1,
    });
  });
});

describe("sidecar build context", () => {
  it("holds the Dockerfile and the runtime, not tests or caches", () => {
    const ctx = sidecarBuildContext();
    expect(ctx.dockerfile).toBe("docker/images/sidecar/Dockerfile");
    expect(ctx.files).toContain("docker/images/sidecar/Dockerfile");
    expect(ctx.files).toContain("sidecar/launch.py");
    expect(ctx.files).toContain("sidecar/trajrl_policy/runtime.py");
    expect(
      ctx.files.some((f) => f.includes("tests/") || f.includes("__pycache__") || f.endsWith(".pyc")),
    ).toBe(false);
    expect([...ctx.files].sort()).toEqual(ctx.files);
  });
});
