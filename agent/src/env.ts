/**
 * The agent's configuration, read once from its environment. Hand-validated (the bundle carries
 * no dependencies); every bad variable is named in one error. Pure.
 */
import { join } from "node:path";
import { AGENT_ENV_DEFAULTS, TRANSCRIPT_FILE_NAME, TURNS_FILE_NAME } from "../contract.js";

export interface AgentConfig {
  baseUrl: string;
  model: string;
  apiKey: string | undefined;
  maxTurns: number;
  workdir: string;
  workspace: string;
  turnsFile: string;
  transcriptFile: string;
  toolTimeoutS: number;
  outputCap: number;
  llmTimeoutMs: number;
  llmRetries: number;
  retryBaseMs: number;
  /** Run every tool as this user (the agent itself is root): AGENT_TOOL_UID/GID/HOME. */
  toolUser?: ToolUserConfig | undefined;
}

export interface ToolUserConfig {
  uid: number;
  gid: number;
  /** HOME of the tool user's commands (AGENT_TOOL_HOME; default: its /etc/passwd entry, else /). */
  home: string | undefined;
}

export class AgentConfigError extends Error {
  readonly code = "config_error";
  constructor(message: string) {
    super(message);
    this.name = "AgentConfigError";
  }
}

export function readAgentEnv(env: Record<string, string | undefined>): AgentConfig {
  const problems: string[] = [];
  const get = (k: string): string | undefined => {
    const v = env[k]?.trim();
    return v === undefined || v === "" ? undefined : v;
  };
  const int = (k: keyof typeof AGENT_ENV_DEFAULTS, min: number, max: number): number => {
    const raw = get(k);
    if (raw === undefined) return AGENT_ENV_DEFAULTS[k] as number;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max) {
      problems.push(`${k}=${JSON.stringify(raw)} is not an integer in [${min}, ${max}]`);
      return AGENT_ENV_DEFAULTS[k] as number;
    }
    return n;
  };
  const baseRaw = get("LLM_BASE_URL") ?? AGENT_ENV_DEFAULTS.LLM_BASE_URL;
  let baseUrl = baseRaw;
  try {
    const u = new URL(baseRaw);
    if (u.protocol !== "http:" && u.protocol !== "https:") throw new Error("not http(s)");
    baseUrl = baseRaw.replace(/\/+$/, "");
  } catch {
    problems.push(`LLM_BASE_URL=${JSON.stringify(baseRaw)} is not an http(s) URL`);
  }
  const workspace = get("AGENT_WORKSPACE") ?? AGENT_ENV_DEFAULTS.AGENT_WORKSPACE;
  const cfg: AgentConfig = {
    baseUrl,
    model: get("LLM_MODEL") ?? AGENT_ENV_DEFAULTS.LLM_MODEL,
    apiKey: get("LLM_API_KEY"),
    maxTurns: int("AGENT_MAX_TURNS", 1, 10_000),
    workdir: get("AGENT_WORKDIR") ?? AGENT_ENV_DEFAULTS.AGENT_WORKDIR,
    workspace,
    turnsFile: get("AGENT_TURNS_FILE") ?? join(workspace, TURNS_FILE_NAME),
    transcriptFile: get("AGENT_TRANSCRIPT_FILE") ?? join(workspace, TRANSCRIPT_FILE_NAME),
    toolTimeoutS: int("AGENT_TOOL_TIMEOUT_S", 1, 86_400),
    outputCap: int("AGENT_OUTPUT_CAP", 256, 16 * 1024 * 1024),
    llmTimeoutMs: int("AGENT_LLM_TIMEOUT_S", 1, 86_400) * 1000,
    llmRetries: int("AGENT_LLM_RETRIES", 0, 20),
    retryBaseMs: int("AGENT_RETRY_BASE_MS", 0, 60_000),
    toolUser: undefined,
  };
  const id = (k: string): number | undefined => {
    const raw = get(k);
    if (raw === undefined) return undefined;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 1 || n > 2 ** 31 - 1) {
      problems.push(`${k}=${JSON.stringify(raw)} is not a non-root id`);
      return undefined;
    }
    return n;
  };
  const toolUid = id("AGENT_TOOL_UID");
  const toolGid = id("AGENT_TOOL_GID");
  if ((toolUid === undefined) !== (toolGid === undefined) && problems.length === 0)
    problems.push("AGENT_TOOL_UID and AGENT_TOOL_GID go together");
  cfg.toolUser =
    toolUid !== undefined && toolGid !== undefined
      ? { uid: toolUid, gid: toolGid, home: get("AGENT_TOOL_HOME") }
      : undefined;
  if (problems.length > 0) throw new AgentConfigError(`invalid environment: ${problems.join("; ")}`);
  return cfg;
}

/** What terminal commands inherit: the agent's environment without its credential. */
export function commandEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { ...env };
  delete out.LLM_API_KEY;
  out.PAGER = "cat";
  out.GIT_PAGER = "cat";
  out.TERM = out.TERM ?? "dumb";
  out.DEBIAN_FRONTEND = "noninteractive";
  return out;
}
