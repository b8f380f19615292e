import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { LiveStatus } from "../../src/status/index.js";
import { openDb } from "../../src/store/index.js";
import { ValidatorMetrics } from "../../src/web/metrics.js";
import { StatusReader } from "../../src/web/snapshot.js";
import { Tally } from "../../src/web/tally.js";
import { NETWORK, parsePromText, promValue, seedLive, seedStore } from "../helpers/web.js";

const NOW = Date.parse("2026-06-01T12:00:00Z");

describe("Tally", () => {
  it("counts meter calls, spend, tokens, clamps and refusals by model", () => {
    const t = new Tally();
    const call = {
      episodeId: "e",
      status: 200,
      usd: 0.01,
      clamped: false,
      promptTokens: 100,
      completionTokens: 10,
    };
    t.meterCall({ ...call, model: "a" });
    t.meterCall({ ...call, model: "a", clamped: true, usd: 0.02 });
    t.meterCall({
      ...call,
      model: "a",
      status: 402,
      refused: "cap",
      usd: 0,
      promptTokens: 0,
      completionTokens: 0,
    });
    t.meterCall({ ...call, model: "b", status: 400, refused: "allowlist", usd: 0 });
    t.meterCall({ ...call, model: "b", status: 502 });
    expect(t.snapshot().meter).toEqual({
      a: {
        calls: 3,
        refusals: { cap: 1, allowlist: 0 },
        clamps: 1,
        errors: 1,
        usd: 0.03,
        promptTokens: 200,
        completionTokens: 20,
      },
      b: {
        calls: 2,
        refusals: { cap: 0, allowlist: 1 },
        clamps: 0,
        errors: 2,
        usd: 0.01,
        promptTokens: 200,
        completionTokens: 20,
      },
    });
  });

  it("never lets a bad amount make a counter go down or become NaN", () => {
    const t = new Tally();
    const call = {
      episodeId: "e",
      model: "a",
      status: 200,
      clamped: false,
      promptTokens: -5,
      completionTokens: 1,
    };
    t.meterCall({ ...call, usd: 0.5 });
    t.meterCall({ ...call, usd: -0.2 });
    t.meterCall({ ...call, usd: Number.NaN });
    const a = t.snapshot().meter.a!;
    expect(a.usd).toBe(0.5);
    expect(a.promptTokens).toBe(0);
  });

  it("counts episodes by outcome and failure class", () => {
    const t = new Tally();
    t.episodeEnd({ scenario: "x", outcome: "scored" });
    t.episodeEnd({ scenario: "y", outcome: "scored" });
    t.episodeEnd({ scenario: "z", outcome: "failed", failureClass: "policy", failureCode: "policy_crashed" });
    t.episodeEnd({ scenario: "z", outcome: "retry", failureClass: "upstream" });
    expect(t.snapshot().episodes).toEqual([
      { outcome: "failed", failureClass: "policy", count: 1 },
      { outcome: "retry", failureClass: "upstream", count: 1 },
      { outcome: "scored", failureClass: "none", count: 2 },
    ]);
  });

  it("counts finished set_weights attempts once each, by result", () => {
    const t = new Tally();
    const w = { at: 1, uids: [1], weights: [1], reason: "winner" };
    t.weights({ ...w, outcome: "pending" });
    t.weights({ ...w, outcome: "included" });
    t.weights({ ...w, outcome: "pending" });
    t.weights({ ...w, outcome: "failed", errorName: "SettingWeightsTooFast" });
    t.weights({ ...w, outcome: "included" });
    expect(t.snapshot().weights).toEqual({ attempts: 3, results: { included: 2, failed: 1 } });
  });

  it("follows a LiveStatus until detached", () => {
    const live = new LiveStatus();
    const t = new Tally();
    const detach = t.attach(live);
    live.episodeEnd({ scenario: "x", outcome: "scored" });
    detach();
    live.episodeEnd({ scenario: "x", outcome: "scored" });
    expect(t.snapshot().episodes).toEqual([{ outcome: "scored", failureClass: "none", count: 1 }]);
  });
});

function seeded() {
  const db = openDb(":memory:");
  seedStore(db, NOW);
  const live = new LiveStatus(() => NOW);
  const tally = new Tally();
  tally.attach(live);
  seedLive(live);
  return { db, live, tally, reader: new StatusReader(db, NETWORK) };
}

describe("/metrics rendering", () => {
  it("is valid Prometheus text with the validator's series and the default process metrics", async () => {
    const { live, tally, reader } = seeded();
    const metrics = new ValidatorMetrics();
    const text = await metrics.render(
      reader.snapshot({ config: loadConfig({}), live, counters: tally.snapshot(), now: NOW }),
    );
    const f = parsePromText(text);
    expect(f.get("process_cpu_seconds_total")?.type).toBe("counter");
    expect(f.get("nodejs_heap_size_used_bytes")?.type).toBe("gauge");
    expect(f.get("trajrl_meter_calls_total")?.type).toBe("counter");

    expect(promValue(f, "trajrl_meter_calls_total", { model: "qwen3.8-27b" })).toBe(2);
    expect(promValue(f, "trajrl_meter_spend_usd_total", { model: "qwen3.8-27b" })).toBeCloseTo(0.01, 12);
    expect(promValue(f, "trajrl_meter_clamps_total", { model: "qwen3.8-27b" })).toBe(1);
    expect(promValue(f, "trajrl_meter_refusals_total", { model: "glm-5.1", reason: "cap" })).toBe(1);
    expect(promValue(f, "trajrl_meter_refusals_total", { model: "not-a-model", reason: "allowlist" })).toBe(
      1,
    );
    expect(promValue(f, "trajrl_meter_tokens_total", { model: "qwen3.8-27b", kind: "prompt" })).toBe(2000);
    expect(promValue(f, "trajrl_episodes_total", { outcome: "scored", failure_class: "none" })).toBe(1);
    expect(promValue(f, "trajrl_episodes_total", { outcome: "retry", failure_class: "upstream" })).toBe(1);
    expect(promValue(f, "trajrl_set_weights_attempts_total")).toBe(2);
    expect(promValue(f, "trajrl_set_weights_results_total", { outcome: "included" })).toBe(1);
    expect(promValue(f, "trajrl_set_weights_results_total", { outcome: "failed" })).toBe(1);
    expect(promValue(f, "trajrl_loop_last_success_timestamp_seconds", { loop: "eval" })).toBe(NOW / 1000);
    // The weights loop has only failed so far: no success time, but a tick time.
    expect(promValue(f, "trajrl_loop_last_success_timestamp_seconds", { loop: "weights" })).toBeUndefined();
    expect(promValue(f, "trajrl_loop_last_tick_timestamp_seconds", { loop: "weights" })).toBe(NOW / 1000);
    expect(promValue(f, "trajrl_loop_stale", { loop: "eval" })).toBe(0);
    expect(promValue(f, "trajrl_current_epoch_id")).toBe(42);
    expect(promValue(f, "trajrl_evaluation_in_progress")).toBe(1);
    expect(promValue(f, "trajrl_evaluation_scenarios", { phase: "running" })).toBe(1);
    expect(promValue(f, "trajrl_evaluation_spent_usd")).toBeCloseTo(0.311, 12);
    expect(promValue(f, "trajrl_alarms_active", { severity: "warn" })).toBe(1);
    expect(promValue(f, "trajrl_alarm_active", { code: "consensus_divergence", severity: "warn" })).toBe(1);
    expect(promValue(f, "trajrl_verdict_outbox_entries", { state: "pending" })).toBe(1);
    expect(promValue(f, "trajrl_winner_cache_age_seconds", { fresh: "true" })).toBe(120);
  });

  it("says 'no epoch' and 'idle' explicitly, and drops series that no longer apply", async () => {
    const { live, tally, reader } = seeded();
    const metrics = new ValidatorMetrics({ defaultMetrics: false });
    const config = loadConfig({});
    await metrics.render(reader.snapshot({ config, live, counters: tally.snapshot(), now: NOW }));
    live.setEpoch(null);
    live.endEvaluation();
    live.clear("consensus_divergence");
    const f = parsePromText(
      await metrics.render(reader.snapshot({ config, live, counters: tally.snapshot(), now: NOW })),
    );
    expect(promValue(f, "trajrl_current_epoch_id")).toBe(-1);
    expect(promValue(f, "trajrl_evaluation_in_progress")).toBe(0);
    expect(promValue(f, "trajrl_evaluation_scenarios", { phase: "running" })).toBeUndefined();
    expect(
      promValue(f, "trajrl_alarm_active", { code: "consensus_divergence", severity: "warn" }),
    ).toBeUndefined();
    expect(promValue(f, "trajrl_alarms_active", { severity: "warn" })).toBe(0);
    expect(f.get("process_cpu_seconds_total")).toBeUndefined();
  });

  it("escapes label values (a model name is outside input)", async () => {
    const live = new LiveStatus(() => NOW);
    const tally = new Tally();
    tally.attach(live);
    const evil = 'm"od\\el\nx';
    live.meterCall({
      episodeId: "e",
      model: evil,
      status: 400,
      usd: 0,
      clamped: false,
      refused: "allowlist",
      promptTokens: 0,
      completionTokens: 0,
    });
    const db = openDb(":memory:");
    const text = await new ValidatorMetrics({ defaultMetrics: false }).render(
      new StatusReader(db, NETWORK).snapshot({
        config: loadConfig({}),
        live,
        counters: tally.snapshot(),
        now: NOW,
      }),
    );
    expect(text).toContain('model="m\\"od\\\\el\\nx"');
    expect(promValue(parsePromText(text), "trajrl_meter_calls_total", { model: evil })).toBe(1);
  });
});

describe("the strict Prometheus text reader (the check the tests rely on)", () => {
  it("rejects what Prometheus would reject", () => {
    expect(() => parsePromText("# TYPE a counter\na 1")).toThrow(/newline/);
    expect(() => parsePromText("a 1\n")).toThrow(/without a TYPE/);
    expect(() => parsePromText('# TYPE a gauge\na{x="1"} one\n')).toThrow(/bad value/);
    expect(() => parsePromText('# TYPE a gauge\na{x="1",x="2"} 1\n')).toThrow(/duplicate label/);
    expect(() => parsePromText("# TYPE a gauge\na 1\na 2\n")).toThrow(/duplicate series/);
    expect(() => parsePromText("# TYPE a gauge\n# TYPE a counter\n")).toThrow(/second TYPE/);
    expect(() => parsePromText('# TYPE a gauge\na{x="\\t"} 1\n')).toThrow(/bad labels/);
    expect(() => parsePromText("# TYPE 1a gauge\n")).toThrow(/bad metric name/);
    expect(() => parsePromText("# TYPE h histogram\nh_bucket 1\n")).toThrow(/without le/);
    const ok = parsePromText(
      '# HELP a x\n# TYPE a gauge\na{x="q\\"\\\\"} +Inf\n# TYPE h histogram\nh_bucket{le="1"} 2\nh_sum 3\nh_count 2\n',
    );
    expect(promValue(ok, "a", { x: 'q"\\' })).toBe(Number.POSITIVE_INFINITY);
    expect(promValue(ok, "h_count")).toBe(2);
  });
});
