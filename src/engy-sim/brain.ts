/**
 * How a simulated model plays the agent's model: a pure function of (seed, model profile, known
 * scenarios, conversation). The session is a state machine read off the conversation — which,
 * Hermes-style, is resent whole every turn — so a session can switch models mid-way (escalation)
 * and the next model picks up where the last left off.
 *
 * Decisions never look at raw tool outputs (they carry timestamps): only at which calls were made,
 * which scenario the agent was shown, and whether a correct hint is present. Every random draw is
 * keyed on (seed, scenario, attempt or turn, decision) and never on the model, and an action
 * succeeds iff u < p(model): a stronger model succeeds whenever a weaker one does on the same draw.
 */
import type { ChatMessage } from "./conversation.js";
import type { ModelProfile, SimProfile } from "./profile.js";
import { draw, pick } from "./rng.js";
import { recogniseScenario, type SimScenario } from "./scenarios.js";
import { countTokens } from "./tokens.js";

export const SKILL_PATH = "/workspace/SKILL.md";
export const INSTRUCTION_PATH = "/workspace/INSTRUCTION.md";
export const INSPECT_COMMAND = "ls -la /app";
export const VERIFY_COMMAND = "cd /app && ls -la | head -n 40";
export const EXPLORE_COMMANDS = ["ls -la /app", "ls -la /workspace"] as const;
/** Heredoc delimiter of an attempt script: how the simulator recognises its own attempts later. */
export const ATTEMPT_DELIMITER = "EOF_TRAJRL";
/** A session that has gone on this long stops, whatever state it reads as. */
export const MAX_TURNS = 40;

const HINT_RE = /hint: ([A-Za-z0-9._-]+)\/([0-9a-f]{12})/g;
/** Same marker, without the global flag: `.test()` on a /g regex keeps state between calls. */
const HINT_TEST = /hint: [A-Za-z0-9._-]+\/[0-9a-f]{12}/;

export type Step =
  | "read"
  | "inspect"
  | "attempt_solve"
  | "attempt_partial"
  | "attempt_wrong"
  | "verify"
  | "stop_done"
  | "stop_gave_up"
  | "explore"
  | "stop_unknown"
  | "advice_hint"
  | "advice_generic"
  | "chat";

export interface PlannedToolCall {
  name: string;
  arguments: string;
}

export interface Plan {
  step: Step;
  scenario: string | undefined;
  content: string;
  toolCalls: PlannedToolCall[];
  /** Set when a tool call's arguments were deliberately broken (malformed_tool_json_rate). */
  malformed: boolean;
  /** For attempts and advice: the draw and the probability it was compared with. */
  decision?: { index: number; u: number; p: number; hinted: boolean };
}

export interface TurnInput {
  seed: number;
  model: string;
  profile: SimProfile;
  scenarios: readonly SimScenario[];
  messages: readonly ChatMessage[];
  /** Names of the offered tools; undefined when the request offers none (an adviser or judge call). */
  toolNames: readonly string[] | undefined;
}

export type AttemptKind = "solve" | "partial" | "wrong";

interface MadeCall {
  name: string;
  args: Record<string, unknown>;
}

/** Calls the conversation's assistant messages made, in order; unparseable arguments do not count. */
function madeCalls(messages: readonly ChatMessage[]): MadeCall[] {
  const out: MadeCall[] = [];
  for (const m of messages) {
    if (m.role !== "assistant") continue;
    for (const tc of m.toolCalls) {
      try {
        const args = JSON.parse(tc.arguments) as unknown;
        if (args && typeof args === "object" && !Array.isArray(args))
          out.push({ name: tc.name, args: args as Record<string, unknown> });
      } catch {
        // A malformed call the agent could not run: as if it had not been made, so it is re-issued.
      }
    }
  }
  return out;
}

const str = (v: unknown): string => (typeof v === "string" ? v : "");

function attemptBody(command: string): string | undefined {
  const start = command.indexOf(`<<'${ATTEMPT_DELIMITER}'`);
  if (start < 0) return undefined;
  const bodyStart = command.indexOf("\n", start);
  const end = command.indexOf(`\n${ATTEMPT_DELIMITER}`, bodyStart);
  if (bodyStart < 0 || end < 0) return undefined;
  return command.slice(bodyStart + 1, end + 1);
}

/** What an earlier attempt was, from its script alone (whichever model wrote it). */
export function classifyAttempt(command: string, scenario: SimScenario): AttemptKind {
  const body = attemptBody(command)?.trimEnd();
  if (body !== undefined && scenario.solve !== undefined && body === scenario.solve.trimEnd()) return "solve";
  if (body !== undefined && scenario.partial !== undefined && body === scenario.partial.trimEnd())
    return "partial";
  return "wrong";
}

export function attemptCommand(index: number, script: string): string {
  const file = `/tmp/trajrl_attempt_${index + 1}.sh`;
  const body = script.endsWith("\n") ? script : `${script}\n`;
  return `cat > ${file} <<'${ATTEMPT_DELIMITER}'\n${body}${ATTEMPT_DELIMITER}\ncd /app && bash ${file}`;
}

/** A plausible attempt that fails visibly (non-zero exit, an error in the tool result). */
export function wrongScript(scenario: SimScenario, index: number): string {
  const slug = scenario.name.replace(/[^A-Za-z0-9]+/g, "_");
  const variants = [
    `set -euo pipefail\ncd /app\n# quick fix: reuse the helper the task presumably ships\npython3 /app/${slug}_helper.py --apply\n`,
    `set -euo pipefail\ncd /app\n# build the deliverable with the project's own tooling\n./configure --prefix=/app && make ${slug}\n`,
    `set -euo pipefail\ncd /app\n# run the generator, then validate the output\nbash /app/scripts/generate_${slug}.sh\ntest -s /app/${slug}.out\n`,
  ];
  return variants[index % variants.length]!;
}

/** The correct hint marker of a scenario, as an adviser writes it. */
export function hintLine(s: SimScenario): string {
  return `hint: ${s.name}/${s.hintDigest}`;
}

/** A correct hint for this scenario appears in a non-tool message (tool results could be planted). */
export function hasCorrectHint(messages: readonly ChatMessage[], s: SimScenario): boolean {
  for (const m of messages) {
    if (m.role === "tool") continue;
    for (const match of m.content.matchAll(HINT_RE))
      if (match[1] === s.name && match[2] === s.hintDigest) return true;
  }
  return false;
}

export function successProbability(skill: number, hinted: boolean, boost: number): number {
  return hinted ? 1 - (1 - skill) * (1 - boost) : skill;
}

const ASKS_FOR_ADVICE =
  /\b(give|write|provide|offer|share|suggest)\b[^\n]{0,60}\b(advice|notes?|hints?|suggestions?|review)\b/i;

/** An adviser/judge call: no tools, or a last non-first user/system message that asks for advice. */
export function isAdviceRequest(
  messages: readonly ChatMessage[],
  toolNames: readonly string[] | undefined,
): boolean {
  if (toolNames === undefined) return true;
  const last = messages[messages.length - 1];
  if (!last || (last.role !== "user" && last.role !== "system")) return false;
  const firstUser = messages.findIndex((m) => m.role === "user");
  if (messages.length - 1 === firstUser) return false;
  return ASKS_FOR_ADVICE.test(last.content) && !HINT_TEST.test(last.content);
}

const STEP_TEXT: Record<Step, string> = {
  read: "I'll start by reading the skill notes and the task instructions.",
  inspect: "Let me look at what is in /app before changing anything.",
  attempt_solve: "I have a plan: writing the solution as a script and running it from /app.",
  attempt_partial: "I have a plan: writing the solution as a script and running it from /app.",
  attempt_wrong: "I have a plan: writing the solution as a script and running it from /app.",
  verify: "The script ran; checking the result.",
  stop_done: "The deliverable is in place and the check looks right. Done.",
  stop_gave_up: "I could not complete the task: every attempt failed.",
  explore: "Exploring the environment to understand the task.",
  stop_unknown: "I looked around but could not work out how to complete this task.",
  advice_hint:
    "The reference approach applies here: write the deliverable in one script and run it from /app.",
  advice_generic:
    "Re-read INSTRUCTION.md, check the exact deliverable path and the edge cases before finishing.",
  chat: "Understood.",
};

const FILLER = [
  "The instructions are specific about the deliverable, so I will keep to them exactly.",
  "I should avoid touching files that the task does not mention.",
  "Edge cases matter here: empty input, large input and unusual characters.",
  "Keeping the solution to standard tools makes it robust offline.",
  "A small script is easier to check than a long chain of commands.",
  "I will verify the output once before finishing.",
  "The working directory is /app, so relative paths resolve there.",
  "If something fails, the error message should say why.",
  "Nothing here needs network access.",
  "The simplest approach that meets every requirement is the best one.",
  "Let me make sure the file permissions are right as well.",
  "The result must be deterministic across runs.",
];

/** Step text padded with deterministic filler to the model's verbosity (text tokens per turn). */
function turnText(step: Step, input: TurnInput, turn: number, budget: number): string {
  let text = STEP_TEXT[step];
  for (let i = 0; countTokens(text) < budget && i < 64; i++)
    text += ` ${pick(FILLER, input.seed, input.model, turn, step, i)}`;
  return text;
}

function call(name: string, args: Record<string, unknown>): PlannedToolCall {
  return { name, arguments: JSON.stringify(args) };
}

/** What every step of a turn's plan reads: the input, the model's profile, the turn, the scenario. */
interface TurnContext {
  input: TurnInput;
  model: ModelProfile;
  turn: number;
  scenario: SimScenario | undefined;
}

/** Decide this turn's answer. Pure: same input → same plan. */
export function planTurn(input: TurnInput): Plan {
  const { messages, profile } = input;
  const model: ModelProfile | undefined = profile.models[input.model];
  if (!model) throw new Error(`no profile for model ${input.model}`);
  const t: TurnContext = {
    input,
    model,
    turn: messages.filter((m) => m.role === "assistant").length,
    scenario: recogniseScenario(
      messages.filter((m) => m.role !== "assistant").map((m) => m.content),
      input.scenarios,
    ),
  };
  if (isAdviceRequest(messages, input.toolNames)) return planAdvice(t);
  return planWork(t);
}

/** An adviser's or judge's answer: a note, with a hint when its draw falls under its skill. */
function planAdvice(t: TurnContext): Plan {
  const { input, model, turn, scenario } = t;
  if (!scenario)
    return textPlan(
      t,
      input.toolNames === undefined && input.messages.length <= 2 ? "chat" : "advice_generic",
      24,
    );
  const u = draw(input.seed, scenario.name, turn, "advice");
  const correct = u < model.skill;
  const plan = textPlan(t, correct ? "advice_hint" : "advice_generic", Math.min(model.verbosity, 40));
  if (correct) plan.content = `${hintLine(scenario)}\n${plan.content}`;
  plan.decision = { index: turn, u, p: model.skill, hinted: false };
  return plan;
}

/** The agent's next move: read, explore or inspect, attempt, verify, stop; read off the calls made. */
function planWork(t: TurnContext): Plan {
  const { input, turn, scenario } = t;
  const tools = new Set(input.toolNames);
  const readCall = (path: string): PlannedToolCall =>
    tools.has("read_file") ? call("read_file", { path }) : call("terminal", { command: `cat ${path}` });

  if (!tools.has("terminal") && !tools.has("read_file")) return textPlan(t, "stop_unknown");
  if (turn >= MAX_TURNS) return textPlan(t, scenario ? "stop_gave_up" : "stop_unknown");

  const calls = madeCalls(input.messages);
  const commands = calls.filter((c) => c.name === "terminal").map((c) => str(c.args.command));
  const readInstruction =
    scenario !== undefined ||
    calls.some(
      (c) => str(c.args.path).includes("INSTRUCTION.md") || str(c.args.command).includes("INSTRUCTION.md"),
    );
  if (!readInstruction) return toolPlan(t, "read", [readCall(SKILL_PATH), readCall(INSTRUCTION_PATH)]);

  if (!scenario || !tools.has("terminal")) {
    const explored = commands.filter((c) => (EXPLORE_COMMANDS as readonly string[]).includes(c)).length;
    if (!tools.has("terminal") || explored >= EXPLORE_COMMANDS.length) return textPlan(t, "stop_unknown");
    return toolPlan(t, "explore", [call("terminal", { command: EXPLORE_COMMANDS[explored]! })]);
  }

  if (!commands.includes(INSPECT_COMMAND))
    return toolPlan(t, "inspect", [call("terminal", { command: INSPECT_COMMAND })]);

  const attempts: { kind: AttemptKind; at: number }[] = [];
  commands.forEach((c, at) => {
    if (c.includes(`<<'${ATTEMPT_DELIMITER}'`)) attempts.push({ kind: classifyAttempt(c, scenario), at });
  });
  const last = attempts[attempts.length - 1];
  if (last === undefined || (last.kind === "wrong" && attempts.length < input.profile.max_attempts))
    return planAttempt(t, scenario, attempts.length);
  if (last.kind === "wrong") return textPlan(t, "stop_gave_up");
  const verified = commands.some((c, at) => c === VERIFY_COMMAND && at > last.at);
  if (!verified) return toolPlan(t, "verify", [call("terminal", { command: VERIFY_COMMAND })]);
  return textPlan(t, "stop_done");
}

/** Attempt k: solve.sh when the draw falls under p, else partial.sh at partial_rate, else a wrong script. */
function planAttempt(t: TurnContext, scenario: SimScenario, k: number): Plan {
  const { input, model } = t;
  const { seed, profile } = input;
  const hinted = hasCorrectHint(input.messages, scenario);
  const p = scenario.solve === undefined ? 0 : successProbability(model.skill, hinted, profile.hint_boost);
  const u = draw(seed, scenario.name, k, "solve");
  let kind: AttemptKind;
  let script: string;
  if (u < p && scenario.solve !== undefined) {
    kind = "solve";
    script = scenario.solve;
  } else if (
    scenario.partial !== undefined &&
    draw(seed, scenario.name, k, "partial") < profile.partial_rate
  ) {
    kind = "partial";
    script = scenario.partial;
  } else {
    kind = "wrong";
    script = wrongScript(scenario, k);
  }
  return toolPlan(t, `attempt_${kind}`, [call("terminal", { command: attemptCommand(k, script) })], {
    index: k,
    u,
    p,
    hinted,
  });
}

/** A plan with text only (no tool calls), padded to `budget` tokens. */
function textPlan(t: TurnContext, step: Step, budget = t.model.verbosity): Plan {
  return {
    step,
    scenario: t.scenario?.name,
    content: turnText(step, t.input, t.turn, budget),
    toolCalls: [],
    malformed: false,
  };
}

/** A plan with tool calls; the first one's JSON broken at the model's malformed_tool_json_rate. */
function toolPlan(t: TurnContext, step: Step, calls: PlannedToolCall[], decision?: Plan["decision"]): Plan {
  const plan: Plan = { ...textPlan(t, step), toolCalls: calls };
  if (decision) plan.decision = decision;
  const scenarioKey = t.scenario?.name ?? "-";
  if (
    calls.length > 0 &&
    draw(t.input.seed, scenarioKey, t.turn, "malformed") < t.model.malformed_tool_json_rate
  ) {
    // Truncated JSON, as a model that stops one token early would write: the agent must repair or report.
    const first = calls[0]!;
    calls[0] = { name: first.name, arguments: first.arguments.slice(0, -1) };
    plan.malformed = true;
  }
  return plan;
}
