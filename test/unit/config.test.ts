import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ENV_SCHEMA, LOCKED_ENV, loadConfig, lockedEnvWarning } from "../../src/config.js";
import { assertSubnetRules } from "../../src/daemon/index.js";

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

  it("the provider's deadline is upstream's: 900 s per attempt (ClientTimeout(total=900), issue 31 item 4)", () => {
    expect(loadConfig({}).llm.upstreamTimeoutMs).toBe(900_000);
    expect(loadConfig({ UPSTREAM_TIMEOUT_S: "120" }).llm.upstreamTimeoutMs).toBe(120_000);
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

  // Upstream's tests/test_config.py (59c1007e), case for case: the models and endpoints are locked.
  describe("models and endpoints locked in code", () => {
    const key = { LLM_API_KEY: "sk-operator-secret" };
    it("LLM_MODEL (and our DEFAULT_MODEL) override is ignored", () => {
      expect(loadConfig({ ...key, LLM_MODEL: "operator-picked-other-model" }).llm.defaultModel).toBe(
        "qwen3.8-27b",
      );
      expect(loadConfig({ ...key, DEFAULT_MODEL: "kimi-k3" }).llm.defaultModel).toBe("qwen3.8-27b");
    });
    it("LLM_BASE_URL override is ignored", () => {
      expect(loadConfig({ ...key, LLM_BASE_URL: "https://openrouter.ai/api/v1" }).llm.baseUrl).toBe(
        "https://api.engy.ai/v1",
      );
    });
    it("JUDGE_MODEL override is ignored, and the judge is not the testee", () => {
      const c = loadConfig({ ...key, JUDGE_MODEL: "operator-picked-judge-model" });
      expect(c.llm.judgeModel).toBe("glm-5.2");
      expect(c.llm.judgeModel).not.toBe(c.llm.defaultModel);
    });
    it("JUDGE_BASE_URL override is ignored", () => {
      expect(loadConfig({ ...key, JUDGE_BASE_URL: "https://openrouter.ai/api/v1" }).llm.judgeBaseUrl).toBe(
        "https://api.engy.ai/v1",
      );
    });
    it("LLM_API_KEY is still read from the environment", () => {
      expect(loadConfig(key).llm.apiKey).toBe("sk-operator-secret");
    });
    it("warns, naming each locked variable that was set, that it is ignored", () => {
      const c = loadConfig({ ...key, LLM_MODEL: "operator-picked-other-model", JUDGE_BASE_URL: "x" });
      expect(c.ignoredEnv).toEqual(["LLM_MODEL", "JUDGE_BASE_URL"]);
      const w = lockedEnvWarning(c)!;
      expect(w).toContain("LLM_MODEL");
      expect(w).toContain("JUDGE_BASE_URL");
      expect(w.toLowerCase()).toContain("ignored");
      expect(lockedEnvWarning(loadConfig(key))).toBeNull();
      expect(loadConfig({ ...key, LLM_MODEL: "  " }).ignoredEnv).toEqual([]);
    });
    it("a pack of SKILL.md alone is pinned to qwen3.8-27b on every network", () => {
      for (const NETWORK of ["finney", "test", "local"])
        expect(loadConfig({ ...key, NETWORK, DEFAULT_MODEL: "glm-5.3-flash" }).llm.defaultModel).toBe(
          "qwen3.8-27b",
        );
    });
    it("the offline override applies only where no vote can come of it", () => {
      const local = loadConfig({
        ...key,
        NETWORK: "local",
        OFFLINE_LLM_BASE_URL: "http://127.0.0.1:9/v1/",
        OFFLINE_DEFAULT_MODEL: "kimi-k3",
      });
      expect(local.llm).toMatchObject({
        baseUrl: "http://127.0.0.1:9/v1",
        defaultModel: "kimi-k3",
        unlocked: true,
      });
      expect(() => assertSubnetRules(local)).not.toThrow();
      // Commands that never vote (eval, check, tests) read it on any network; a daemon on a real
      // network refuses it, with a key or on the simulator.
      for (const env of [
        { OFFLINE_DEFAULT_MODEL: "kimi-k3" },
        { ...key, NETWORK: "test", OFFLINE_LLM_BASE_URL: "http://127.0.0.1:9/v1" },
      ]) {
        const c = loadConfig(env);
        expect(c.llm.unlocked).toBe(true);
        expect(() => assertSubnetRules(c)).toThrow(
          /OFFLINE_LLM_BASE_URL \/ OFFLINE_DEFAULT_MODEL cannot be used on (finney|test)/,
        );
      }
      expect(loadConfig(key).llm.unlocked).toBe(false);
      expect(() => assertSubnetRules(loadConfig(key))).not.toThrow();
    });
    it("the strict provenance rule is local: a daemon on a real network refuses it", () => {
      expect(() => assertSubnetRules(loadConfig({ ...key, STRICT_PROVENANCE: "true" }))).toThrow(
        /STRICT_PROVENANCE cannot be used on finney/,
      );
      expect(() =>
        assertSubnetRules(loadConfig({ ...key, NETWORK: "local", STRICT_PROVENANCE: "true" })),
      ).not.toThrow();
      expect(() => assertSubnetRules(loadConfig(key))).not.toThrow();
    });
    it("a daemon that evaluates on a real network needs the provider key: the simulator never votes", () => {
      for (const NETWORK of ["finney", "test"])
        expect(() => assertSubnetRules(loadConfig({ NETWORK, EVAL_ENABLED: "1" }))).toThrow(
          new RegExp(`EVAL_ENABLED is on for ${NETWORK} but LLM_API_KEY is not set`),
        );
      // Weight-only needs no provider; a key, or a local chain, lifts the refusal.
      expect(() => assertSubnetRules(loadConfig({ EVAL_ENABLED: "0" }))).not.toThrow();
      expect(() => assertSubnetRules(loadConfig({ ...key, EVAL_ENABLED: "1" }))).not.toThrow();
      expect(() => assertSubnetRules(loadConfig({ NETWORK: "local", EVAL_ENABLED: "1" }))).not.toThrow();
    });
  });

  it("every variable is documented in .env.validator.example", () => {
    const example = readFileSync(new URL("../../.env.validator.example", import.meta.url), "utf8");
    for (const name of Object.keys(ENV_SCHEMA))
      expect(example, name).toMatch(new RegExp(`^#? ?${name}=`, "m"));
    for (const name of LOCKED_ENV) expect(example, name).toContain(name);
  });

  it("every variable has a row in the README's configuration table", () => {
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
    for (const name of Object.keys(ENV_SCHEMA)) expect(readme, name).toContain(`| \`${name}\` |`);
    for (const name of LOCKED_ENV) expect(readme, name).toContain(`\`${name}\``);
  });
});
