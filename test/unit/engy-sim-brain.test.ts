import { readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ATTEMPT_DELIMITER,
  hintLine,
  INSPECT_COMMAND,
  isAdviceRequest,
  MAX_TURNS,
  type Plan,
  planTurn,
  type Step,
  VERIFY_COMMAND,
} from "../../src/engy-sim/brain.js";
import type { ChatMessage } from "../../src/engy-sim/conversation.js";
import { DEFAULT_PROFILE, resolveProfile, SIM_MODELS, type SimProfile } from "../../src/engy-sim/profile.js";
import { makeScenario, recogniseScenario } from "../../src/engy-sim/scenarios.js";

const fixture = new URL("../fixtures/sim-scenarios/sum-stats/", import.meta.url).pathname;
const read = (p: string) => readFileSync(join(fixture, p), "utf8");
const INSTRUCTION = read("instruction.md");
const scenario = makeScenario(
  "sum-stats",
  INSTRUCTION,
  read("solution/solve.sh"),
  read("solution/partial.sh"),
);
const other = makeScenario(
  "other-task",
  "# Another task\n\nWrite /app/other.py that prints the answer to everything.\n",
  "echo 42 > /app/other.py\n",
);
const SCENARIOS = [other, scenario];
const TOOLS = ["terminal", "read_file", "write_file", "patch", "search_files"];
const WEAKEST = SIM_MODELS[0]!;
const START: ChatMessage[] = [
  { role: "system", content: "You are an agent. Use the tools.", toolCalls: [] },
  {
    role: "user",
    content: "Read /workspace/SKILL.md and /workspace/INSTRUCTION.md, then complete the task.",
    toolCalls: [],
  },
];

interface Played {
  steps: Step[];
  plans: Plan[];
  messages: ChatMessage[];
  score: number;
}

/** Line-numbered, as many agents' read_file shows files: recognition must see through it. */
const numbered = (text: string) =>
  text
    .split("\n")
    .map((l, i) => `${String(i + 1).padStart(6)}\t${l}`)
    .join("\n");

/**
 * A pure stand-in for agent + container: results depend only on what was called, which is all the
 * simulator may look at anyway. Score: solve 1, partial 1/3 (the fixture's partial passes 1 of 3).
 */
function play(opts: {
  seed: number;
  model: string | ((turn: number, messages: ChatMessage[]) => string);
  profile?: SimProfile;
  adviser?: string;
  instructionView?: (t: string) => string;
}): Played {
  const profile = opts.profile ?? DEFAULT_PROFILE;
  const messages = [...START];
  const steps: Step[] = [];
  const plans: Plan[] = [];
  for (let turn = 0; turn < 60; turn++) {
    let view = messages;
    if (opts.adviser && messages.some((m) => m.role === "tool")) {
      const note = planTurn({
        seed: opts.seed,
        model: opts.adviser,
        profile,
        scenarios: SCENARIOS,
        messages,
        toolNames: undefined,
      });
      view = [...messages, { role: "user", content: `Notes from advisers:\n${note.content}`, toolCalls: [] }];
    }
    const model = typeof opts.model === "string" ? opts.model : opts.model(turn, messages);
    const plan = planTurn({
      seed: opts.seed,
      model,
      profile,
      scenarios: SCENARIOS,
      messages: view,
      toolNames: TOOLS,
    });
    plans.push(plan);
    steps.push(plan.step);
    const toolCalls = plan.toolCalls.map((c, i) => ({ id: `call_${turn}_${i}`, ...c }));
    messages.push({ role: "assistant", content: plan.content, toolCalls });
    if (toolCalls.length === 0) break;
    for (const tc of toolCalls) {
      let result: string;
      try {
        const args = JSON.parse(tc.arguments) as { path?: string; command?: string };
        if (args.path?.endsWith("INSTRUCTION.md")) result = (opts.instructionView ?? numbered)(INSTRUCTION);
        else if (args.path) result = "# SKILL\nBe careful.";
        else if (args.command?.includes(ATTEMPT_DELIMITER)) result = "exit code: 0";
        else result = `exit code: 0\n${Date.now()}`; // outputs carry timestamps: must not matter
      } catch {
        result = "error: the arguments were not valid JSON";
      }
      messages.push({ role: "tool", content: result, toolCalls: [], toolCallId: tc.id });
    }
  }
  const last = [...steps].reverse().find((s) => s.startsWith("attempt_"));
  const score = last === "attempt_solve" ? 1 : last === "attempt_partial" ? 1 / 3 : 0;
  return { steps, plans, messages, score };
}

const withoutMalformed = resolveProfile({
  models: Object.fromEntries(SIM_MODELS.map((m) => [m, { malformed_tool_json_rate: 0 }])),
});

describe("engy-sim brain: the session state machine", () => {
  it("reads both files in one turn, inspects, attempts, verifies, then stops without tool calls", () => {
    const seed = [...Array(50).keys()].find((s) =>
      play({ seed: s, model: "kimi-k3", profile: withoutMalformed }).steps.includes("attempt_solve"),
    )!;
    const p = play({ seed, model: "kimi-k3", profile: withoutMalformed });
    expect(p.steps).toEqual(["read", "inspect", "attempt_solve", "verify", "stop_done"]);
    expect(p.plans[0]!.toolCalls.map((c) => JSON.parse(c.arguments))).toEqual([
      { path: "/workspace/SKILL.md" },
      { path: "/workspace/INSTRUCTION.md" },
    ]);
    expect(JSON.parse(p.plans[1]!.toolCalls[0]!.arguments)).toEqual({ command: INSPECT_COMMAND });
    const attempt = JSON.parse(p.plans[2]!.toolCalls[0]!.arguments).command as string;
    expect(attempt).toContain(scenario.solve!.trimEnd());
    expect(attempt).toMatch(/cd \/app && bash \/tmp\/trajrl_attempt_1\.sh$/);
    expect(JSON.parse(p.plans[3]!.toolCalls[0]!.arguments)).toEqual({ command: VERIFY_COMMAND });
    expect(p.plans[4]!.toolCalls).toEqual([]);
    expect(p.score).toBe(1);
  });

  it("a visibly failed attempt is retried, at most max_attempts in all, then the model gives up", () => {
    const never = resolveProfile({
      partial_rate: 0,
      max_attempts: 3,
      models: { [WEAKEST]: { skill: 0, malformed_tool_json_rate: 0 } },
    });
    const p = play({ seed: 3, model: WEAKEST, profile: never });
    expect(p.steps).toEqual([
      "read",
      "inspect",
      "attempt_wrong",
      "attempt_wrong",
      "attempt_wrong",
      "stop_gave_up",
    ]);
    expect(p.score).toBe(0);
    // Wrong attempts are scripts that fail visibly, and do not write the deliverable.
    for (const plan of p.plans.filter((x) => x.step === "attempt_wrong")) {
      const cmd = JSON.parse(plan.toolCalls[0]!.arguments).command as string;
      expect(cmd).toContain("set -euo pipefail");
      expect(cmd).not.toContain("/app/stats.sh");
    }
  });

  it("a partial attempt is taken as done: verified, then stop (partial credit)", () => {
    const partial = resolveProfile({
      partial_rate: 1,
      models: { [WEAKEST]: { skill: 0, malformed_tool_json_rate: 0 } },
    });
    const p = play({ seed: 5, model: WEAKEST, profile: partial });
    expect(p.steps).toEqual(["read", "inspect", "attempt_partial", "verify", "stop_done"]);
    expect(p.score).toBeCloseTo(1 / 3);
  });

  it("same seed, model and conversation → the same plan; decisions do not depend on tool outputs", () => {
    const a = play({ seed: 9, model: "glm-5.2" });
    const b = play({ seed: 9, model: "glm-5.2" });
    expect(a.plans).toEqual(b.plans);
    const c = play({ seed: 9, model: "glm-5.2", instructionView: (t) => JSON.stringify({ content: t }) });
    expect(c.steps).toEqual(a.steps);
  });

  it("common random numbers: a stronger model scores at least what a weaker one does, seed by seed", () => {
    const byStrength = [...SIM_MODELS].sort(
      (x, y) => DEFAULT_PROFILE.models[x]!.skill - DEFAULT_PROFILE.models[y]!.skill,
    );
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1_000_000 }), (seed) => {
        const scores = byStrength.map((m) => play({ seed, model: m }).score);
        for (let i = 1; i < scores.length; i++) expect(scores[i]).toBeGreaterThanOrEqual(scores[i - 1]!);
      }),
      { numRuns: 60 },
    );
  });

  it("success rates across seeds: kimi-k3 high, the cheapest low; a strong adviser's hint lifts the weak writer", () => {
    const seeds = [...Array(150).keys()];
    const rate = (f: (s: number) => Played) => seeds.filter((s) => f(s).score === 1).length / seeds.length;
    const strong = rate((seed) => play({ seed, model: "kimi-k3" }));
    const weak = rate((seed) => play({ seed, model: WEAKEST }));
    const advised = rate((seed) => play({ seed, model: WEAKEST, adviser: "kimi-k3" }));
    expect(strong).toBeGreaterThan(0.85);
    expect(weak).toBeLessThan(0.65);
    expect(strong - weak).toBeGreaterThan(0.25);
    expect(advised).toBeGreaterThan(weak + 0.1);
    // Seed by seed, the hint never hurts.
    for (const seed of seeds.slice(0, 40))
      expect(play({ seed, model: WEAKEST, adviser: "kimi-k3" }).score).toBeGreaterThanOrEqual(
        play({ seed, model: WEAKEST }).score,
      );
  });

  it("escalation mid-session: the strong model picks up at the next attempt index", () => {
    const seed = [...Array(200).keys()].find((s) => {
      const p = play({ seed: s, model: WEAKEST, profile: withoutMalformed });
      return p.steps[2] === "attempt_wrong";
    })!;
    const escalated = play({
      seed,
      profile: withoutMalformed,
      model: (_turn, messages) =>
        messages.some(
          (m) => m.role === "assistant" && m.toolCalls.some((c) => c.arguments.includes(ATTEMPT_DELIMITER)),
        )
          ? "kimi-k3"
          : WEAKEST,
    });
    expect(escalated.steps.slice(0, 3)).toEqual(["read", "inspect", "attempt_wrong"]);
    const second = escalated.plans[3]!;
    expect(second.step.startsWith("attempt_")).toBe(true);
    expect(second.decision?.index).toBe(1);
    expect(second.decision?.p).toBe(DEFAULT_PROFILE.models["kimi-k3"]!.skill);
  });

  it("an unknown task: a few exploratory turns, then a plain stop", () => {
    const p = play({
      seed: 1,
      model: "kimi-k3",
      profile: withoutMalformed,
      instructionView: () => "# Something else",
    });
    expect(p.steps).toEqual(["read", "explore", "explore", "stop_unknown"]);
  });

  it("malformed tool JSON: the arguments do not parse, and the step is re-issued next turn", () => {
    const always = resolveProfile({ models: { "kimi-k3": { malformed_tool_json_rate: 1 } } });
    const first = planTurn({
      seed: 1,
      model: "kimi-k3",
      profile: always,
      scenarios: SCENARIOS,
      messages: START,
      toolNames: TOOLS,
    });
    expect(first.malformed).toBe(true);
    expect(() => JSON.parse(first.toolCalls[0]!.arguments)).toThrow();
    expect(JSON.parse(`${first.toolCalls[0]!.arguments}}`)).toEqual({ path: "/workspace/SKILL.md" });
    const p = play({ seed: 1, model: "kimi-k3", profile: always });
    // The read turn's second call (INSTRUCTION.md) was intact, so the session moved on; the lone
    // inspect call was broken every time, so it was re-issued until the turn limit stopped the session.
    expect(p.steps.slice(0, 3)).toEqual(["read", "inspect", "inspect"]);
    expect(p.steps).toHaveLength(MAX_TURNS + 1);
    expect(p.steps.at(-1)).toBe("stop_gave_up");
  });
});

describe("engy-sim brain: advisers", () => {
  const afterRead = () => play({ seed: 2, model: "kimi-k3", profile: withoutMalformed }).messages.slice(0, 5);

  it("a request without tools gets a short note; a correct hint carries the scenario's marker", () => {
    const messages = afterRead();
    let hinted = 0;
    for (let seed = 0; seed < 60; seed++) {
      const note = (model: string) =>
        planTurn({
          seed,
          model,
          profile: DEFAULT_PROFILE,
          scenarios: SCENARIOS,
          messages,
          toolNames: undefined,
        });
      const strong = note("kimi-k3");
      const weak = note(WEAKEST);
      expect(strong.toolCalls).toEqual([]);
      expect(strong.content.length).toBeLessThan(400);
      if (weak.step === "advice_hint") expect(strong.step).toBe("advice_hint");
      if (strong.step === "advice_hint") {
        hinted++;
        expect(strong.content.startsWith(`${hintLine(scenario)}\n`)).toBe(true);
      } else expect(strong.content).not.toContain("hint:");
    }
    expect(hinted).toBeGreaterThan(45);
  });

  it("hints count only outside tool results (SKILL.md cannot plant one)", () => {
    const base = afterRead();
    const planted: ChatMessage[] = [
      ...base,
      { role: "tool", content: hintLine(scenario), toolCalls: [], toolCallId: "x" },
    ];
    const inNote: ChatMessage[] = [
      ...base,
      { role: "system", content: `Adviser: ${hintLine(scenario)}`, toolCalls: [] },
    ];
    const wrongDigest: ChatMessage[] = [
      ...base,
      { role: "user", content: "hint: sum-stats/000000000000", toolCalls: [] },
    ];
    const decide = (messages: ChatMessage[]) => {
      // An inspected session: the next plan is the first attempt.
      const inspected: ChatMessage[] = [
        ...messages,
        {
          role: "assistant",
          content: "",
          toolCalls: [{ id: "i", name: "terminal", arguments: JSON.stringify({ command: INSPECT_COMMAND }) }],
        },
        { role: "tool", content: "total 0", toolCalls: [], toolCallId: "i" },
      ];
      return planTurn({
        seed: 4,
        model: WEAKEST,
        profile: DEFAULT_PROFILE,
        scenarios: SCENARIOS,
        messages: inspected,
        toolNames: TOOLS,
      }).decision!;
    };
    expect(decide(base).hinted).toBe(false);
    expect(decide(planted).hinted).toBe(false);
    expect(decide(wrongDigest).hinted).toBe(false);
    const d = decide(inNote);
    expect(d.hinted).toBe(true);
    const p = DEFAULT_PROFILE.models[WEAKEST]!.skill;
    expect(d.p).toBeCloseTo(1 - (1 - p) * (1 - DEFAULT_PROFILE.hint_boost));
  });

  it("tells an advice request from a writer turn that carries notes", () => {
    const base = afterRead();
    expect(isAdviceRequest(base, undefined)).toBe(true);
    expect(isAdviceRequest(base, TOOLS)).toBe(false);
    expect(isAdviceRequest(START, TOOLS)).toBe(false);
    const ask = [
      ...base,
      { role: "user", content: "Please give short advice for the next step.", toolCalls: [] },
    ];
    expect(isAdviceRequest(ask, TOOLS)).toBe(true);
    const notes = [
      ...base,
      { role: "user", content: `Notes from advisers:\n${hintLine(scenario)}\nwrite notes`, toolCalls: [] },
    ];
    expect(isAdviceRequest(notes, TOOLS)).toBe(false);
  });
});

describe("engy-sim scenario recognition", () => {
  it("matches the whole instruction, line-numbered views and JSON-wrapped content; not a near miss", () => {
    expect(recogniseScenario([INSTRUCTION], SCENARIOS)?.name).toBe("sum-stats");
    expect(recogniseScenario([numbered(INSTRUCTION)], SCENARIOS)?.name).toBe("sum-stats");
    expect(recogniseScenario([JSON.stringify({ output: INSTRUCTION, exit: 0 })], SCENARIOS)?.name).toBe(
      "sum-stats",
    );
    expect(
      recogniseScenario(["# Summary statistics of a number list\nsomething else entirely"], SCENARIOS),
    ).toBe(undefined);
    expect(recogniseScenario([INSTRUCTION], [])).toBe(undefined);
  });
});
