/**
 * The pure parts of the trajrl-bench contract: probe answers, upstream's grading rules
 * (sandbox_harness.py `_run_verifier_container`, `_parse_ctrf_correctness`), Hermes' session
 * export and upstream's shadow provenance, image references and registry credentials.
 */
import { describe, expect, it } from "vitest";
import {
  authFromDockerConfig,
  registryOf,
  ScenarioInfoProbe,
  ScenariosProbe,
} from "../../src/bench/index.js";
import { ctrfCorrectness, rewardOf } from "../../src/episode/bench-verifier.js";
import { HARNESS_PROMPT, HERMES_COMMAND } from "../../src/episode/hermes-agent.js";
import {
  incompleteNoProgress,
  parseHermesSession,
  upstreamProvenance,
} from "../../src/episode/hermes-session.js";
import { fingerprint } from "../../src/meter/index.js";
import { digestFor, repositoryOf, tagOf } from "../../src/sandbox/index.js";

const b64 = (s: string) => Buffer.from(s).toString("base64");
const info = (over: Record<string, unknown> = {}) => ({
  version: "4.1.0",
  name: "path-tracing",
  image_repo: "ghcr.io/trajectoryrl/scenario-path-tracing",
  instruction_md: "# Do it",
  agent_output_path: "/app/out.ppm",
  verifier_timeout_s: 600,
  agent_timeout_s: 900,
  tests_files_b64: { "test.sh": b64("echo 1 > /logs/verifier/reward.txt"), "test_x.py": b64("pass") },
  ...over,
});

describe("probe answers", () => {
  it("the scenarios probe: harness identity optional, scenarios required", () => {
    expect(
      ScenariosProbe.parse({
        version: "4.1.0",
        scenarios: ["a"],
        harness_name: "Hermes",
        harness_version: "0.13.0",
      }),
    ).toMatchObject({ harness_name: "Hermes" });
    expect(ScenariosProbe.parse({ scenarios: [] }).version).toBe("unknown");
    expect(ScenariosProbe.safeParse({ version: "1" }).success).toBe(false);
  });

  it("scenario-info: upstream's defaults and fallbacks", () => {
    const ok = ScenarioInfoProbe.parse(info());
    expect(ok).toMatchObject({ verifier_timeout_s: 600, agent_timeout_s: 900 });
    // verifier_timeout_s: int(x, default 300); agent_timeout_s: only a positive number counts.
    expect(ScenarioInfoProbe.parse(info({ verifier_timeout_s: undefined })).verifier_timeout_s).toBe(300);
    expect(ScenarioInfoProbe.parse(info({ verifier_timeout_s: "120" })).verifier_timeout_s).toBe(120);
    expect(ScenarioInfoProbe.parse(info({ verifier_timeout_s: 90.7 })).verifier_timeout_s).toBe(90);
    for (const t of [undefined, null, 0, -5, "900", Number.NaN])
      expect(ScenarioInfoProbe.parse(info({ agent_timeout_s: t })).agent_timeout_s).toBeUndefined();
  });

  it.each([
    ["no test.sh", { tests_files_b64: { "x.py": b64("") } }, /test\.sh/],
    ["a relative deliverable", { agent_output_path: "app/out" }, /absolute/],
    ["a '..' in the deliverable", { agent_output_path: "/app/../etc/x" }, /\.\./],
    ["a test file in a folder", { tests_files_b64: { "test.sh": b64(""), "a/b": b64("") } }, /file name/],
    ["no image repo", { image_repo: "" }, /image_repo/],
  ])("refuses %s", (_, over, why) => {
    const r = ScenarioInfoProbe.safeParse(info(over));
    expect(r.success).toBe(false);
    expect(JSON.stringify(r.error?.issues)).toMatch(why);
  });
});

describe("upstream's grading rules", () => {
  it("reward.txt: clamp(int(text.strip()), 0, 1); unparsable is 0", () => {
    expect(rewardOf("1\n")).toBe(1);
    expect(rewardOf(" 0 ")).toBe(0);
    expect(rewardOf("7")).toBe(1);
    expect(rewardOf("-2")).toBe(0);
    expect(rewardOf("1.0")).toBe(0);
    expect(rewardOf("yes")).toBe(0);
  });

  it("ctrf: (passed, total) from results.summary, (0, 0) when unusable (upstream's vectors)", () => {
    expect(ctrfCorrectness({ results: { summary: { tests: 6, passed: 5, failed: 1 } } })).toEqual({
      passed: 5,
      total: 6,
    });
    expect(ctrfCorrectness({ results: { summary: { tests: 4, passed: 4 } } })).toEqual({
      passed: 4,
      total: 4,
    });
    expect(ctrfCorrectness({ results: { summary: { tests: 0, passed: 0 } } })).toEqual({
      passed: 0,
      total: 0,
    });
    expect(ctrfCorrectness({ results: { summary: { tests: "3", passed: "2" } } })).toEqual({
      passed: 2,
      total: 3,
    });
    expect(ctrfCorrectness({ results: { summary: { tests: "x", passed: 1 } } })).toEqual({
      passed: 0,
      total: 0,
    });
    expect(ctrfCorrectness({ results: {} })).toEqual({ passed: 0, total: 0 });
    expect(ctrfCorrectness(null)).toEqual({ passed: 0, total: 0 });
    expect(ctrfCorrectness([1, 2])).toEqual({ passed: 0, total: 0 });
  });
});

describe("Hermes' session export", () => {
  const session = {
    id: "s1",
    tool_call_count: 2,
    actual_cost_usd: 0.0123,
    messages: [
      { role: "system", content: "sys" },
      { role: "user", content: "Read /workspace/SKILL.md" },
      {
        role: "assistant",
        content: "",
        finish_reason: "tool_calls",
        tool_calls: [
          { id: "c1", type: "function", function: { name: "terminal", arguments: '{"command":"ls"}' } },
        ],
      },
      { role: "tool", content: "a b" },
      {
        role: "assistant",
        content: "done",
        finish_reason: "stop",
        // Hermes may store tool_calls as a JSON string.
        tool_calls: JSON.stringify([{ function: { name: "read_file", arguments: '{"path":"/app/x"}' } }]),
      },
      { role: "assistant", content: "", tool_calls: [] },
    ],
  };
  const text = `not json\n${JSON.stringify({ old: true })}\n${JSON.stringify(session)}\n`;

  it("reads the last session: its answers, tool calls (list or JSON string), counts and cost", () => {
    const s = parseHermesSession(text);
    expect(s.answers.map((a) => a.index)).toEqual([2, 4, 5]);
    expect(s.answers[0]?.toolCalls).toEqual([{ name: "terminal", arguments: '{"command":"ls"}' }]);
    expect(s.answers[1]?.toolCalls).toEqual([{ name: "read_file", arguments: '{"path":"/app/x"}' }]);
    expect(s).toMatchObject({ toolCallCount: 2, costUsd: 0.0123, unreadableLines: 1 });
    expect(parseHermesSession("")).toMatchObject({ answers: [], toolCallCount: 0, costUsd: null });
    expect(parseHermesSession('{"messages": "nope", "tool_call_count": "x"}\n')).toMatchObject({
      answers: [],
      toolCallCount: 0,
    });
  });

  it("upstream's provenance: set membership of the meter's fingerprints, empty answers skipped", () => {
    const s = parseHermesSession(text);
    const fp = (i: number) => {
      const a = s.answers[i]!;
      const f = fingerprint(a.content, a.toolCalls);
      return { content_sha: f.contentSha, tool_sha: f.toolSha };
    };
    expect(upstreamProvenance(s.answers, [fp(0), fp(1)])).toEqual({
      total: 2,
      matched: 2,
      unmatched: [],
      coverage: 1,
    });
    expect(upstreamProvenance(s.answers, [fp(0)])).toEqual({
      total: 2,
      matched: 1,
      unmatched: [4],
      coverage: 0.5,
    });
    // One receipt vouches for any number of identical answers (a set, not a multiset, as upstream).
    expect(upstreamProvenance([s.answers[0]!, s.answers[0]!], [fp(0)]).matched).toBe(2);
    expect(upstreamProvenance([], []).coverage).toBeNull();
  });

  it("infra-incomplete: a clean exit, no tool call and an answer cut off", () => {
    const cut = parseHermesSession(
      JSON.stringify({
        tool_call_count: 0,
        messages: [{ role: "assistant", content: "thinking", finish_reason: "incomplete" }],
      }),
    );
    expect(incompleteNoProgress(cut, 0, false)).toBe(true);
    expect(incompleteNoProgress(cut, null, false)).toBe(true);
    expect(incompleteNoProgress(cut, 1, false)).toBe(false);
    expect(incompleteNoProgress(cut, 0, true)).toBe(false);
    expect(incompleteNoProgress(parseHermesSession(text), 0, false)).toBe(false);
  });

  it("the command is upstream's, the prompt quoted for bash", () => {
    expect(HERMES_COMMAND).toContain("hermes chat -q 'Read /workspace/SKILL.md for your approach.");
    expect(HERMES_COMMAND).toContain("-m auto -t terminal,file,code_execution,memory --quiet --yolo");
    expect(HERMES_COMMAND).toContain(
      "hermes sessions export /workspace/turns.jsonl 2>/workspace/turns_export.err",
    );
    expect(HERMES_COMMAND.endsWith("exit $chat_rc")).toBe(true);
    expect(HARNESS_PROMPT).toContain("Do not modify SKILL.md.");
  });
});

describe("image references and registry credentials", () => {
  it("repository, tag and digest of a reference", () => {
    expect(repositoryOf("127.0.0.1:5000/trajectoryrl/sandbox-agent:T1")).toBe(
      "127.0.0.1:5000/trajectoryrl/sandbox-agent",
    );
    expect(repositoryOf("ghcr.io/x/y@sha256:ab")).toBe("ghcr.io/x/y");
    expect(tagOf("ghcr.io/trajectoryrl/sandbox-agent:staging")).toBe("staging");
    expect(tagOf("127.0.0.1:5000/x/sandbox-agent")).toBe("latest");
    expect(tagOf("127.0.0.1:5000/x/sandbox-agent:v1.2.0-rc.1")).toBe("v1.2.0-rc.1");
    expect(
      digestFor("127.0.0.1:5000/ns/a:T", ["other/a@sha256:11", "127.0.0.1:5000/ns/a@sha256:22"], "sha256:id"),
    ).toBe("sha256:22");
    expect(digestFor("x/a:T", ["y/a@sha256:33"], "sha256:id")).toBe("sha256:33");
    expect(digestFor("x/a:T", [], "sha256:id")).toBe("sha256:id");
  });

  it("finds a registry's credentials in a Docker config file", () => {
    expect(registryOf("ghcr.io/trajectoryrl/sandbox-agent:latest")).toBe("ghcr.io");
    expect(registryOf("127.0.0.1:5000/a/b:T")).toBe("127.0.0.1:5000");
    expect(registryOf("library/debian:12")).toBe("docker.io");
    const cfg = JSON.stringify({
      auths: {
        "https://ghcr.io": { auth: Buffer.from("me:s3cr:et").toString("base64") },
        "127.0.0.1:5000": { username: "u", password: "p" },
      },
    });
    expect(authFromDockerConfig(cfg, "ghcr.io")).toEqual({
      username: "me",
      password: "s3cr:et",
      serveraddress: "ghcr.io",
    });
    expect(authFromDockerConfig(cfg, "127.0.0.1:5000")).toMatchObject({ username: "u", password: "p" });
    expect(authFromDockerConfig(cfg, "docker.io")).toBeUndefined();
    expect(authFromDockerConfig("{not json", "ghcr.io")).toBeUndefined();
  });
});
