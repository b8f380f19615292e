import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ENV_SCHEMA, loadConfig } from "../../src/config.js";

describe("config", () => {
  it("has defaults for an empty environment, simulator on", () => {
    const c = loadConfig({});
    expect(c.llm.simulated).toBe(true);
    expect(c.dbPath.endsWith("/data/validator.sqlite")).toBe(true);
    expect(c.evaluation.concurrency).toBe(3);
    expect(c.chain.netuid).toBe(11);
    expect(c.status.host).toBe("127.0.0.1");
    expect(c.platform.baseUrl).toBe("https://trajrl.com");
  });

  it("weight-only by default, with the plain-mean cross-check (upstream's defaults)", () => {
    expect(loadConfig({}).evaluation.enabled).toBe(false);
    expect(loadConfig({}).chain.stakeWeighted).toBe(false);
    expect(loadConfig({ STAKE_WEIGHTED_CONSENSUS: "true" }).chain.stakeWeighted).toBe(true);
  });

  // tests/test_validator_modes.py TestEvalEnabledConfig, case for case.
  it.each(["1", "true", "TRUE", "yes", "on", " 1 "])("EVAL_ENABLED=%j evaluates", (value) => {
    expect(loadConfig({ EVAL_ENABLED: value }).evaluation.enabled).toBe(true);
  });
  it.each(["0", "", "false", "no", "off", "2"])("EVAL_ENABLED=%j stays weight-only", (value) => {
    expect(loadConfig({ EVAL_ENABLED: value }).evaluation.enabled).toBe(false);
  });
  it("EVAL_ENABLED reads any case and surrounding space, and never fails the config", () => {
    expect(loadConfig({ EVAL_ENABLED: "\tYes\n" }).evaluation.enabled).toBe(true);
    expect(loadConfig({ EVAL_ENABLED: "On" }).evaluation.enabled).toBe(true);
    expect(loadConfig({ EVAL_ENABLED: "enabled" }).evaluation.enabled).toBe(false);
  });

  it("an API key turns the simulator off; empty strings mean unset", () => {
    expect(loadConfig({ LLM_API_KEY: "sk-x" }).llm.simulated).toBe(false);
    expect(loadConfig({ LLM_API_KEY: "", EVAL_CONCURRENCY: "" }).llm.simulated).toBe(true);
  });

  it("names every bad variable in one error", () => {
    expect(() => loadConfig({ EVAL_CONCURRENCY: "zero", NETWORK: "mainnet", METER_PORT: "70000" })).toThrow(
      /EVAL_CONCURRENCY.*NETWORK.*METER_PORT|EVAL_CONCURRENCY|NETWORK/,
    );
    try {
      loadConfig({ EVAL_CONCURRENCY: "zero", NETWORK: "mainnet" });
    } catch (e) {
      expect((e as Error).message).toContain("EVAL_CONCURRENCY");
      expect((e as Error).message).toContain("NETWORK");
      expect((e as { code: string }).code).toBe("invalid_config");
    }
  });

  it("derives the chain endpoint from NETWORK unless set", () => {
    expect(loadConfig({ NETWORK: "local" }).chain.endpoint).toBe("ws://127.0.0.1:9944");
    expect(loadConfig({ NETWORK: "test", SUBTENSOR_ENDPOINT: "ws://127.0.0.1:1" }).chain.endpoint).toBe(
      "ws://127.0.0.1:1",
    );
  });

  it("every variable is documented in .env.validator.example", () => {
    const example = readFileSync(new URL("../../.env.validator.example", import.meta.url), "utf8");
    for (const name of Object.keys(ENV_SCHEMA))
      expect(example, name).toMatch(new RegExp(`^#? ?${name}=`, "m"));
  });

  it("every variable has a row in the README's configuration table", () => {
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
    for (const name of Object.keys(ENV_SCHEMA)) expect(readme, name).toContain(`| \`${name}\` |`);
  });
});
