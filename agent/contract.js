/**
 * The agent's contract with the host: defaults, environment names, exit codes, the image
 * layout and the turns.jsonl reader. Plain JavaScript with a hand-written contract.d.ts so
 * that both the agent bundle (agent/src) and the validator (src/, whose rootDir forbids
 * importing TypeScript from here) can import one source of truth. Pure: no I/O.
 */

export const AGENT_VERSION = "0.1.0";

/** Where the base image puts the bundle, and the command that runs it (AGENT_COMMAND's default). */
export const AGENT_PATH_IN_IMAGE = "/opt/trajrl/agent.js";
export const DEFAULT_AGENT_COMMAND = `node ${AGENT_PATH_IN_IMAGE}`;
export const DEFAULT_AGENT_IMAGE = "trajrl/agent-base:latest";
export const AGENT_UID = 10000;
export const AGENT_GID = 10000;

export const TURNS_FILE_NAME = "turns.jsonl";
export const TRANSCRIPT_FILE_NAME = "transcript.txt";

/** Defaults of every variable the agent reads (AGENT_TURNS_FILE/AGENT_TRANSCRIPT_FILE derive from the workspace). */
export const AGENT_ENV_DEFAULTS = Object.freeze({
  LLM_BASE_URL: "http://policy:8800/v1",
  LLM_MODEL: "auto",
  AGENT_MAX_TURNS: 90,
  AGENT_WORKDIR: "/app",
  AGENT_WORKSPACE: "/workspace",
  AGENT_TOOL_TIMEOUT_S: 120,
  AGENT_OUTPUT_CAP: 16384,
  AGENT_LLM_TIMEOUT_S: 300,
  AGENT_LLM_RETRIES: 4,
  AGENT_RETRY_BASE_MS: 1000,
});

/** Process exit codes; the summary line of turns.jsonl carries the same reason as text. */
export const AGENT_EXIT = Object.freeze({
  completed: 0,
  internal_error: 1,
  config_error: 2,
  budget_exhausted: 3,
  llm_error: 4,
  SIGHUP: 129,
  SIGINT: 130,
  SIGTERM: 143,
});

/**
 * The agent base image's build context: everything in `dockerfileDir` at the context root, plus
 * each `extra` file copied from the repository path `from` to the context path `to`.
 */
export const AGENT_BASE_CONTEXT = Object.freeze({
  dockerfileDir: "docker/images/agent-base",
  dockerfile: "Dockerfile",
  extra: Object.freeze([Object.freeze({ from: "agent/dist/agent.js", to: "agent.js" })]),
});

// Characters that make a command line more than whitespace-separated words (`=` for `VAR=x cmd`).
const SHELL_META = /[|&;<>()$`\\"'*?[\]#~=%{}\n]/;

/**
 * The argv that runs an agent command template inside the container. A plain command (words
 * without shell syntax) is split into argv so the agent itself is the signalled process; anything
 * else runs under `/bin/sh -c` (templates should then `exec` their last command so SIGTERM reaches
 * the agent, since dash does not exec the last command of `-c` itself).
 */
export function agentCommandArgv(command = DEFAULT_AGENT_COMMAND) {
  const trimmed = command.trim();
  if (trimmed === "") throw new Error("empty agent command");
  if (!SHELL_META.test(trimmed)) return trimmed.split(/\s+/);
  return ["/bin/sh", "-c", trimmed];
}

/**
 * The container environment (`KEY=value` list, dockerode's Env) for the agent. Unset options fall
 * back to the agent's own defaults; the API key is included only when given.
 */
export function agentEnv(opts = {}) {
  const env = {
    LLM_BASE_URL: opts.llmBaseUrl ?? AGENT_ENV_DEFAULTS.LLM_BASE_URL,
    LLM_MODEL: opts.llmModel ?? AGENT_ENV_DEFAULTS.LLM_MODEL,
    AGENT_MAX_TURNS: String(opts.maxTurns ?? AGENT_ENV_DEFAULTS.AGENT_MAX_TURNS),
    AGENT_WORKDIR: opts.workdir ?? AGENT_ENV_DEFAULTS.AGENT_WORKDIR,
    AGENT_WORKSPACE: opts.workspace ?? AGENT_ENV_DEFAULTS.AGENT_WORKSPACE,
    AGENT_TOOL_TIMEOUT_S: String(opts.toolTimeoutS ?? AGENT_ENV_DEFAULTS.AGENT_TOOL_TIMEOUT_S),
    AGENT_OUTPUT_CAP: String(opts.outputCap ?? AGENT_ENV_DEFAULTS.AGENT_OUTPUT_CAP),
  };
  if (opts.llmApiKey) env.LLM_API_KEY = opts.llmApiKey;
  if (opts.turnsFile) env.AGENT_TURNS_FILE = opts.turnsFile;
  if (opts.transcriptFile) env.AGENT_TRANSCRIPT_FILE = opts.transcriptFile;
  if (opts.toolUser) {
    env.AGENT_TOOL_UID = String(opts.toolUser.uid);
    env.AGENT_TOOL_GID = String(opts.toolUser.gid);
    if (opts.toolUser.home) env.AGENT_TOOL_HOME = opts.toolUser.home;
  }
  return Object.entries(env).map(([k, v]) => `${k}=${v}`);
}

/**
 * Read a turns.jsonl file's text. Tolerates what a kill leaves behind: a torn last line is
 * counted in `invalidLines`, and `summary` is undefined when the agent never wrote one (SIGKILL).
 */
export function parseTurnsJsonl(text) {
  const out = { session: undefined, turns: [], summary: undefined, invalidLines: 0 };
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    let rec;
    try {
      rec = JSON.parse(line);
    } catch {
      out.invalidLines++;
      continue;
    }
    if (rec === null || typeof rec !== "object") {
      out.invalidLines++;
    } else if (rec.type === "session") {
      out.session = rec;
    } else if (rec.type === "turn") {
      out.turns.push(rec);
    } else if (rec.type === "summary") {
      out.summary = rec;
    } else {
      out.invalidLines++;
    }
  }
  return out;
}
