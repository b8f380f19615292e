import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  type EpisodeOutcome,
  type EpisodeRequest,
  type EvaluationEvent,
  evaluate,
  type Provenance,
  resumeKeyOf,
  SHUTDOWN,
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

const ok = (scenario: string, quality: number, usd = 0.01): EpisodeOutcome => ({
  scenario,
  status: "scored",
  quality,
  tests: 4,
  passed: Math.round(quality * 4),
  costUsd: usd,
  byModel: {
    "glm-5.3-flash": { calls: 3, costUsd: usd, promptTokens: 100, cachedTokens: 10, completionTokens: 20 },
  },
  billedCalls: 3,
  truncatedBeforeToolCall: false,
  timings: { setupMs: 1, agentMs: 1, verifyMs: 1, totalMs: 3 },
  imageDigests: { [`scenario/${scenario}`]: `sha256:${scenario}` },
});

const FAILURE_CODE = {
  policy: "policy_crashed",
  upstream: "upstream_errors",
  infra: "network_create_failed",
} as const;
const failed = (scenario: string, cls: "upstream" | "infra" | "policy", billed = 0): EpisodeOutcome => ({
  ...ok(scenario, 0, 0),
  status: cls === "policy" ? "scored" : "failed",
  failure: { class: cls, code: FAILURE_CODE[cls], message: "boom" },
  billedCalls: billed,
});

function repo() {
  const db = openDb(join(mkdtempSync(join(tmpdir(), "evaltest-")), "v.sqlite"));
  return { db, repo: new EvaluationRepo(db) };
}

const scenarios = ["a", "b", "c", "d", "e"];
const quality: Record<string, number> = { a: 1, b: 0.5, c: 0.25, d: 0, e: 0.3333333 };

function base(r: EvaluationRepo, runner: (req: EpisodeRequest) => Promise<EpisodeOutcome>, extra = {}) {
  return {
    repo: r,
    runner,
    packHash: "f".repeat(64),
    spec: 27,
    scenarios,
    concurrency: 1,
    capUsd: 0.3,
    log: silentLogger,
    provenance,
    backoffScale: 0.0001,
    ...extra,
  };
}

describe("evaluate", () => {
  it("sums quality to 4 dp, qualified when any > 0, results in scenario order whatever the concurrency", async () => {
    const verdicts = [];
    for (const concurrency of [1, 3, 5]) {
      const { repo: r } = repo();
      const res = await evaluate(
        base(
          r,
          async (req) => {
            await new Promise((f) => setTimeout(f, (5 - scenarios.indexOf(req.scenario)) * 3));
            return ok(req.scenario, quality[req.scenario]!);
          },
          { concurrency },
        ),
      );
      expect(res.kind).toBe("verdict");
      if (res.kind !== "verdict") return;
      expect(res.verdict.scenarios.map((s) => s.scenario)).toEqual(scenarios);
      verdicts.push({
        ...res.verdict,
        evaluationId: "",
        startedAt: "",
        finishedAt: "",
        scenarios: res.verdict.scenarios.map((s) => ({ ...s, episodeId: "" })),
      });
    }
    expect(verdicts[0]!.score).toBe(2.0833);
    expect(verdicts[0]!.qualified).toBe(true);
    expect(verdicts[0]!.costUsd).toBe(0.05);
    expect(verdicts[0]!.byModel["glm-5.3-flash"]!.calls).toBe(15);
    expect(verdicts[1]).toEqual(verdicts[0]);
    expect(verdicts[2]).toEqual(verdicts[0]);
  });

  it("starts episodes in the dispatch order it is given, reports them in scenario order", async () => {
    const { repo: r } = repo();
    const started: string[] = [];
    const res = await evaluate(
      base(
        r,
        async (req) => {
          started.push(req.scenario);
          return ok(req.scenario, quality[req.scenario]!);
        },
        { dispatchOrder: (pending: string[]) => [...pending].reverse() },
      ),
    );
    expect(started).toEqual(["e", "d", "c", "b", "a"]);
    expect(res.kind === "verdict" && res.verdict.scenarios.map((s) => s.scenario)).toEqual(scenarios);
    // A hook that loses or repeats a scenario is ignored: each runs exactly once, in the given order.
    for (const bad of [(p: string[]) => p.slice(1), (p: string[]) => [...p.slice(1), p[1]!]]) {
      started.length = 0;
      await evaluate(
        base(
          repo().repo,
          async (req) => {
            started.push(req.scenario);
            return ok(req.scenario, 1);
          },
          {
            dispatchOrder: bad,
          },
        ),
      );
      expect(started).toEqual(scenarios);
    }
  });

  it("remembers how long each scenario's clean episodes took (recentDurations), newest first", async () => {
    const { repo: r } = repo();
    for (const ms of [100, 300, 200]) {
      await evaluate(
        base(
          r,
          async (req) => {
            const o = ok(req.scenario, quality[req.scenario]!);
            return { ...o, timings: { ...o.timings, totalMs: req.scenario === "a" ? ms : 7 } };
          },
          { scenarios: ["a", "b"], resumeKey: `k${ms}` },
        ),
      );
    }
    await evaluate(
      base(r, async (req) => failed(req.scenario, "policy"), { scenarios: ["a"], resumeKey: "policy-fault" }),
    );
    const d = r.recentDurations(["a", "b", "z"]);
    expect(d.get("a")).toEqual([200, 300, 100]); // the policy-faulted run does not count
    expect(d.get("b")).toEqual([7, 7, 7]);
    expect(d.has("z")).toBe(false);
    expect(r.recentDurations(["a"], 2).get("a")).toEqual([200, 300]);
  });

  it("never runs more than `concurrency` episodes at once", async () => {
    const { repo: r } = repo();
    let now = 0;
    let peak = 0;
    await evaluate(
      base(
        r,
        async (req) => {
          now++;
          peak = Math.max(peak, now);
          await new Promise((f) => setTimeout(f, 10));
          now--;
          return ok(req.scenario, 1);
        },
        { concurrency: 2 },
      ),
    );
    expect(peak).toBe(2);
  });

  it("re-runs upstream/infra failures and truncations; the retried result is what counts", async () => {
    const { repo: r } = repo();
    const calls: Record<string, number> = {};
    const res = await evaluate(
      base(r, async (req) => {
        calls[req.scenario] = (calls[req.scenario] ?? 0) + 1;
        if (req.scenario === "a" && req.attempt < 3) return failed("a", "upstream", 1);
        if (req.scenario === "b" && req.attempt === 1)
          return { ...ok("b", 0), truncatedBeforeToolCall: true };
        if (req.scenario === "c" && req.attempt === 1) throw new Error("docker went away");
        return ok(req.scenario, quality[req.scenario]!);
      }),
    );
    expect(calls).toEqual({ a: 3, b: 2, c: 2, d: 1, e: 1 });
    expect(res.kind === "verdict" && res.verdict.scenarios.map((s) => s.attempts)).toEqual([3, 2, 2, 1, 1]);
    expect(res.kind === "verdict" && res.verdict.score).toBe(2.0833);
  });

  it("a policy failure is final: it scores, it is not retried", async () => {
    const { repo: r } = repo();
    let n = 0;
    const res = await evaluate(
      base(r, async (req) => {
        n++;
        return req.scenario === "a" ? failed("a", "policy") : ok(req.scenario, 1);
      }),
    );
    expect(n).toBe(5);
    expect(res.kind === "verdict" && res.verdict.scenarios[0]!.failure?.class).toBe("policy");
    expect(res.kind === "verdict" && res.verdict.score).toBe(4);
  });

  it("every episode failing upstream with nothing billed discards the run as llm_provider_failure", async () => {
    const { repo: r } = repo();
    const res = await evaluate(base(r, async (req) => failed(req.scenario, "upstream", 0)));
    expect(res).toMatchObject({ kind: "discarded", code: "llm_provider_failure" });
    expect(r.get(res.evaluationId)?.status).toBe("discarded");
  });

  it("one episode unresolved after all attempts discards the run as infra_incomplete, never scores it 0", async () => {
    const { repo: r } = repo();
    const res = await evaluate(
      base(r, async (req) => (req.scenario === "d" ? failed("d", "infra") : ok(req.scenario, 1))),
    );
    expect(res).toMatchObject({ kind: "discarded", code: "infra_incomplete" });
    expect(
      r.episodes(res.kind === "discarded" ? res.evaluationId : "").filter((e) => e.scenario === "d"),
    ).toHaveLength(4);
  });

  it("abort: in-flight episodes see the signal, queued ones never start, nothing is scored", async () => {
    const { repo: r } = repo();
    const ac = new AbortController();
    const started: string[] = [];
    const res = await evaluate(
      base(
        r,
        (req) => {
          started.push(req.scenario);
          if (started.length === 2) setTimeout(() => ac.abort({ code: "epoch_changed" }), 5);
          return new Promise<EpisodeOutcome>((_, reject) =>
            req.signal.addEventListener("abort", () => reject(req.signal.reason)),
          );
        },
        { concurrency: 2, signal: ac.signal },
      ),
    );
    expect(res).toMatchObject({ kind: "aborted", reason: "epoch_changed" });
    expect(started).toEqual(["a", "b"]);
    expect(r.get(res.evaluationId)?.status).toBe("aborted");
    expect(r.get(res.evaluationId)?.verdict).toBeNull();
  });

  it("resumes after a crash: finished episodes kept, unfinished re-run, verdict produced once", async () => {
    const { repo: r } = repo();
    const opts = base(r, async (req) => ok(req.scenario, quality[req.scenario]!));
    // A previous process got through a and b, was running c when it died.
    const first = r.create({
      id: "ev_dead",
      resumeKey: resumeKeyOf(opts),
      packHash: opts.packHash,
      spec: 27,
      scenarios,
      source: "local",
      meta: {},
    });
    for (const s of ["a", "b"]) {
      r.startEpisode({ id: `ev_dead.${s}.1`, evaluationId: first.id, scenario: s, attempt: 1 });
      r.finishEpisode(`ev_dead.${s}.1`, "final", ok(s, quality[s]!));
    }
    r.startEpisode({ id: "ev_dead.c.1", evaluationId: first.id, scenario: "c", attempt: 1 });
    const ran: string[] = [];
    const events: EvaluationEvent[] = [];
    const res = await evaluate({
      ...opts,
      runner: async (req) => {
        ran.push(req.scenario);
        return ok(req.scenario, quality[req.scenario]!);
      },
      onEvent: (e) => events.push(e),
    });
    expect(res.kind === "verdict" && res.verdict.evaluationId).toBe("ev_dead");
    expect(ran).toEqual(["c", "d", "e"]);
    expect(res.kind === "verdict" && res.verdict.score).toBe(2.0833);
    expect(
      events
        .filter((e) => e.phase === "done")
        .map((e) => e.scenario)
        .sort(),
    ).toEqual(scenarios);
    const c = r.episodes("ev_dead").filter((e) => e.scenario === "c");
    expect(c.map((e) => e.status)).toEqual(["interrupted", "final"]);
    expect(r.finish("ev_dead", "scored", null, {})).toBe(false);
    // A new run of the same command after completion starts a fresh evaluation.
    const again = await evaluate(opts);
    expect(again.kind === "verdict" && again.verdict.evaluationId).not.toBe("ev_dead");
  });

  it("a shutdown abort leaves the evaluation resumable", async () => {
    const { repo: r } = repo();
    const ac = new AbortController();
    const opts = base(
      r,
      (req) => {
        setTimeout(() => ac.abort(SHUTDOWN), 2);
        return new Promise<EpisodeOutcome>((_, reject) =>
          req.signal.addEventListener("abort", () => reject(req.signal.reason)),
        );
      },
      { signal: ac.signal },
    );
    const res = await evaluate(opts);
    expect(res).toMatchObject({ kind: "aborted", reason: "shutdown" });
    expect(r.get(res.evaluationId)?.status).toBe("running");
    const next = await evaluate({ ...opts, signal: undefined, runner: async (req) => ok(req.scenario, 1) });
    expect(next.kind === "verdict" && next.verdict.evaluationId).toBe(res.evaluationId);
  });
});
