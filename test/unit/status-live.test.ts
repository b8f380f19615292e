import { describe, expect, it } from "vitest";
import { LiveStatus } from "../../src/status/index.js";

describe("LiveStatus", () => {
  it("a loop is stale after 3 intervals without a tick, with one interval of grace before the first", () => {
    let t = 1_000_000;
    const s = new LiveStatus(() => t);
    Object.defineProperty(s, "startedAt", { value: t });
    s.registerLoop("eval", 10_000);
    t += 39_000;
    expect(s.staleLoops()).toHaveLength(0);
    t += 2_000;
    expect(s.staleLoops().map((l) => l.name)).toEqual(["eval"]);
    s.tick("eval");
    t += 29_000;
    expect(s.staleLoops()).toHaveLength(0);
    t += 2_000;
    expect(s.staleLoops()).toHaveLength(1);
  });

  it("counts failures and keeps the last error; ok ticks move lastOkAt only", () => {
    let t = 0;
    const s = new LiveStatus(() => t);
    s.registerLoop("weights", 60_000);
    t = 5;
    s.tick("weights", { code: "SettingWeightsTooFast", message: "rate limited" });
    t = 9;
    s.tick("weights");
    const l = s.loops.get("weights")!;
    expect(l).toMatchObject({ ticks: 2, failures: 1, lastOkAt: 9, lastTickAt: 9 });
    expect(l.lastError?.code).toBe("SettingWeightsTooFast");
  });

  it("alarms count repeats and clear once", () => {
    const s = new LiveStatus();
    const seen: unknown[] = [];
    s.on("alarm", (a) => seen.push(a));
    s.raise("consensus_divergence", "0.02 apart", "error");
    s.raise("consensus_divergence", "0.03 apart", "error");
    expect(s.alarms.get("consensus_divergence")).toMatchObject({ count: 2, message: "0.03 apart" });
    s.clear("consensus_divergence");
    s.clear("consensus_divergence");
    expect(seen).toHaveLength(3);
  });

  it("tracks the running evaluation's scenarios from progress events", () => {
    const s = new LiveStatus();
    s.startEvaluation({
      evaluationId: "ev1",
      packHash: "h",
      label: "p",
      epochId: 3,
      spec: 27,
      capUsd: 0.3,
      scenarios: ["a", "b"],
    });
    s.onProgress({
      evaluationId: "ev1",
      scenario: "b",
      phase: "verifying",
      attempt: 1,
      spentUsd: 0.1,
      capUsd: 0.3,
      elapsedMs: 5,
    });
    expect(s.snapshot().evaluation?.scenarios.b?.phase).toBe("verifying");
    expect(s.snapshot().evaluation?.scenarios.a?.phase).toBe("queued");
    s.endEvaluation();
    expect(s.snapshot().evaluation).toBeNull();
  });
});
