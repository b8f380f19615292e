import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import {
  attributeAgentEnd,
  isUpstreamFailure,
  primaryFailure,
  upstreamFailing,
} from "../../src/episode/attribution.js";
import { parseCtrf, parseReward, scoreOf } from "../../src/episode/ctrf.js";
import { deadline } from "../../src/episode/deadline.js";
import { formatCheckTable } from "../../src/episode/scenario-check.js";
import { round4 } from "../../src/precision.js";

const ctrf = (tests: Array<[string, string]>, summary?: object) =>
  JSON.stringify({
    results: {
      tool: { name: "g" },
      ...(summary ? { summary } : {}),
      tests: tests.map(([name, status]) => ({ name, status, duration: 1 })),
    },
  });

describe("ctrf and reward", () => {
  it("counts from the per-test entries, else the summary", () => {
    const r = parseCtrf(
      ctrf(
        [
          ["a", "passed"],
          ["b", "failed"],
          ["c", "passed"],
        ],
        { tests: 9, passed: 9 },
      ),
    );
    expect(r).toMatchObject({ ok: true, value: { tests: 3, passed: 2, failed: 1 } });
    const s = parseCtrf(JSON.stringify({ results: { summary: { tests: 4, passed: 1, failed: 3 } } }));
    expect(s).toMatchObject({ ok: true, value: { tests: 4, passed: 1 } });
  });

  it("rejects malformed reports and impossible summaries", () => {
    expect(parseCtrf("{").ok).toBe(false);
    expect(parseCtrf(JSON.stringify({ results: {} })).ok).toBe(false);
    expect(parseCtrf(JSON.stringify({ results: { summary: { tests: 2, passed: 3 } } })).ok).toBe(false);
    expect(parseCtrf(JSON.stringify({ nope: 1 })).ok).toBe(false);
  });

  it("reads reward.txt as a number in [0, 1]", () => {
    expect(parseReward("1\n")).toEqual({ ok: true, value: 1 });
    expect(parseReward(" 0.25 ")).toEqual({ ok: true, value: 0.25 });
    expect(parseReward("1.5").ok).toBe(false);
    expect(parseReward("yes").ok).toBe(false);
    expect(parseReward("").ok).toBe(false);
  });

  it("scores passed/tests when tests exist, else the reward", () => {
    expect(scoreOf({ tests: 6, passed: 1, failed: 5, entries: [] }, 1)).toMatchObject({
      quality: 1 / 6,
      source: "ctrf",
    });
    expect(scoreOf({ tests: 0, passed: 0, failed: 0, entries: [] }, 1)).toMatchObject({
      quality: 1,
      source: "reward",
    });
    expect(scoreOf(undefined, 0)).toMatchObject({ quality: 0, source: "reward" });
    expect(scoreOf(undefined, undefined)).toBeUndefined();
    expect(round4(1 / 6)).toBe(0.1667);
  });
});

describe("failure attribution", () => {
  const base = { exitCode: 0, oomKilled: false, upstreamFailing: false };

  it("a policy that died under the agent is the policy's fault: out of memory or crashed", () => {
    // whatever the agent wrote after its model went away (signal, llm_error) does not move it
    for (const summaryReason of [undefined, "signal", "llm_error"]) {
      const f = { ...base, killedBy: "policy_exited" as const, upstreamFailing: true };
      if (summaryReason) Object.assign(f, { summaryReason });
      expect(attributeAgentEnd({ ...f, policyExit: { exitCode: 137, oomKilled: true } })).toMatchObject({
        class: "policy",
        code: "policy_oom",
      });
      const crashed = attributeAgentEnd({ ...f, policyExit: { exitCode: 3, oomKilled: false } });
      expect(crashed).toMatchObject({ class: "policy", code: "policy_crashed" });
      expect(crashed?.message).toContain("status 3");
    }
  });

  it("a clean end is no failure; the deadline is the policy's", () => {
    expect(attributeAgentEnd({ ...base, summaryReason: "completed" })).toBeUndefined();
    expect(attributeAgentEnd({ ...base, summaryReason: "max_turns" })).toBeUndefined();
    expect(attributeAgentEnd({ ...base, summaryReason: "budget_exhausted" })).toBeUndefined();
    expect(attributeAgentEnd({ ...base, killedBy: "deadline", summaryReason: "signal" })).toMatchObject({
      class: "policy",
      code: "agent_timeout",
    });
  });

  it("the watchdog's stop is the policy's (upstream's policy_stalled), a call in flight or not", () => {
    expect(attributeAgentEnd({ ...base, killedBy: "watchdog_no_call" })).toMatchObject({
      class: "policy",
      code: "policy_stalled",
    });
    expect(attributeAgentEnd({ ...base, killedBy: "watchdog_idle", inflightAtKill: true })).toMatchObject({
      class: "policy",
      code: "policy_stalled",
    });
  });

  it("model errors are upstream when the provider was failing, else the policy's", () => {
    expect(
      attributeAgentEnd({ ...base, exitCode: 4, summaryReason: "llm_error", upstreamFailing: true }),
    ).toMatchObject({
      class: "upstream",
    });
    expect(attributeAgentEnd({ ...base, exitCode: 4, summaryReason: "llm_error" })).toMatchObject({
      class: "policy",
      code: "policy_errors",
    });
  });

  it("our agent breaking is infra; running out of memory is the policy's", () => {
    expect(attributeAgentEnd({ ...base, exitCode: 1, summaryReason: "internal_error" })?.class).toBe("infra");
    expect(attributeAgentEnd({ ...base, exitCode: 137 })).toMatchObject({
      class: "infra",
      code: "agent_crashed",
    });
    expect(attributeAgentEnd({ ...base, exitCode: 137, oomKilled: true })).toMatchObject({
      class: "policy",
      code: "agent_oom",
    });
    // Exit 0 without our summary line (an operator's own agent image) is a normal end.
    expect(attributeAgentEnd({ ...base, exitCode: 0 })).toBeUndefined();
  });

  it("recognises provider failures among receipts", () => {
    const r = (
      status: number,
      upstream_status: number | null,
      error_code: string | null,
      truncated = false,
    ) => ({
      status,
      upstream_status,
      error_code,
      truncated,
    });
    expect(isUpstreamFailure(r(502, 503, "upstream_error"))).toBe(true);
    expect(isUpstreamFailure(r(504, null, "upstream_timeout"))).toBe(true);
    expect(isUpstreamFailure(r(200, 200, "upstream_cut", true))).toBe(true);
    expect(isUpstreamFailure(r(200, 200, null))).toBe(false);
    expect(isUpstreamFailure(r(400, 400, "bad_request"))).toBe(false);
    // The last forwarded call decides; meter refusals (402 cap) are not provider failures.
    expect(upstreamFailing([r(502, 503, "upstream_error"), r(200, 200, null)])).toBe(false);
    expect(upstreamFailing([r(200, 200, null), r(502, 503, "upstream_error"), r(402, null, "cap")])).toBe(
      true,
    );
    expect(upstreamFailing([])).toBe(false);
  });

  it("a call the meter ended (episode closed, client gone or not reading, answers over their bound) is not the provider's failure", () => {
    const r = (
      status: number,
      upstream_status: number | null,
      error_code: string | null,
      truncated = false,
    ) => ({
      status,
      upstream_status,
      error_code,
      truncated,
    });
    // Issue 36 item 6(b): a policy leaves one long call in flight and answers its agent with errors;
    // the close's 503 used to read as the provider failing, and every attempt ended upstream_errors.
    const closed = r(503, null, "episode_closed", true);
    expect(isUpstreamFailure(closed)).toBe(false);
    expect(isUpstreamFailure(r(503, null, "meter_stopped", true))).toBe(false);
    expect(isUpstreamFailure(r(499, 200, "client_disconnected", true))).toBe(false);
    expect(isUpstreamFailure(r(200, 200, "client_not_reading", true))).toBe(false);
    expect(isUpstreamFailure(r(429, 200, "answer_bytes_limit", true))).toBe(false);
    expect(upstreamFailing([closed])).toBe(false);
    expect(upstreamFailing([r(200, 200, null), closed])).toBe(false);
    // The provider's own failure before it still decides.
    expect(upstreamFailing([r(504, null, "upstream_timeout"), closed])).toBe(true);
    expect(
      attributeAgentEnd({
        exitCode: 1,
        oomKilled: false,
        summaryReason: "llm_error",
        summaryCode: "http_400",
        upstreamFailing: upstreamFailing([closed]),
      }),
    ).toMatchObject({ class: "policy", code: "policy_errors" });
  });

  it("an upstream or infra failure outranks earlier policy ones", () => {
    const p = { class: "policy" as const, code: "agent_timeout" as const, message: "" };
    const i = { class: "infra" as const, code: "verifier_no_result" as const, message: "" };
    expect(primaryFailure([p, i])).toBe(i);
    expect(primaryFailure([p])).toBe(p);
    expect(primaryFailure([])).toBeUndefined();
  });
});

describe("deadlines", () => {
  it("expire on their own and follow their parent", async () => {
    const d = deadline(30);
    await expect(sleep(1000, undefined, { signal: d.signal })).rejects.toBeDefined();
    expect(d.expired).toBe(true);
    expect(d.elapsedMs()).toBeGreaterThanOrEqual(25);
    const parent = new AbortController();
    const child = deadline(10_000, parent.signal);
    parent.abort(new Error("shutdown"));
    expect(child.signal.aborted).toBe(true);
    expect(child.expired).toBe(false);
    child.clear();
  });
});

describe("check table", () => {
  it("escapes a bench's scenario names and problems (issue 36 item 9)", () => {
    const table = formatCheckTable([
      {
        scenario: "s\u001b[2J\nfake ok",
        image: "x",
        runtime: "runc",
        imageBuilt: false,
        reference: undefined,
        empty: undefined,
        hostile: undefined,
        nullFloor: undefined,
        ok: false,
        problems: ["bad\u001b]0;t\u0007"],
        ms: { build: 0, solve: 0, grade: 0, total: 0 },
      },
    ]);
    expect(table).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    expect(table.split("\n")).toHaveLength(3);
    expect(table).toContain("s\\u001b[2J\\nfake ok");
  });

  it("prints one row per scenario and every problem", () => {
    const table = formatCheckTable([
      {
        scenario: "a",
        image: "x",
        imageBuilt: false,
        reference: { quality: 1, tests: 6, passed: 6 },
        empty: { quality: 1 / 6, tests: 6, passed: 1 },
        hostile: { quality: 1 / 6, tests: 6, passed: 1 },
        nullFloor: 0.1667,
        runtime: "runsc",
        ok: true,
        problems: [],
        ms: { build: 0, solve: 0, grade: 0, total: 1500 },
      },
      {
        scenario: "bb",
        image: undefined,
        imageBuilt: false,
        reference: undefined,
        empty: undefined,
        hostile: undefined,
        nullFloor: 0,
        runtime: "runsc",
        ok: false,
        problems: ["image_build_failed: boom"],
        ms: { build: 0, solve: 0, grade: 0, total: 100 },
      },
    ]);
    const lines = table.split("\n");
    expect(lines[0]).toMatch(
      /^scenario\s+reference\s+empty\s+hostile\s+null_floor\s+result\s+seconds\s+runtime$/,
    );
    expect(lines[1]).toMatch(
      /^a\s+6\/6 \(1\)\s+1\/6 \(0\.1667\)\s+1\/6 \(0\.1667\)\s+0\.1667\s+ok\s+1\.5\s+runsc$/,
    );
    expect(lines[2]).toMatch(/^bb\s+-\s+-\s+-\s+0\s+FAIL/);
    expect(lines[3]).toBe("  bb: image_build_failed: boom");
  });
});
