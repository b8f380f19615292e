import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { harnessMetadataOf, withLastHarness } from "../../src/daemon/decide.js";
import {
  discardRetryDelayMs,
  type EpochFacts,
  evalIdOf,
  ProgressTracker,
  packFetchRejection,
  planEpoch,
  progressStateOf,
} from "../../src/daemon/index.js";
import type { EvaluationEvent } from "../../src/evaluation/types.js";
import {
  type EpochCurrent,
  epochCurrentSchema,
  type ScoreVerdict,
  scoreVerdictSchema,
} from "../../src/platform/index.js";

const HASH = "ab".repeat(32);

function current(over: Record<string, unknown> = {}, top: Record<string, unknown> = {}): EpochCurrent {
  return epochCurrentSchema.parse({
    success: true,
    epoch: {
      challenge_epoch_id: 42,
      challenger_hotkey: "5Challenger",
      challenger_uid: 7,
      challenger_pack_hash: HASH,
      challenger_pack_url: "http://127.0.0.1:1/p.json",
      start_block: 1000,
      end_block: 1150,
      epoch_length_blocks: 150,
      status: "in_progress",
      created_at: "2026-01-01T00:00:00Z",
      spec_number: 27,
      ...over,
    },
    winner: null,
    current_block: 1010,
    elapsed_blocks: 10,
    remaining_blocks: 140,
    ...top,
  });
}

const facts = (o: Partial<EpochFacts> = {}): EpochFacts => ({
  isScored: () => false,
  hasResumable: () => false,
  retryNotBefore: () => undefined,
  nowMs: 1_000_000,
  ...o,
});

describe("planEpoch", () => {
  it("evaluates a young, unscored epoch with a pack URL, carrying what the verdict and progress need", () => {
    expect(planEpoch(current(), facts())).toEqual({
      action: "evaluate",
      epochId: 42,
      packUrl: "http://127.0.0.1:1/p.json",
      packHash: HASH,
      specNumber: 27,
      challengerHotkey: "5Challenger",
      challengerUid: 7,
      resume: false,
    });
  });

  it("applies the platform gates: no epoch, already scored, past 50 %, no pack URL, not in progress", () => {
    expect(planEpoch(null, facts())).toEqual({ action: "skip", epochId: null, reason: "no_epoch" });
    expect(planEpoch(current(), facts({ isScored: (id) => id === 42 }))).toMatchObject({
      action: "skip",
      reason: "already_scored",
    });
    expect(planEpoch(current({}, { elapsed_blocks: 76 }), facts())).toMatchObject({ reason: "too_late" });
    expect(planEpoch(current({}, { elapsed_blocks: 75 }), facts())).toMatchObject({ action: "evaluate" });
    expect(planEpoch(current({ challenger_pack_url: null }), facts())).toMatchObject({
      reason: "no_pack_url",
    });
    expect(planEpoch(current({ status: "finalized" }), facts())).toMatchObject({ reason: "not_in_progress" });
  });

  it("resumes an interrupted evaluation of this epoch and pack even past the start gate", () => {
    const late = current({}, { elapsed_blocks: 120 });
    const resumable = (id: number, hash: string) => id === 42 && hash === HASH;
    expect(planEpoch(late, facts({ hasResumable: resumable }))).toMatchObject({
      action: "evaluate",
      resume: true,
    });
    // Not for another pack, and never for an epoch that is already scored.
    expect(planEpoch(late, facts({ hasResumable: (id, h) => id === 42 && h !== HASH }))).toMatchObject({
      reason: "too_late",
    });
    expect(planEpoch(late, facts({ hasResumable: resumable, isScored: () => true }))).toMatchObject({
      reason: "already_scored",
    });
    expect(planEpoch(current(), facts({ hasResumable: resumable }))).toMatchObject({ resume: true });
  });

  it("waits out the back-off of a discarded run, then tries again", () => {
    const f = facts({ retryNotBefore: (id) => (id === 42 ? 2_000_000 : undefined) });
    expect(planEpoch(current(), f)).toMatchObject({ action: "skip", epochId: 42, reason: "retry_backoff" });
    expect(planEpoch(current(), { ...f, nowMs: 2_000_000 })).toMatchObject({ action: "evaluate" });
  });

  it("sends -1 as the miner uid when the server gives none", () => {
    expect(planEpoch(current({ challenger_uid: null }), facts())).toMatchObject({ challengerUid: -1 });
  });

  it("backs off discarded runs 1, 2, 4, 8 min up to 10 min", () => {
    expect([1, 2, 3, 4, 5, 50].map(discardRetryDelayMs)).toEqual([
      60_000, 120_000, 240_000, 480_000, 600_000, 600_000,
    ]);
  });
});

function ev(
  scenario: string,
  phase: EvaluationEvent["phase"],
  extra: Partial<EvaluationEvent> = {},
): EvaluationEvent {
  return {
    evaluationId: "ev_1",
    scenario,
    phase,
    attempt: 1,
    spentUsd: 0,
    capUsd: 0.3,
    elapsedMs: 0,
    ...extra,
  };
}

describe("scenario progress", () => {
  it("maps phases to the platform's three states", () => {
    expect(progressStateOf("running")).toBe("running");
    expect(progressStateOf("verifying")).toBe("verifying");
    expect(progressStateOf("done")).toBe("complete");
    expect(progressStateOf("failed")).toBe("complete");
    for (const p of ["queued", "starting", "retrying"] as const) expect(progressStateOf(p)).toBeNull();
  });

  it("stamps upstream's fields: the resolved spec and the bench's harness once known, the locked model label", () => {
    const t = new ProgressTracker({
      minerHotkey: "5Miner",
      minerUid: -1,
      llmModel: "policy:auto (default qwen3.8-27b)",
    });
    expect(t.next(ev("a", "queued"))).toBeNull();
    t.update({ specNumber: 27, harnessName: "hermes-agent", harnessVersion: "0.9" });
    expect(t.next(ev("a", "running"))).toEqual({
      miner_hotkey: "5Miner",
      miner_uid: -1,
      scenario_name: "a",
      scenario_index: 0,
      total_scenarios: 1,
      state: "running",
      llm_model: "policy:auto (default qwen3.8-27b)",
      harness_name: "hermes-agent",
      harness_version: "0.9",
      spec_number: 27,
    });
    const failed = t.next(
      ev("a", "failed", { failure: { class: "policy", code: "policy_health_timeout", message: "x" } }),
    );
    expect(failed).toMatchObject({ state: "complete", quality: 0, timed_out: false });
  });

  it("posts each state once per scenario, indexed in announced order, with the final quality and cost", () => {
    const t = new ProgressTracker({
      minerHotkey: "5Miner",
      minerUid: 7,
      specNumber: 900,
      harnessName: "h",
      harnessVersion: "1",
      llmModel: "m",
    });
    expect(t.next(ev("a", "queued"))).toBeNull();
    expect(t.next(ev("b", "queued"))).toBeNull();
    expect(t.next(ev("c", "queued"))).toBeNull();
    expect(t.next(ev("b", "running"))).toMatchObject({
      scenario_name: "b",
      scenario_index: 1,
      total_scenarios: 3,
      state: "running",
      miner_hotkey: "5Miner",
      miner_uid: 7,
      spec_number: 900,
    });
    expect(t.next(ev("b", "running"))).toBeNull();
    expect(t.next(ev("b", "verifying"))).toMatchObject({ state: "verifying" });
    const done = t.next(ev("b", "done", { quality: 0.75, spentUsd: 0.0123, elapsedMs: 61_234 }));
    expect(done).toMatchObject({
      state: "complete",
      quality: 0.75,
      cost_usd: 0.0123,
      duration_s: 61.234,
      timed_out: false,
    });
    // timed_out is the agent stopped by its deadline or the watchdog (the evaluation says so), not a code's name.
    const stalled = t.next(
      ev("c", "done", {
        quality: 0.25,
        timedOut: true,
        failure: { class: "policy", code: "policy_stalled", message: "watchdog" },
      }),
    );
    expect(stalled).toMatchObject({ state: "complete", quality: 0.25, timed_out: true });
    // A retry after running goes back to running, then completes once.
    expect(t.next(ev("a", "running"))).toMatchObject({ state: "running", scenario_index: 0 });
    expect(t.next(ev("a", "retrying"))).toBeNull();
    expect(t.next(ev("a", "done", { quality: 2 }))).toMatchObject({ quality: 1 });
  });
});

describe("verdicts and ids the daemon makes", () => {
  it("a pack that cannot be fetched is a pack_verify_failed rejection with upstream's metadata: judge_model and the bench last pulled", () => {
    const last = {
      bench_image_hash: "sha256:bench",
      harness_image_hash: "sha256:a:sha256:b",
      bench_version: "4.0.23",
      harness_name: "Hermes",
      harness_version: "0.13.0",
    };
    const v = packFetchRejection({
      specNumber: 27,
      llmBaseUrl: "https://api.engy.ai/v1",
      llmModel: "policy:auto (default qwen3.8-27b)",
      judgeModel: "glm-5.2",
      harness: last,
    });
    expect(scoreVerdictSchema.parse(v)).toEqual(v);
    // validator.py _score_challenger (2f32a51b8e3b): every submission carries the same metadata.
    expect(v).toEqual({
      spec_number: 27,
      challenger: { score: 0, qualified: false, rejected: true, rejection_detail: "pack_verify_failed" },
      llm_base_url: "https://api.engy.ai/v1",
      llm_model: "policy:auto (default qwen3.8-27b)",
      judge_model: "glm-5.2",
      ...last,
    });
    // Never this validator's own name as the harness: before any pull, upstream's harness has none.
    const fresh = packFetchRejection({
      specNumber: 27,
      llmBaseUrl: "u",
      llmModel: "m",
      judgeModel: "glm-5.2",
      harness: {},
    });
    expect(fresh).not.toHaveProperty("harness_name");
    expect(fresh).not.toHaveProperty("harness_version");
    expect(fresh).not.toHaveProperty("bench_image_hash");
    // "unknown" is upstream's placeholder, left out of payloads.
    expect(harnessMetadataOf({ bench_version: "unknown", harness_name: "" })).toEqual({});
  });

  it("a rejection made before the bench was prepared takes the bench last pulled; anything else passes unchanged", () => {
    const last = { bench_image_hash: "sha256:bench", harness_name: "Hermes" };
    const rejected: ScoreVerdict = {
      spec_number: 27,
      challenger: { score: 0, qualified: false, rejected: true, rejection_detail: "missing_skill_md" },
      judge_model: "glm-5.2",
    };
    expect(withLastHarness(rejected, last)).toEqual({ ...rejected, ...last });
    const own: ScoreVerdict = { ...rejected, bench_image_hash: "sha256:this-run" };
    expect(withLastHarness(own, last)).toBe(own);
    const scored: ScoreVerdict = { spec_number: 27, challenger: { score: 1, qualified: true } };
    expect(withLastHarness(scored, last)).toBe(scored);
  });

  it("names eval cycles YYYYMMDD_HHMMSS_e{epoch} in UTC", () => {
    expect(evalIdOf(42, Date.UTC(2026, 0, 2, 3, 4, 5, 678))).toBe("20260102_030405_e42");
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 4_102_444_800_000 }), fc.nat(), (ms, id) =>
        /^\d{8}_\d{6}_e\d+$/.test(evalIdOf(id, ms)),
      ),
    );
  });
});
