/**
 * `hermes` (agent/src/hermes.ts), its pure parts: upstream's command lines parse as Hermes parses
 * them, `--version` answers what upstream's harness probe can read, the endpoint comes from the
 * container's environment or the entrypoint's config.yaml, terminal commands see no credential,
 * and export lines are Python's `json.dumps(ensure_ascii=False)` (floats in Python's repr).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { AGENT_VERSION } from "../../agent/contract.js";
import {
  hermesCommandEnv,
  hermesHome,
  newSessionId,
  PyFloat,
  parseHermesArgs,
  parseHermesConfig,
  pyFloat,
  pyJson,
  resolveEndpoint,
  versionLine,
} from "../../agent/src/hermes.js";
import { pyFloatRepr } from "../../src/pack/index.js";

// What upstream's validator runs (sandbox_harness.py `_run_episode`): the prompt, then these flags.
const UPSTREAM_PROMPT =
  "Read /workspace/SKILL.md for your approach. Read /workspace/INSTRUCTION.md for the task. " +
  "The task's working directory is /app/. /app and /workspace/learned are writable scratch; " +
  "everything else is read-only. Solve the task. Do not modify SKILL.md.";

describe("hermes command line", () => {
  it("parses upstream's chat invocation", () => {
    const cmd = parseHermesArgs([
      "chat",
      "-q",
      UPSTREAM_PROMPT,
      "-m",
      "auto",
      "-t",
      "terminal,file,code_execution,memory",
      "--quiet",
      "--yolo",
    ]);
    expect(cmd).toEqual({
      kind: "chat",
      query: UPSTREAM_PROMPT,
      model: "auto",
      toolsets: ["terminal", "file", "code_execution", "memory"],
      quiet: true,
      yolo: true,
    });
  });

  it("takes long flags, --flag=value, and a turn limit", () => {
    expect(
      parseHermesArgs(["chat", "--query=do it", "--model", "m1", "--toolsets=terminal", "--max-turns", "7"]),
    ).toMatchObject({ kind: "chat", query: "do it", model: "m1", toolsets: ["terminal"], maxTurns: 7 });
  });

  it("refuses what Hermes' argparse refuses, and an interactive chat", () => {
    for (const argv of [
      [],
      ["chat"],
      ["chat", "-q"],
      ["chat", "-q", "  "],
      ["chat", "-q", "x", "--frobnicate"],
      ["chat", "-q", "x", "stray"],
      ["chat", "-q", "x", "--max-turns", "0"],
      ["chat", "-q", "x", "--yolo=1"],
      ["sessions"],
      ["sessions", "list"],
      ["sessions", "export"],
      ["sessions", "export", "a", "b"],
      ["gateway"],
    ])
      expect(parseHermesArgs(argv).kind, argv.join(" ")).toBe("usage_error");
  });

  it("parses the export upstream runs in-band and post mortem", () => {
    expect(parseHermesArgs(["sessions", "export", "/workspace/turns.jsonl"])).toEqual({
      kind: "export",
      output: "/workspace/turns.jsonl",
    });
    expect(parseHermesArgs(["sessions", "export", "-", "--session-id", "2026", "--source", "cli"])).toEqual({
      kind: "export",
      output: "-",
      sessionId: "2026",
      source: "cli",
    });
    expect(parseHermesArgs(["--version"]).kind).toBe("version");
    expect(parseHermesArgs(["version"]).kind).toBe("version");
  });

  it("answers --version with a line upstream's harness probe reads as our name and version", () => {
    const first = versionLine().split("\n")[0]!;
    // trajrl_bench.cli `_harness_identity`: the leading word, then the first x.y(.z)(suffix).
    const name = /^\s*([A-Za-z][\w-]*)/.exec(first)?.[1];
    const version = /v?(\d+\.\d+(?:\.\d+)?(?:[.\-+][\w.]+)?)/.exec(first)?.[1];
    expect(name).toBe("trajrl-agent");
    expect(version).toBe(AGENT_VERSION);
    expect(first).toContain("hermes-compatible");
  });
});

describe("hermes endpoint and home", () => {
  // What docker/images/sandbox-agent/entrypoint.sh writes.
  const CONFIG = [
    "model:",
    '  provider: "custom"',
    '  default: "auto"',
    '  base_url: "http://policy:8800/v1"',
    '  api_key: "ep-token"',
    "terminal:",
    '  default: "not-the-model"',
    "",
  ].join("\n");

  it("reads the model block of the entrypoint's config.yaml", () => {
    expect(parseHermesConfig(CONFIG)).toEqual({
      model: "auto",
      baseUrl: "http://policy:8800/v1",
      apiKey: "ep-token",
    });
    expect(parseHermesConfig("")).toEqual({});
    expect(parseHermesConfig('model:\n  api_key: ""\n')).toEqual({});
  });

  it("prefers the container's environment, then the file; -m names the model; OPENAI_API_KEY last", () => {
    const file = parseHermesConfig(CONFIG);
    expect(resolveEndpoint({}, file)).toEqual({
      baseUrl: "http://policy:8800/v1",
      model: "auto",
      apiKey: "ep-token",
    });
    expect(
      resolveEndpoint(
        { LLM_BASE_URL: "http://x:1/v1", LLM_MODEL: "env-model", LLM_API_KEY: "k1", OPENAI_API_KEY: "k2" },
        file,
        "flag-model",
      ),
    ).toEqual({ baseUrl: "http://x:1/v1", model: "flag-model", apiKey: "k1" });
    // Upstream's exec sets OPENAI_API_KEY to the episode token; the container has LLM_API_KEY.
    expect(resolveEndpoint({ OPENAI_API_KEY: "k2", LLM_API_KEY: " " }, {})).toEqual({
      baseUrl: undefined,
      model: undefined,
      apiKey: "k2",
    });
  });

  it("keeps sessions under HERMES_HOME, else ~/.hermes, as Hermes does", () => {
    expect(hermesHome({ HERMES_HOME: "/opt/data", HOME: "/root" })).toBe("/opt/data");
    expect(hermesHome({ HOME: "/home/u" })).toBe("/home/u/.hermes");
    expect(hermesHome({})).toBe("/opt/data");
  });

  it("names sessions as Hermes does: local start time and a random suffix", () => {
    expect(newSessionId(new Date(2026, 4, 7, 9, 3, 5), "a1b2c3")).toBe("20260507_090305_a1b2c3");
    expect(newSessionId(new Date())).toMatch(/^\d{8}_\d{6}_[0-9a-f]{6}$/);
  });

  it("gives terminal commands no credential", () => {
    const env = hermesCommandEnv({
      PATH: "/usr/bin",
      LLM_API_KEY: "a",
      OPENAI_API_KEY: "b",
      OPENROUTER_API_KEY: "c",
      ANTHROPIC_API_KEY: "d",
      LLM_BASE_URL: "http://policy:8800/v1",
    });
    expect(Object.keys(env).filter((k) => k.endsWith("API_KEY"))).toEqual([]);
    expect(env.PATH).toBe("/usr/bin");
    expect(env.LLM_BASE_URL).toBe("http://policy:8800/v1");
  });
});

describe("Python's json.dumps for export lines", () => {
  it("prints floats exactly as Python's repr (checked against the pack module's repr)", () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (x) => {
        expect(pyFloat(x)).toBe(pyFloatRepr(x));
      }),
      { numRuns: 5000 },
    );
    for (const x of [1, 1e-5, 1e-4, 1e16, 1e15, 0.1, 123456789.123, 1796418172.1131701, -2.5e-7])
      expect(pyFloat(x)).toBe(pyFloatRepr(x));
  });

  it("matches json.dumps(ensure_ascii=False) on Python's own output", () => {
    // python3 -c 'import json; print(json.dumps({...}, ensure_ascii=False))'
    const value = {
      a: new PyFloat(1),
      b: new PyFloat(1e-5),
      c: new PyFloat(1e16),
      d: new PyFloat(123456789.123),
      e: 'é\u0001\n"\\\u2028',
      f: [null, true, new PyFloat(0.1)],
      g: {},
      h: 42,
    };
    expect(pyJson(value)).toBe(
      '{"a": 1.0, "b": 1e-05, "c": 1e+16, "d": 123456789.123, "e": "é\\u0001\\n\\"\\\\\u2028", "f": [null, true, 0.1], "g": {}, "h": 42}',
    );
  });
});
