import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ENV_SCHEMA, LOCKED_ENV, loadConfig, lockedEnvWarning } from "../../src/config.js";
import { assertSubnetRules } from "../../src/daemon/index.js";
import { editDistance } from "../../src/env-typos.js";

const configError = (env: Record<string, string>): string => {
  try {
    loadConfig(env);
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error("the config loaded");
};

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

  it("a bad value is named with the value as written and what was expected (a secret's value never)", () => {
    expect(configError({ DEGRADED_AFTER_S: "30s" })).toBe(
      'invalid environment: DEGRADED_AFTER_S="30s" is not a number',
    );
    const m = configError({
      EVAL_CONCURRENCY: "1.5",
      METER_PORT: "70000",
      STATUS_PORT: "-1",
      NETWORK: "mainnet",
      TRAJECTORYRL_API_BASE_URL: "trajrl.com",
      IMAGE_CHANNEL: "a b",
    });
    expect(m).toContain('EVAL_CONCURRENCY="1.5" is not a whole number');
    expect(m).toContain('METER_PORT="70000" is above the maximum 65535');
    expect(m).toContain('STATUS_PORT="-1" is below the minimum 0');
    expect(m).toContain('NETWORK="mainnet" is not one of finney, test, local');
    expect(m).toContain('TRAJECTORYRL_API_BASE_URL="trajrl.com" is not a URL');
    expect(m).toContain('IMAGE_CHANNEL="a b" is not a tag');
    expect(m).not.toMatch(/received|expected/);
    // A value with quotes kept (an env file that does not strip them) shows them.
    expect(configError({ DEGRADED_AFTER_S: '"30"' })).toContain(
      'DEGRADED_AFTER_S="\\"30\\"" is not a number',
    );
    const secret = configError({ REGISTRY_PASSWORD: "hunter2", ENGINES: "name=b" });
    expect(secret).not.toContain("hunter2");
    expect(secret).toContain("ENGINES: engine 1 (name=b): needs url=");
  });

  it("warns on an EVAL_ENABLED value outside its words, still reading it as upstream does (off)", () => {
    const c = loadConfig({ EVAL_ENABLED: "ture" });
    expect(c.evaluation.enabled).toBe(false);
    expect(c.warnings).toEqual([
      'EVAL_ENABLED="ture" is not one of 1, true, yes, on (evaluate) or 0, false, no, off: read as off, weight-only (upstream\'s rule)',
    ]);
    for (const v of ["1", "On", " no ", "", "FALSE"])
      expect(loadConfig({ EVAL_ENABLED: v }).warnings).toEqual([]);
  });

  it("warns on names that look like a setting and are not one, with a did-you-mean", () => {
    const w = loadConfig({
      EVAL_ENABLE: "1",
      eval_enabled: "1",
      WALLET_HOTKY: "x",
      LLM_KEY: "sk-x",
      ENGY_SIM_SEEDS: "3",
      TRAJECTORYRL_API_URL: "https://x",
    }).warnings;
    expect(w).toEqual([
      "EVAL_ENABLE is not a setting of this validator and is ignored: did you mean EVAL_ENABLED?",
      "eval_enabled is not a setting of this validator and is ignored: did you mean EVAL_ENABLED?",
      "WALLET_HOTKY is not a setting of this validator and is ignored: did you mean WALLET_HOTKEY?",
      "LLM_KEY is not a setting of this validator and is ignored: did you mean LLM_API_KEY?",
      "ENGY_SIM_SEEDS is not a setting of this validator and is ignored: did you mean ENGY_SIM_SEED?",
      "TRAJECTORYRL_API_URL is not a setting of this validator and is ignored: did you mean TRAJECTORYRL_API_BASE_URL?",
    ]);
    // What a shell, Node, Docker, the image and the test runner set is not a typo.
    const ordinary = {
      PATH: "/usr/bin",
      HOME: "/root",
      HOSTNAME: "abc",
      TERM: "xterm",
      PWD: "/",
      OLDPWD: "/",
      SHLVL: "1",
      LANG: "C.UTF-8",
      LC_ALL: "C",
      TZ: "UTC",
      USER: "root",
      SHELL: "/bin/sh",
      NODE_ENV: "production",
      NODE_OPTIONS: "",
      DOCKER_HOST: "unix:///x",
      DOCKER_CONFIG: "/x",
      DEBIAN_FRONTEND: "noninteractive",
      SSH_AUTH_SOCK: "/x",
      VALIDATOR_UID: "0",
      TRAJRL_HOST_WALLETS_DIR: "/x",
      TRAJRL_IMAGE: "x",
      TRAJRL_AUTO_UPDATE: "false",
      TRAJRL_DEBUG: "1",
      VITEST: "true",
      VITEST_POOL_ID: "1",
      VITEST_WORKER_ID: "1",
      npm_config_cache: "/x",
      INIT_CWD: "/x",
      COLORTERM: "truecolor",
      XDG_RUNTIME_DIR: "/run",
      TMPDIR: "/tmp",
      LOGNAME: "root",
      MAIL: "/x",
      EDITOR: "vi",
      PAGER: "less",
      HTTP_PROXY: "",
      NO_PROXY: "",
      LS_COLORS: "",
      ...Object.fromEntries(Object.keys(ENV_SCHEMA).map((k) => [k, ""])),
      LLM_MODEL: "x",
    };
    expect(loadConfig(ordinary).warnings).toEqual([]);
    expect(editDistance("EVAL_ENABLE", "EVAL_ENABLED")).toBe(1);
    expect(editDistance("WALLET_HOTKY", "WALLET_HOTKEY")).toBe(1);
    expect(editDistance("NETUDI", "NETUID")).toBe(1);
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
