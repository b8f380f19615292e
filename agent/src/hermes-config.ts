/** Where the model is (environment, then $HERMES_HOME/config.yaml) and where sessions live. */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { commandEnv } from "./env.js";

export interface HermesConfigFile {
  model?: string;
  baseUrl?: string;
  apiKey?: string;
}

/** The `model:` block of the config.yaml the image's entrypoint writes (flat quoted scalars). */
export function parseHermesConfig(text: string): HermesConfigFile {
  const out: HermesConfigFile = {};
  let inModel = false;
  for (const raw of text.split(/\r?\n/)) {
    if (/^\S/.test(raw)) {
      inModel = /^model:\s*$/.test(raw);
      continue;
    }
    if (!inModel) continue;
    const m = /^\s+(default|base_url|api_key):\s*(.*?)\s*$/.exec(raw);
    if (!m) continue;
    let v = m[2]!;
    if (v.length >= 2 && ((v.startsWith('"') && v.endsWith('"')) || (v.startsWith("'") && v.endsWith("'"))))
      v = v.slice(1, -1);
    if (v === "") continue;
    if (m[1] === "default") out.model = v;
    else if (m[1] === "base_url") out.baseUrl = v;
    else out.apiKey = v;
  }
  return out;
}

export interface Endpoint {
  baseUrl: string | undefined;
  model: string | undefined;
  apiKey: string | undefined;
}

/** The container's environment wins over the config file; `-m` wins for the model. */
export function resolveEndpoint(
  env: Record<string, string | undefined>,
  file: HermesConfigFile,
  modelFlag?: string,
): Endpoint {
  const get = (k: string) => {
    const v = env[k]?.trim();
    return v ? v : undefined;
  };
  return {
    baseUrl: get("LLM_BASE_URL") ?? file.baseUrl,
    model: modelFlag ?? get("LLM_MODEL") ?? file.model,
    apiKey: get("LLM_API_KEY") ?? file.apiKey ?? get("OPENAI_API_KEY"),
  };
}

export function hermesHome(env: Record<string, string | undefined>): string {
  const h = env.HERMES_HOME?.trim();
  if (h) return h;
  const home = env.HOME?.trim();
  return home ? join(home, ".hermes") : "/opt/data";
}

export function sessionsDir(home: string): string {
  return join(home, "sessions");
}

/** Hermes' session ids: local start time and a random suffix, e.g. 20260507_142233_1a2b3c. */
export function newSessionId(now: Date, suffix = randomBytes(3).toString("hex")): string {
  const p = (n: number) => String(n).padStart(2, "0");
  return `${now.getFullYear()}${p(now.getMonth() + 1)}${p(now.getDate())}_${p(now.getHours())}${p(now.getMinutes())}${p(now.getSeconds())}_${suffix}`;
}

/** Terminal commands never see a credential: ours (LLM_API_KEY) nor the ones upstream sets for Hermes. */
export function hermesCommandEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out = commandEnv(env);
  for (const k of ["OPENAI_API_KEY", "OPENROUTER_API_KEY", "ANTHROPIC_API_KEY"]) delete out[k];
  return out;
}
