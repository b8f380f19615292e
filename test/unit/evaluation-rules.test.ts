/**
 * The evaluation's retry and discard rules (src/evaluation/README.md), on upstream's own cases where
 * it has them: tests/test_sandbox_harness.py (c2f32fb8) TestLooksLikeProviderFailure,
 * TestRetryEpisodeOnIncomplete, test_run_eval_sync_retries_infra_incomplete_scenario, and
 * tests/test_own_container.py (the own-infrastructure discard, PR #331); then ours: a failure that
 * follows the pack across re-runs is the pack's (issue 20 item 8).
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { ErrorCode } from "../../src/errors.js";
import {
  backoffMs,
  discardReason,
  type EpisodeOutcome,
  type EpisodeRequest,
  evaluate,
  followsThePack,
  looksLikeProviderFailure,
  MAX_ATTEMPTS,
  type MeterFacts,
  PROVIDER_HANG_S,
  type Provenance,
  providerBilled,
  SHUTDOWN,
  TRUNCATED,
} from "../../src/evaluation/index.js";
import { silentLogger } from "../../src/log.js";
import { EvaluationRepo, openDb } from "../../src/store/index.js";

const provenance = (): Provenance => ({
  priceTableHash: "p".repeat(64),
  imageDigests: {},
  validatorVersion: "test",
  harness: { name: "t", version: "0" },
  llm: { baseUrl: "http://sim", simulated: true, defaultModel: "m" },
  capUsd: 0.3,
  concurrency: 1,
});

/** An episode as our layer reports it; `agent` is upstream's chat_exit / timed_out. */
function ep(
  scenario: string,
  o: {
    quality?: number;
    costUsd?: number;
    billed?: number;
    exitCode?: number | null;
    killedBy?: string | null;
    failure?: EpisodeOutcome["failure"];
    truncated?: boolean;
  } = {},
): EpisodeOutcome {
  const failed = o.failure !== undefined && o.failure.class !== "policy";
  return {
    scenario,
    status: failed ? "failed" : "scored",
    quality: failed ? 0 : (o.quality ?? 0),
    tests: 4,
    passed: Math.round((o.quality ?? 0) * 4),
    ...(o.failure ? { failure: o.failure } : {}),
    costUsd: o.costUsd ?? 0,
    byModel: {},
    billedCalls: o.billed ?? 0,
    truncatedBeforeToolCall: o.truncated ?? false,
    agent: { exitCode: o.exitCode === undefined ? 0 : o.exitCode, killedBy: o.killedBy ?? null },
    timings: { setupMs: 1, agentMs: 1, verifyMs: 1, totalMs: 3 },
    imageDigests: {},
  };
}

/** upstream's `_hermes_failed`: hermes exited badly, nothing billed (cost None). */
const hermesFailed = (s: string, chatExit = 1, timedOut = false) =>
  timedOut ? ep(s, { exitCode: null, killedBy: "deadline" }) : ep(s, { exitCode: chatExit });
/** upstream's `_hermes_ran_cleanly`: chat_exit 0. */
const hermesRanCleanly = (s: string, quality = 0, costUsd = 0) => ep(s, { quality, costUsd, exitCode: 0 });

describe("upstream's provider-failure rule (TestLooksLikeProviderFailure, case for case)", () => {
  it("every episode's hermes exit non-zero is flagged (the 2026-05-16 incident)", () => {
    expect(looksLikeProviderFailure(["a", "b", "c"].map((s) => hermesFailed(s, 1)))).toBe(true);
  });
  it("no episodes is not flagged", () => {
    expect(looksLikeProviderFailure([])).toBe(false);
  });
  it("every episode timed out is flagged (killed at the deadline, and by the policy-stall watchdog)", () => {
    expect(looksLikeProviderFailure(["a", "b", "c"].map((s) => hermesFailed(s, 137, true)))).toBe(true);
    const stalled = ["a", "b"].map((s) => ep(s, { exitCode: null, killedBy: "watchdog_no_call" }));
    expect(looksLikeProviderFailure(stalled)).toBe(true);
  });
  it("a local model's success (no cost recorded) is not flagged", () => {
    expect(
      looksLikeProviderFailure([
        hermesRanCleanly("a", 0.5),
        hermesRanCleanly("b", 0.8),
        hermesRanCleanly("c", 1.0),
      ]),
    ).toBe(false);
  });
  it("a local model's failure is flagged", () => {
    expect(looksLikeProviderFailure(["a", "b", "c"].map((s) => hermesFailed(s, 1)))).toBe(true);
  });
  it("a do-nothing pack that exits cleanly is not flagged: its 0 is the pack's", () => {
    expect(looksLikeProviderFailure(["a", "b", "c"].map((s) => hermesRanCleanly(s)))).toBe(false);
  });
  it("a bad pack with billing is not flagged", () => {
    expect(
      looksLikeProviderFailure([
        hermesRanCleanly("a", 0, 0.2),
        hermesRanCleanly("b", 0, 0.15),
        hermesRanCleanly("c", 0, 0.18),
      ]),
    ).toBe(false);
  });
  it("one billed episode and the rest failed is not flagged (credits ran out mid-session)", () => {
    expect(
      looksLikeProviderFailure([hermesRanCleanly("a", 1, 0.07), hermesFailed("b", 1), hermesFailed("c", 1)]),
    ).toBe(false);
  });
  it("a recorded cost of 0.0 is not billing: the exits decide", () => {
    expect(looksLikeProviderFailure(["a", "b", "c"].map((s) => ep(s, { costUsd: 0, exitCode: 1 })))).toBe(
      true,
    );
  });
  it("an unknown exit alone is not flagged (the agent never ran, or its status is unknown)", () => {
    expect(looksLikeProviderFailure(["a", "b", "c"].map((s) => ep(s, { exitCode: null })))).toBe(false);
    // an outcome stored before the agent's end was recorded reads as unknown too
    const { agent: _agent, ...old } = hermesFailed("a", 1);
    expect(looksLikeProviderFailure([old])).toBe(false);
  });
  it("billed cost is the meter's: an episode whose meter booked any cost is the provider answering", () => {
    expect(
      looksLikeProviderFailure([hermesFailed("a", 1), ep("b", { exitCode: 1, costUsd: 0.000001 })]),
    ).toBe(false);
  });
});

const facts = (o: Partial<MeterFacts> = {}): MeterFacts => ({
  calls: 0,
  errors: 0,
  cut: 0,
  refused: {},
  estimatedUsd: 0,
  longestWaitS: 0,
  ...o,
});

describe("calls booked at their reservation (ours: upstream's meter never settles them)", () => {
  it("a policy's calls aborted by the episode's close are billed: its run is scored, not discarded (issue 36 item 6)", () => {
    // The policy left a call in flight and failed its agent: the close booked the call's reservation.
    const left = (s: string) => ({
      ...ep(s, { exitCode: 1, costUsd: 0.078 }),
      meter: facts({ calls: 1, errors: 1, estimatedUsd: 0.078, longestWaitS: 4 }),
    });
    expect(providerBilled(left("a"))).toBe(true);
    expect(looksLikeProviderFailure(["a", "b", "c"].map(left))).toBe(false);
  });
  it("reservations of calls a hanging provider never answered are not a bill: an outage still discards", () => {
    const hung = (s: string) => ({
      ...ep(s, { exitCode: null, killedBy: "watchdog_no_call", costUsd: 0.02 }),
      meter: facts({ calls: 2, errors: 2, estimatedUsd: 0.02, longestWaitS: PROVIDER_HANG_S + 55 }),
    });
    expect(providerBilled(hung("a"))).toBe(false);
    expect(looksLikeProviderFailure(["a", "b"].map(hung))).toBe(true);
    // Any call billed on the provider's usage is a bill, whatever else waited.
    const mixed = { ...hung("c"), costUsd: 0.021 };
    expect(providerBilled(mixed)).toBe(true);
  });
});

describe("the provider-failure discard says what the meter saw (issue 31 item 6)", () => {
  const final = (o: EpisodeOutcome) => ({ outcome: o, disposition: "final" as const });
  const failure = (code: ErrorCode, message: string) => ({ class: "policy" as const, code, message });

  it("every call refused for the allowlist: the provider was never called, no key to check", () => {
    const offList = (s: string) => ({
      ...ep(s, {
        exitCode: 1,
        failure: failure("policy_errors", "the policy answered the agent with errors (http_400)"),
      }),
      meter: facts({ refused: { model: 37 } }),
    });
    const d = discardReason(["a", "b", "c"].map((s) => final(offList(s))));
    expect(d?.code).toBe("llm_provider_failure");
    expect(d?.message).toContain("0 forwarded to the provider, 111 refused for the allowlist");
    expect(d?.message).toContain("policy_errors ×3");
    expect(d?.message).toContain("The provider was never called");
    expect(d?.message).not.toContain("credits");
  });

  it("a policy sidecar that dies at once: its exit is named", () => {
    const crashed = (s: string) => ({
      ...ep(s, {
        exitCode: null,
        killedBy: "policy_exited",
        failure: failure("policy_crashed", "the policy sidecar exited with status 3 while the agent ran"),
      }),
      meter: facts(),
    });
    const d = discardReason(["a", "b"].map((s) => final(crashed(s))));
    expect(d?.message).toContain("0 forwarded to the provider");
    expect(d?.message).toContain(
      "policy_crashed ×2 (the policy sidecar exited with status 3 while the agent ran)",
    );
    expect(d?.message).not.toContain("credits");
  });

  it("calls the provider failed: the key, credits and network are named", () => {
    const down = (s: string) => ({
      ...ep(s, {
        exitCode: 1,
        failure: {
          class: "upstream" as const,
          code: "upstream_errors" as const,
          message: "the provider failed (http_503)",
        },
      }),
      status: "failed" as const,
      meter: facts({ calls: 6, errors: 6, refused: { cap: 1 } }),
    });
    const d = discardReason(
      ["a", "b"].map((s) => ({ outcome: down(s), disposition: "unresolved" as const })),
    );
    expect(d?.code).toBe("llm_provider_failure");
    expect(d?.message).toContain("12 forwarded to the provider (12 failed there), 2 refused for the cap");
    expect(d?.message).toContain("Check the LLM key, credits and network.");
  });
});

describe("the session discards, in upstream's order", () => {
  const infra = (s: string, code: ErrorCode = "network_create_failed", exitCode: number | null = null) => ({
    outcome: ep(s, { exitCode, failure: { class: "infra", code, message: "x" } }),
    disposition: "unresolved" as const,
  });

  it("every episode failed for the validator's own infrastructure: validator_infra, checked before the provider rule", () => {
    expect(discardReason([infra("a"), infra("b")])).toMatchObject({ code: "validator_infra" });
    // Both rules hold here (agents that exited 1, nothing billed): our own infrastructure is named first.
    expect(discardReason([infra("a", "agent_crashed", 1), infra("b", "agent_crashed", 1)])).toMatchObject({
      code: "validator_infra",
    });
  });

  it("the provider rule on final episodes: every agent failed, nothing billed → llm_provider_failure", () => {
    const finals = ["a", "b"].map((s) => ({ outcome: hermesFailed(s, 1), disposition: "final" as const }));
    expect(discardReason(finals)).toMatchObject({ code: "llm_provider_failure" });
  });

  it("one unresolved episode among scored ones: infra_incomplete (ours: upstream would post a 0 for it)", () => {
    expect(
      discardReason([{ outcome: hermesRanCleanly("a", 1, 0.1), disposition: "final" }, infra("b")]),
    ).toMatchObject({ code: "infra_incomplete" });
  });

  it("scored episodes: no discard", () => {
    expect(discardReason([{ outcome: hermesRanCleanly("a", 1, 0.1), disposition: "final" }])).toBeNull();
  });
});

describe("truncations are re-run as upstream re-runs them, then kept (TestRetryEpisodeOnIncomplete)", () => {
  it("upstream's back-off: 20 s × 3ᵏ for a truncation; our 2/8/30 s for other re-runs", () => {
    expect([1, 2, 3].map((k) => backoffMs(k, 1, TRUNCATED))).toEqual([20_000, 60_000, 180_000]);
    expect([1, 2, 3].map((k) => backoffMs(k, 1, "docker_timeout"))).toEqual([2_000, 8_000, 30_000]);
  });

  const truncated = (s: string) => ep(s, { truncated: true, exitCode: 0, billed: 1, costUsd: 0.001 });

  it("retries until an attempt is not truncated, and that one counts", async () => {
    const runs: number[] = [];
    const results = [truncated("s0"), truncated("s0"), ep("s0", { quality: 0.75, billed: 4, costUsd: 0.01 })];
    const res = await evaluate(
      opts(["s0"], async (req) => {
        runs.push(req.attempt);
        return results[req.attempt - 1]!;
      }),
    );
    expect(runs).toEqual([1, 2, 3]);
    expect(res.kind === "verdict" && res.verdict.scenarios[0]).toMatchObject({ quality: 0.75, attempts: 3 });
  });

  it("always truncated: 1 + 3 re-runs, then the last one is the scenario's result — scored, not discarded", async () => {
    let n = 0;
    const res = await evaluate(
      opts(["s0", "s1"], async (req) => {
        if (req.scenario === "s1") return ep("s1", { quality: 1, billed: 2, costUsd: 0.01 });
        n++;
        return truncated("s0");
      }),
    );
    expect(n).toBe(MAX_ATTEMPTS);
    expect(res.kind).toBe("verdict");
    expect(res.kind === "verdict" && res.verdict.scenarios.map((s) => [s.scenario, s.quality])).toEqual([
      ["s0", 0],
      ["s1", 1],
    ]);
  });
});

function opts(scenarios: string[], runner: (req: EpisodeRequest) => Promise<EpisodeOutcome>, extra = {}) {
  const db = openDb(join(mkdtempSync(join(tmpdir(), "evalrules-")), "v.sqlite"));
  return {
    repo: new EvaluationRepo(db),
    runner,
    packHash: "f".repeat(64),
    spec: 27,
    scenarios,
    concurrency: 2,
    capUsd: 0.3,
    log: silentLogger,
    provenance,
    backoffScale: 0.00001,
    ...extra,
  };
}

describe("a failure that follows the pack across re-runs is the pack's (issue 20 item 8)", () => {
  const forced = (s: string, code: ErrorCode = "agent_signalled", billed = 3) =>
    ep(s, { exitCode: null, billed, costUsd: 0.002, failure: { class: "infra", code, message: "x" } });

  it("the same code on every attempt, the provider billing the pack's calls in each: charged to the pack, the verdict posted", async () => {
    let n = 0;
    const res = await evaluate(
      opts(["a", "b"], async (req) => {
        if (req.scenario === "b") return ep("b", { quality: 0.5, billed: 4, costUsd: 0.01 });
        n++;
        return forced("a");
      }),
    );
    expect(n).toBe(MAX_ATTEMPTS);
    expect(res.kind).toBe("verdict");
    if (res.kind !== "verdict") return;
    expect(res.verdict.score).toBe(0.5);
    expect(res.verdict.scenarios[0]).toMatchObject({
      scenario: "a",
      quality: 0,
      status: "scored",
      attempts: MAX_ATTEMPTS,
      failure: { class: "policy", code: "agent_signalled" },
    });
    expect(res.verdict.scenarios[0]!.failure!.message).toContain("follows the pack");
  });

  it("the pack forcing it on every scenario gets a verdict too (the provider answered it every time)", async () => {
    const res = await evaluate(opts(["a", "b"], async (req) => forced(req.scenario, "upstream_errors")));
    expect(res.kind === "verdict" && res.verdict.scenarios.map((s) => s.failure?.class)).toEqual([
      "policy",
      "policy",
    ]);
  });

  it("not the pack's: an attempt where the provider billed nothing, a code that changes, a code only our side makes", () => {
    const four = (f: (k: number) => EpisodeOutcome) => [0, 1, 2, 3].map(f);
    expect(followsThePack(four(() => forced("a")))).toMatchObject({ class: "policy" });
    expect(followsThePack(four((k) => forced("a", "agent_signalled", k === 2 ? 0 : 3)))).toBeNull();
    expect(
      followsThePack(four((k) => forced("a", k === 3 ? "agent_crashed" : "agent_signalled"))),
    ).toBeNull();
    for (const code of ["engine_restarted", "sidecar_killed", "aborted"] as const)
      expect(followsThePack(four(() => forced("a", code)))).toBeNull();
    expect(followsThePack(four(() => forced("a")).slice(1))).toBeNull();
    expect(followsThePack(four(() => ep("a", { truncated: true, billed: 2 })))).toBeNull();
  });

  it("a provider outage (nothing billed on the re-runs) still discards the run", async () => {
    const res = await evaluate(
      opts(["a", "b"], async (req) =>
        req.scenario === "b"
          ? ep("b", { quality: 1, billed: 2, costUsd: 0.01 })
          : forced("a", "upstream_errors", req.attempt === 1 ? 5 : 0),
      ),
    );
    expect(res).toMatchObject({ kind: "discarded", code: "infra_incomplete" });
  });

  it("re-runs made before a restart count: the rule reads the attempts the database holds", async () => {
    const ac = new AbortController();
    const o = opts(
      ["a"],
      async (req) => {
        if (req.attempt === 3) ac.abort(SHUTDOWN);
        return forced("a");
      },
      { signal: ac.signal },
    );
    const first = await evaluate(o);
    expect(first).toMatchObject({ kind: "aborted", reason: "shutdown" });
    const attempts: number[] = [];
    const res = await evaluate({
      ...o,
      signal: undefined,
      runner: async (req) => {
        attempts.push(req.attempt);
        return forced("a");
      },
    });
    expect(attempts).toEqual([3, 4]);
    expect(res.kind === "verdict" && res.verdict.scenarios[0]).toMatchObject({
      attempts: MAX_ATTEMPTS,
      failure: { class: "policy", code: "agent_signalled" },
    });
  });
});
