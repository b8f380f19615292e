import { describe, expect, it } from "vitest";
import { parsePolicyLogLine, sidecarBuildContext, summarisePolicyLog } from "../../src/policy/index.js";

// The reference runtime's events, as its log() writes them (json.dumps defaults, ts in Unix seconds).
const START =
  '{"event": "start", "policy": "pin:glm-5.3-flash", "port": 8800, "upstream": "http://meter:8790/v1", "ts": 1790000000.123}';
const turn = (over: Record<string, unknown> = {}) =>
  JSON.stringify({
    event: "turn",
    session: "s0123456789ab",
    turn: 1,
    model: "kimi-k3",
    status: 200,
    finish: "tool_calls",
    usage: { prompt_tokens: 20, completion_tokens: 3, total_tokens: 23 },
    s: 1.25,
    remaining_usd: 0.29,
    ts: 1790000001.5,
    ...over,
  });

describe("policy log", () => {
  it("parses upstream's start, turn, policy_error and advisers events and ignores anything else", () => {
    expect(parsePolicyLogLine(START)).toMatchObject({
      event: "start",
      port: 8800,
      policy: "pin:glm-5.3-flash",
    });
    expect(parsePolicyLogLine(turn())).toMatchObject({ event: "turn", model: "kimi-k3", status: 200 });
    expect(
      parsePolicyLogLine(
        '{"event": "turn", "session": "pre0a1b", "turn": 2, "model": "auto", "rendered": true, "s": 0.0, "ts": 1.0}',
      ),
    ).toMatchObject({ rendered: true });
    expect(
      parsePolicyLogLine(
        '{"event": "policy_error", "session": "s1", "turn": 3, "error": "ZeroDivisionError()", "ts": 2.0}',
      ),
    ).toMatchObject({ event: "policy_error", error: "ZeroDivisionError()" });
    expect(
      parsePolicyLogLine(
        '{"event": "advisers", "n": 2, "s": [1.2, 0.4, 0.0], "status": [200, 200, 402], "ts": 3.0}',
      ),
    ).toMatchObject({ n: 2, status: [200, 200, 402] });
    expect(parsePolicyLogLine("plain print from a raw policy")).toBeUndefined();
    expect(parsePolicyLogLine('{"event":"turn"}')).toBeUndefined();
    expect(parsePolicyLogLine('{"raw_turn": true}')).toBeUndefined();
    expect(parsePolicyLogLine(turn({ ts: "yesterday" }))).toBeUndefined();
    // A turn whose upstream call was refused, and a model the policy left unset; extra fields are kept.
    expect(
      parsePolicyLogLine(turn({ status: 402, finish: null, usage: null, model: null, x: 1 })),
    ).toMatchObject({
      status: 402,
      x: 1,
    });
  });

  it("summarises turns by outcome and model, tokens, policy errors and adviser notes", () => {
    const s = summarisePolicyLog([
      START,
      turn(),
      "noise",
      '{"event": "policy_error", "session": "s1", "turn": 2, "error": "KeyError()", "ts": 2.0}',
      '{"event": "advisers", "n": 2, "s": [1.2, 0.4, 0.0], "status": [200, 200, 0], "ts": 3.0}',
      turn({ turn: 3, model: "glm-5.3-flash", usage: { prompt_tokens: 40, completion_tokens: 7 } }),
      turn({ turn: 4, status: 402, finish: null, usage: null }),
      '{"event": "turn", "session": "s1", "turn": 5, "model": "auto", "rendered": true, "s": 0.1, "ts": 5.0}',
    ]);
    expect(s).toEqual({
      turns: 4,
      statuses: { "200": 2, "402": 1, rendered: 1 },
      turnsByModel: { "kimi-k3": 2, "glm-5.3-flash": 1, auto: 1 },
      promptTokens: 60,
      completionTokens: 10,
      policyErrors: 1,
      adviserNotes: 2,
      adviserCalls: 3,
    });
  });
});

describe("sidecar build context", () => {
  it("holds the Dockerfile and the SDK file, nothing else", () => {
    const ctx = sidecarBuildContext();
    expect(ctx.dockerfile).toBe("docker/images/sidecar/Dockerfile");
    expect(ctx.files).toEqual(["docker/images/sidecar/Dockerfile", "sidecar/sdk/trajrl_policy.py"]);
  });
});
