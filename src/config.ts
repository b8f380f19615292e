/**
 * The only reader of process.env. Every variable is parsed once, here, with zod, into a
 * typed Config. Defaults match `.env.validator.example`; keep the two in step
 * (test/unit/config.test.ts checks that every variable here is documented there).
 */
import { homedir } from "node:os";
import { resolve } from "node:path";
import { z } from "zod";
import { nearMissNames } from "./env-typos.js";
import { InputError } from "./errors.js";
import { isSecretKey } from "./log.js";
import { LOCKED_JUDGE_MODEL, LOCKED_LLM_BASE_URL, LOCKED_TESTEE_MODEL } from "./subnet.js";

/**
 * EPISODE_RUNTIME: the OCI runtime of the containers that run miners' and models' code. `auto` =
 * gVisor where the engine has it, runc (with a warning) where not (src/sandbox/runtime.ts resolves it).
 */
export const EPISODE_RUNTIME_SETTINGS = ["auto", "runsc", "runc"] as const;
export type EpisodeRuntimeSetting = (typeof EPISODE_RUNTIME_SETTINGS)[number];

const bool = z
  .enum(["1", "0", "true", "false", "yes", "no", "on", "off", ""])
  .transform((v) => v === "1" || v === "true" || v === "yes" || v === "on");
const SWITCH_ON = ["1", "true", "yes", "on"];
const SWITCH_OFF = ["0", "false", "no", "off"];
/**
 * A switch read as upstream reads EVAL_ENABLED (tests/test_validator_modes.py): on for 1, true,
 * yes, on (trimmed, any case); off for anything else, "2" and "enabled" included (a warning names
 * a value outside these words: configWarnings).
 */
const upstreamSwitch = z
  .string()
  .optional()
  .transform((v) => SWITCH_ON.includes((v ?? "").trim().toLowerCase()));
const int = (min: number, max = Number.MAX_SAFE_INTEGER) => z.coerce.number().int().min(min).max(max);
const num = (min: number, max = Number.MAX_SAFE_INTEGER) => z.coerce.number().min(min).max(max);
const url = z.string().url();
const optional = <T extends z.ZodTypeAny>(s: T) =>
  z.preprocess((v) => (v === "" || v === undefined ? undefined : v), s.optional());

/** Each entry: env var name → schema with default. Grouped as in the example file. */
export const ENV_SCHEMA = {
  // General
  DATA_DIR: z.string().default("./data"),
  LOG_LEVEL: z
    .string()
    .transform((s) => s.toLowerCase())
    .pipe(z.enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"]))
    .default("info"),
  // LLM provider (Engy)
  LLM_API_KEY: optional(z.string().min(1)),
  // The provider's endpoint and the testee default are locked in code (src/subnet.ts); these two
  // replace them only in runs that can never vote (tests, eval, a daemon on NETWORK=local).
  OFFLINE_LLM_BASE_URL: optional(url),
  OFFLINE_DEFAULT_MODEL: optional(z.string().min(1)),
  EPISODE_CAP_USD: num(0.000001, 1000).default(0.3),
  // One provider attempt's deadline, head and body: upstream's ClientTimeout(total=900).
  UPSTREAM_TIMEOUT_S: num(1, 3600).default(900),
  // Engy simulator (used when LLM_API_KEY is unset)
  ENGY_SIM_SEED: int(0).default(11),
  ENGY_SIM_PROFILE: optional(z.string()),
  ENGY_SIM_LATENCY_SCALE: num(0, 100).default(0.02),
  // Meter
  METER_PORT: int(1, 65535).default(8790),
  METER_HOST: z.string().default("127.0.0.1"),
  // Bittensor
  NETWORK: z.enum(["finney", "test", "local"]).default("finney"),
  NETUID: int(0, 65535).default(11),
  SUBTENSOR_ENDPOINT: optional(z.string()),
  WALLET_NAME: z.string().default("validator"),
  WALLET_HOTKEY: z.string().default("default"),
  WALLET_PATH: z.string().default("~/.bittensor/wallets"),
  WEIGHTS_INTERVAL_S: int(1).default(60),
  WEIGHTS_VERSION_KEY: optional(int(0)),
  STAKE_WEIGHTED_CONSENSUS: bool.default(false),
  // Platform
  TRAJECTORYRL_API_BASE_URL: url.default("https://trajrl.com"),
  EVAL_POLL_INTERVAL_S: num(0.1, 3600).default(10),
  HEARTBEAT_INTERVAL_S: num(1, 86400).default(600),
  WINNER_CACHE_TTL_S: int(1).default(86_400),
  // Evaluation and sandbox
  EVAL_ENABLED: upstreamSwitch,
  EVAL_CONCURRENCY: int(1, 64).default(3),
  SPEC_NUMBER: optional(int(0)),
  SUITE: optional(z.string().regex(/^[a-z][a-z0-9-]{0,31}$/, "a suite name of scenarios/suites.json")),
  SCENARIOS_DIR: z.string().default("./scenarios"),
  AGENT_IMAGE: optional(z.string()),
  AGENT_COMMAND: optional(z.string()),
  SIDECAR_IMAGE: optional(z.string()),
  // The subnet's benchmark (trajrl-bench) from a registry
  BENCH_SOURCE: optional(z.enum(["registry", "builtin"])),
  BENCH_IMAGE: optional(z.string().regex(/^[^\s]+$/, "an image reference")),
  IMAGE_CHANNEL: z
    .string()
    .regex(/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/, "a tag")
    .default("latest"),
  VERIFIER_NETWORK: optional(z.enum(["bridge", "none"])),
  SUBNET_SPECS_FILE: optional(z.string()),
  REGISTRY_USERNAME: optional(z.string()),
  REGISTRY_PASSWORD: optional(z.string()),
  STRICT_PROVENANCE: bool.default(false),
  EPISODE_SUBNET_POOL: z.string().default("10.213.0.0/16"),
  DOCKER_SOCKET: z.string().default("/var/run/docker.sock"),
  DAEMON_IN_CONTAINER: optional(bool),
  EPISODE_RUNTIME: z.enum(EPISODE_RUNTIME_SETTINGS).default("auto"),
  // The engine pool: episodes spread over several Docker engines (README, "Several hosts")
  ENGINES: optional(
    z.string().transform((text, ctx) => {
      const r = parseEngineList(text);
      for (const p of r.problems) ctx.addIssue({ code: "custom", message: p });
      return r.engines;
    }),
  ),
  // Policy sidecar, host side (`policy serve`, sidecar tests): a python3 that imports aiohttp and httpx
  TRAJRL_PYTHON: optional(z.string().min(1)),
  // Status page
  STATUS_HOST: z.string().default("127.0.0.1"),
  STATUS_PORT: int(0, 65535).default(8080),
  DEGRADED_AFTER_S: int(1, 86_400).default(300),
} as const;

export type EnvName = keyof typeof ENV_SCHEMA;

/**
 * Upstream's operator variables for the models and endpoints, locked in code since PR #315
 * (`_LOCKED_LLM_ENV_VARS`, plus our own `DEFAULT_MODEL`): read only to say they are ignored.
 */
export const LOCKED_ENV = [
  "LLM_MODEL",
  "LLM_BASE_URL",
  "JUDGE_MODEL",
  "JUDGE_BASE_URL",
  "DEFAULT_MODEL",
] as const;

/** One engine of the pool, as ENGINES lists it (src/pool places episodes on them). */
export interface EngineConfig {
  /** Short name: logs, the status page, /metrics, `engines drain NAME`. */
  name: string;
  /** unix:///path, tcp://host:port (TLS), ssh://user@host[:port]; `local` = unix://DOCKER_SOCKET. */
  url: string;
  /** Episodes at once on this engine; undefined (the default engine only): the evaluation's concurrency. */
  slots: number | undefined;
  /** tcp://: directory with ca.pem, cert.pem, key.pem (Docker's client layout). */
  tlsDir?: string;
  /** ssh://: private key file (else the SSH agent). */
  sshKey?: string;
}

const ENGINE_NAME = /^[a-z0-9][a-z0-9_-]{0,30}$/;
const ENGINE_KEYS = new Set(["name", "url", "slots", "tls", "ssh_key"]);

/**
 * ENGINES (pure): entries separated by `;` or new lines, each `key=value` words —
 * `name=b url=tcp://10.0.0.12:2376 slots=4 tls=/etc/trajrl/engines/b`. Every problem is returned,
 * each naming its entry, so one message can list them all.
 */
export function parseEngineList(text: string): { engines: EngineConfig[]; problems: string[] } {
  const engines: EngineConfig[] = [];
  const problems: string[] = [];
  const entries = text
    .split(/[;\n]/)
    .map((e) => e.trim())
    .filter((e) => e && !e.startsWith("#"));
  if (!entries.length) problems.push("no engine listed");
  entries.forEach((entry, k) => {
    const where = `engine ${k + 1} (${entry.length > 60 ? `${entry.slice(0, 57)}...` : entry})`;
    const kv = new Map<string, string>();
    for (const word of entry.split(/\s+/)) {
      const eq = word.indexOf("=");
      const key = eq > 0 ? word.slice(0, eq) : word;
      if (eq <= 0 || !ENGINE_KEYS.has(key)) {
        problems.push(`${where}: \`${word}\` is not one of name=, url=, slots=, tls=, ssh_key=`);
        continue;
      }
      if (kv.has(key)) problems.push(`${where}: ${key}= given twice`);
      kv.set(key, word.slice(eq + 1));
    }
    const url = kv.get("url");
    const name = kv.get("name") ?? (url === "local" ? "local" : undefined);
    if (!name) problems.push(`${where}: needs name=`);
    else if (!ENGINE_NAME.test(name))
      problems.push(`${where}: name=${name} must be lowercase letters, digits, - or _ (at most 31)`);
    else if (engines.some((e) => e.name === name)) problems.push(`${where}: name=${name} is listed twice`);
    if (!url) problems.push(`${where}: needs url= (local, unix:///path, tcp://host:port or ssh://user@host)`);
    else if (url !== "local" && !/^(unix:\/\/\/|tcp:\/\/[^/\s]+:\d+\/?$|ssh:\/\/[^/\s]+\/?$)/.test(url))
      problems.push(
        `${where}: url=${url} is not local, unix:///path, tcp://host:port or ssh://[user@]host[:port]`,
      );
    const slotsText = kv.get("slots");
    const slots = slotsText === undefined ? Number.NaN : Number(slotsText);
    if (!Number.isInteger(slots) || slots < 0 || slots > 64)
      problems.push(`${where}: slots= must be a whole number 0..64 (episodes at once on it)`);
    const tls = kv.get("tls");
    if (url?.startsWith("tcp://") && !tls)
      problems.push(
        `${where}: a tcp:// engine needs tls=DIR (ca.pem, cert.pem, key.pem): the plain Docker API is root on that host for anyone who reaches it`,
      );
    if (tls && !url?.startsWith("tcp://")) problems.push(`${where}: tls= is for tcp:// engines`);
    const sshKey = kv.get("ssh_key");
    if (sshKey && !url?.startsWith("ssh://")) problems.push(`${where}: ssh_key= is for ssh:// engines`);
    if (name && url)
      engines.push({
        name,
        url,
        slots: Number.isInteger(slots) ? slots : undefined,
        ...(tls ? { tlsDir: tls } : {}),
        ...(sshKey ? { sshKey } : {}),
      });
  });
  if (entries.length && !problems.length && engines.every((e) => e.slots === 0))
    problems.push("every engine has slots=0: no episode could run");
  return { engines, problems };
}

const envObject = z.object(ENV_SCHEMA);
type Env = z.infer<typeof envObject>;

export interface Config {
  dataDir: string;
  dbPath: string;
  logLevel: Env["LOG_LEVEL"];
  llm: {
    apiKey: string | undefined;
    /** The provider the meter forwards to: upstream's locked endpoint, unless an offline override. */
    baseUrl: string;
    /** The testee default a pack without policy.py/policy.json is pinned to (the sidecar's DEFAULT_MODEL). */
    defaultModel: string;
    /** Upstream's locked judge (reported with every score; nothing here calls it). */
    judgeModel: string;
    judgeBaseUrl: string;
    /** true when OFFLINE_LLM_BASE_URL or OFFLINE_DEFAULT_MODEL replaced a locked value. */
    unlocked: boolean;
    episodeCapUsd: number;
    upstreamTimeoutMs: number;
    /** true when no key is set: the in-process Engy simulator stands in. */
    simulated: boolean;
  };
  sim: { seed: number; profilePath: string | undefined; latencyScale: number };
  meter: { port: number; host: string };
  chain: {
    network: Env["NETWORK"];
    netuid: number;
    endpoint: string;
    walletName: string;
    walletHotkey: string;
    walletPath: string;
    weightsIntervalMs: number;
    /** WEIGHTS_VERSION_KEY; undefined → send the subnet's WeightsVersionKey read from the chain. */
    weightsVersionKey: number | undefined;
    stakeWeighted: boolean;
  };
  platform: {
    baseUrl: string;
    pollIntervalMs: number;
    heartbeatIntervalMs: number;
    winnerCacheTtlMs: number;
  };
  evaluation: {
    /** EVAL_ENABLED: evaluate challengers. Off (upstream's default): winner, weights, heartbeat only. */
    enabled: boolean;
    concurrency: number;
    /** SPEC_NUMBER: the subnet spec when the platform names none (the registry bench; never the built-in suite's). */
    specNumber: number | undefined;
    /** SUITE: the built-in suite's set (scenarios/suites.json) when none is named; undefined → the file's default. */
    suite: string | undefined;
    scenariosDir: string;
    agentImage: string | undefined;
    agentCommand: string | undefined;
    sidecarImage: string | undefined;
    /** BENCH_SOURCE: undefined → the command's default (`run`: registry on a real network; `eval`: builtin). */
    benchSource: "registry" | "builtin" | undefined;
    /** BENCH_IMAGE, else upstream's ghcr.io/trajectoryrl/sandbox-agent:{IMAGE_CHANNEL}. */
    benchImage: string | undefined;
    imageChannel: string;
    /** VERIFIER_NETWORK: undefined → `bridge` for the registry bench (upstream's), `none` for the built-in suite. */
    verifierNetwork: "bridge" | "none" | undefined;
    subnetSpecsFile: string | undefined;
    registryUsername: string | undefined;
    registryPassword: string | undefined;
    strictProvenance: boolean;
    subnetPool: string;
    dockerSocket: string;
    daemonInContainer: boolean | undefined;
    /** EPISODE_RUNTIME: the OCI runtime of every container running miners' or models' code (src/sandbox/runtime.ts). */
    episodeRuntime: EpisodeRuntimeSetting;
    /**
     * The engines episodes run on (ENGINES), the first of which builds and pulls the images; without
     * ENGINES one engine, the local socket, with the evaluation's concurrency (`explicit` false).
     */
    engines: { list: EngineConfig[]; explicit: boolean; sshAgent: string | undefined };
  };
  /** degradedAfterMs: how long the chain or the platform may be unreachable before health says degraded. */
  status: { host: string; port: number; degradedAfterMs: number };
  /** python3 for running policies on the host; undefined → probe /usr/bin/python3, then python3. */
  policy: { python: string | undefined };
  /** Locked variables set in the environment, ignored (see lockedEnvWarning). */
  ignoredEnv: string[];
  /**
   * What was read but is likely not what the operator meant (a switch value outside its words, a
   * name that looks like a setting's and is not one), one sentence each; the daemon logs them and
   * `check` shows them.
   */
  warnings: string[];
}

const ENDPOINTS: Record<Env["NETWORK"], string> = {
  finney: "wss://entrypoint-finney.opentensor.ai:443",
  test: "wss://test.finney.opentensor.ai:443",
  local: "ws://127.0.0.1:9944",
};

function expandHome(p: string): string {
  return p === "~" || p.startsWith("~/") ? resolve(homedir(), p.slice(2)) : p;
}

/** Parse an environment (default: process.env) into a Config; throws InputError naming every bad variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const picked: Record<string, string | undefined> = {};
  for (const name of Object.keys(ENV_SCHEMA)) picked[name] = env[name]?.trim();
  // An empty value means "unset" for variables with defaults, as in a dotenv file.
  for (const [k, v] of Object.entries(picked)) if (v === "") picked[k] = undefined;
  const parsed = envObject.safeParse(picked);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => describeIssue(i, picked));
    throw new InputError("invalid_config", `invalid environment: ${[...new Set(lines)].join("; ")}`);
  }
  const e = parsed.data;
  const dataDir = resolve(expandHome(e.DATA_DIR));
  const simulated = e.LLM_API_KEY === undefined;
  // A vote must be made on the models every other validator uses: the override is for what never
  // votes (eval, check, tests) and, in the daemon, for a local chain only (src/daemon assertSubnetRules).
  const unlocked = e.OFFLINE_LLM_BASE_URL !== undefined || e.OFFLINE_DEFAULT_MODEL !== undefined;
  return {
    dataDir,
    dbPath: resolve(dataDir, "validator.sqlite"),
    logLevel: e.LOG_LEVEL,
    llm: {
      apiKey: e.LLM_API_KEY,
      baseUrl: (e.OFFLINE_LLM_BASE_URL ?? LOCKED_LLM_BASE_URL).replace(/\/+$/, ""),
      defaultModel: e.OFFLINE_DEFAULT_MODEL ?? LOCKED_TESTEE_MODEL,
      judgeModel: LOCKED_JUDGE_MODEL,
      judgeBaseUrl: LOCKED_LLM_BASE_URL,
      unlocked,
      episodeCapUsd: e.EPISODE_CAP_USD,
      upstreamTimeoutMs: Math.round(e.UPSTREAM_TIMEOUT_S * 1000),
      simulated,
    },
    sim: { seed: e.ENGY_SIM_SEED, profilePath: e.ENGY_SIM_PROFILE, latencyScale: e.ENGY_SIM_LATENCY_SCALE },
    meter: { port: e.METER_PORT, host: e.METER_HOST },
    chain: {
      network: e.NETWORK,
      netuid: e.NETUID,
      endpoint: e.SUBTENSOR_ENDPOINT ?? ENDPOINTS[e.NETWORK],
      walletName: e.WALLET_NAME,
      walletHotkey: e.WALLET_HOTKEY,
      walletPath: expandHome(e.WALLET_PATH),
      weightsIntervalMs: e.WEIGHTS_INTERVAL_S * 1000,
      weightsVersionKey: e.WEIGHTS_VERSION_KEY,
      stakeWeighted: e.STAKE_WEIGHTED_CONSENSUS,
    },
    platform: {
      baseUrl: e.TRAJECTORYRL_API_BASE_URL.replace(/\/+$/, ""),
      pollIntervalMs: Math.round(e.EVAL_POLL_INTERVAL_S * 1000),
      heartbeatIntervalMs: Math.round(e.HEARTBEAT_INTERVAL_S * 1000),
      winnerCacheTtlMs: e.WINNER_CACHE_TTL_S * 1000,
    },
    evaluation: {
      enabled: e.EVAL_ENABLED,
      concurrency: e.EVAL_CONCURRENCY,
      specNumber: e.SPEC_NUMBER,
      suite: e.SUITE,
      scenariosDir: resolve(e.SCENARIOS_DIR),
      agentImage: e.AGENT_IMAGE,
      agentCommand: e.AGENT_COMMAND,
      sidecarImage: e.SIDECAR_IMAGE,
      benchSource: e.BENCH_SOURCE,
      benchImage: e.BENCH_IMAGE,
      imageChannel: e.IMAGE_CHANNEL,
      verifierNetwork: e.VERIFIER_NETWORK,
      subnetSpecsFile: e.SUBNET_SPECS_FILE ? resolve(expandHome(e.SUBNET_SPECS_FILE)) : undefined,
      registryUsername: e.REGISTRY_USERNAME,
      registryPassword: e.REGISTRY_PASSWORD,
      strictProvenance: e.STRICT_PROVENANCE,
      subnetPool: e.EPISODE_SUBNET_POOL,
      dockerSocket: e.DOCKER_SOCKET,
      daemonInContainer: e.DAEMON_IN_CONTAINER,
      episodeRuntime: e.EPISODE_RUNTIME,
      engines: {
        list: (e.ENGINES ?? [{ name: "local", url: "local", slots: undefined }]).map((x) =>
          x.url === "local" ? { ...x, url: `unix://${resolve(e.DOCKER_SOCKET)}` } : x,
        ),
        explicit: e.ENGINES !== undefined,
        sshAgent: env.SSH_AUTH_SOCK?.trim() || undefined,
      },
    },
    status: { host: e.STATUS_HOST, port: e.STATUS_PORT, degradedAfterMs: e.DEGRADED_AFTER_S * 1000 },
    policy: { python: e.TRAJRL_PYTHON },
    ignoredEnv: LOCKED_ENV.filter((name) => (env[name]?.trim() ?? "") !== ""),
    warnings: configWarnings(env),
  };
}

/**
 * One bad variable as the operator wrote it: its name and value (a secret's value never) and what
 * was expected — `DEGRADED_AFTER_S="30s" is not a number`, not zod's "expected number, received NaN".
 */
function describeIssue(issue: z.core.$ZodIssue, picked: Record<string, string | undefined>): string {
  const name = String(issue.path[0] ?? "?");
  const raw = picked[name];
  const shown =
    raw === undefined ? `${name} (unset)` : isSecretKey(name) ? name : `${name}=${JSON.stringify(raw)}`;
  switch (issue.code) {
    case "invalid_type":
      return `${shown} is not ${issue.expected === "int" ? "a whole number" : issue.expected === "number" ? "a number" : issue.expected}`;
    case "too_small":
      return issue.origin === "string"
        ? `${shown} is empty`
        : `${shown} is below the minimum ${issue.minimum}`;
    case "too_big":
      return `${shown} is above the maximum ${issue.maximum}`;
    case "invalid_value":
      return `${shown} is not one of ${issue.values.map(String).join(", ")}`;
    case "invalid_format":
      return `${shown} is not ${issue.format === "url" ? "a URL" : issue.format === "regex" ? issue.message : `a valid ${issue.format}`}`;
    default:
      return `${name}: ${issue.message}`;
  }
}

/** Sentences for what parses but is likely a mistake (Config.warnings). Pure. */
export function configWarnings(env: Record<string, string | undefined>): string[] {
  const out: string[] = [];
  const evalEnabled = env.EVAL_ENABLED?.trim().toLowerCase();
  if (evalEnabled && !SWITCH_ON.includes(evalEnabled) && !SWITCH_OFF.includes(evalEnabled))
    out.push(
      `EVAL_ENABLED=${JSON.stringify(env.EVAL_ENABLED)} is not one of ${SWITCH_ON.join(", ")} (evaluate) or ${SWITCH_OFF.join(", ")}: read as off, weight-only (upstream's rule)`,
    );
  for (const m of nearMissNames(env, [...Object.keys(ENV_SCHEMA), ...LOCKED_ENV]))
    out.push(
      `${m.name} is not a setting of this validator and is ignored${m.suggestion ? `: did you mean ${m.suggestion}?` : ""}`,
    );
  return out;
}

/**
 * The warning for locked variables an operator set (upstream's `_warn_ignored_llm_env`), or null.
 * Names every one of them and says they are ignored.
 */
export function lockedEnvWarning(c: Pick<Config, "ignoredEnv" | "llm">): string | null {
  if (c.ignoredEnv.length === 0) return null;
  return `Ignored operator env ${c.ignoredEnv.join(", ")}: the testee model and inference endpoint are locked in code for the whole validator fleet (testee ${c.llm.defaultModel}, ${c.llm.baseUrl}, judge ${c.llm.judgeModel}); only LLM_API_KEY is operator-supplied`;
}

/** An environment variable named at run time (`policy serve --token-env NAME`); empty → undefined. */
export function namedEnv(
  name: string,
  env: Record<string, string | undefined> = process.env,
): string | undefined {
  const v = env[name]?.trim();
  return v === undefined || v === "" ? undefined : v;
}
