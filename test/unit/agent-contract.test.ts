import { describe, expect, it } from "vitest";
import {
  AGENT_BASE_CONTEXT,
  AGENT_ENV_DEFAULTS,
  agentCommandArgv,
  agentEnv,
  DEFAULT_AGENT_COMMAND,
  parseTurnsJsonl,
} from "../../agent/contract.js";
import { AgentConfigError, commandEnv, readAgentEnv } from "../../agent/src/env.js";
import { SYSTEM_PROMPT, taskPrompt } from "../../agent/src/prompts.js";

describe("agent contract", () => {
  it("runs the default command directly (the agent is the signalled process)", () => {
    expect(DEFAULT_AGENT_COMMAND).toBe("node /opt/trajrl/agent.js");
    expect(agentCommandArgv()).toEqual(["node", "/opt/trajrl/agent.js"]);
    expect(agentCommandArgv("  hermes   run  ")).toEqual(["hermes", "run"]);
  });

  it("runs a template with shell syntax under /bin/sh -c", () => {
    const t = 'cd /app && exec hermes --model "$LLM_MODEL"';
    expect(agentCommandArgv(t)).toEqual(["/bin/sh", "-c", t]);
    expect(agentCommandArgv("FOO=1 node x.js")).toEqual(["/bin/sh", "-c", "FOO=1 node x.js"]);
    expect(() => agentCommandArgv("   ")).toThrow(/empty/);
  });

  it("builds the container environment from options, key only when given", () => {
    expect(agentEnv()).toEqual([
      "LLM_BASE_URL=http://policy:8800/v1",
      "LLM_MODEL=auto",
      "AGENT_MAX_TURNS=90",
      "AGENT_WORKDIR=/app",
      "AGENT_WORKSPACE=/workspace",
      "AGENT_TOOL_TIMEOUT_S=120",
      "AGENT_OUTPUT_CAP=16384",
    ]);
    const env = agentEnv({ llmApiKey: "k", maxTurns: 5, turnsFile: "/workspace/t.jsonl" });
    expect(env).toContain("LLM_API_KEY=k");
    expect(env).toContain("AGENT_MAX_TURNS=5");
    expect(env).toContain("AGENT_TURNS_FILE=/workspace/t.jsonl");
  });

  it("names the base image's build context", () => {
    expect(AGENT_BASE_CONTEXT).toEqual({
      dockerfileDir: "docker/images/agent-base",
      dockerfile: "Dockerfile",
      extra: [{ from: "agent/dist/agent.js", to: "agent.js" }],
    });
  });

  it("reads a turns.jsonl torn by SIGKILL: complete records kept, the torn line counted", () => {
    const text = [
      JSON.stringify({ type: "session", session_id: "s" }),
      JSON.stringify({ type: "turn", turn: 1 }),
      JSON.stringify({ type: "turn", turn: 2 }),
      '{"type":"turn","turn":3,"messa',
    ].join("\n");
    const p = parseTurnsJsonl(text);
    expect(p.session?.session_id).toBe("s");
    expect(p.turns.map((t) => t.turn)).toEqual([1, 2]);
    expect(p.summary).toBeUndefined();
    expect(p.invalidLines).toBe(1);
    const done = parseTurnsJsonl(
      `${text.split("\n").slice(0, 3).join("\n")}\n{"type":"summary","reason":"completed"}\n`,
    );
    expect(done.summary?.reason).toBe("completed");
    expect(done.invalidLines).toBe(0);
  });
});

describe("agent environment", () => {
  it("has the documented defaults", () => {
    const c = readAgentEnv({});
    expect(c).toEqual({
      baseUrl: "http://policy:8800/v1",
      model: "auto",
      apiKey: undefined,
      maxTurns: 90,
      workdir: "/app",
      workspace: "/workspace",
      turnsFile: "/workspace/turns.jsonl",
      transcriptFile: "/workspace/transcript.txt",
      toolTimeoutS: 120,
      outputCap: 16384,
      llmTimeoutMs: 300_000,
      llmRetries: 4,
      retryBaseMs: 1000,
    });
    expect(AGENT_ENV_DEFAULTS.AGENT_MAX_TURNS).toBe(90);
  });

  it("derives the log files from the workspace, strips a trailing slash of the URL, treats blanks as unset", () => {
    const c = readAgentEnv({
      LLM_BASE_URL: "http://127.0.0.1:9/v1/",
      AGENT_WORKSPACE: "/tmp/ws",
      LLM_API_KEY: " ",
      AGENT_MAX_TURNS: "",
    });
    expect(c.baseUrl).toBe("http://127.0.0.1:9/v1");
    expect(c.turnsFile).toBe("/tmp/ws/turns.jsonl");
    expect(c.transcriptFile).toBe("/tmp/ws/transcript.txt");
    expect(c.apiKey).toBeUndefined();
    expect(c.maxTurns).toBe(90);
  });

  it("names every bad variable in one error", () => {
    try {
      readAgentEnv({ LLM_BASE_URL: "policy:8800", AGENT_MAX_TURNS: "0", AGENT_OUTPUT_CAP: "lots" });
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(AgentConfigError);
      const m = (e as Error).message;
      expect(m).toContain("LLM_BASE_URL");
      expect(m).toContain("AGENT_MAX_TURNS");
      expect(m).toContain("AGENT_OUTPUT_CAP");
    }
  });

  it("keeps the model key out of command environments", () => {
    const env = commandEnv({ LLM_API_KEY: "sk", PATH: "/bin" });
    expect(env.LLM_API_KEY).toBeUndefined();
    expect(env).toMatchObject({ PATH: "/bin", PAGER: "cat", GIT_PAGER: "cat" });
  });

  it("opens every session with the same system prompt and a one-line task prompt", () => {
    expect(SYSTEM_PROMPT).toMatch(/terminal/);
    expect(taskPrompt("/workspace/")).toBe(
      "Read /workspace/SKILL.md and /workspace/INSTRUCTION.md, then complete the task described in /workspace/INSTRUCTION.md.",
    );
    expect(taskPrompt("/workspace")).not.toContain("\n");
  });
});
