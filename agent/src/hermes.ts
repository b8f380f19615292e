/**
 * `hermes`: this project's agent behind Hermes Agent's command line, for the offline trajrl-bench
 * images (docker/images/sandbox-agent). Upstream's validator drives Hermes as
 *
 *   hermes chat -q PROMPT -m MODEL -t TOOLSETS --quiet --yolo     (as hermes, HOME=/opt/data)
 *   hermes sessions export /workspace/turns.jsonl                  (after the chat, or post mortem)
 *   hermes --version                                               (the harness identity probe)
 *
 * and this file answers the same way: `chat` runs the agent loop of agent/src in this process (the
 * process is named "hermes", so upstream's `pkill -KILL hermes` at the deadline ends the chat and
 * spares the shell around it), keeps the session in a store under $HERMES_HOME written as the
 * session goes (a SIGKILL loses at most the turn in flight), prints the transcript on stdout;
 * `sessions export` writes the store in Hermes' session-export format: one JSON object per session
 * (`json.dumps(ensure_ascii=False)` of the `sessions` row plus `messages`, as Hermes' SessionDB
 * `export_session` builds it). Bundled by scripts/build-agent.mjs as agent/dist/hermes.
 *
 * This file is the commands and the module's face; the parts live beside it: hermes-args.ts (the
 * command line), hermes-config.ts (endpoint and home), hermes-store.ts (the session store and its
 * export), hermes-log.ts (the loop's records kept as Hermes keeps them), py-dumps.ts (json.dumps).
 */
import { mkdirSync, readFileSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { AGENT_EXIT, type SummaryRecord } from "../contract.js";
import { type AgentConfig, AgentConfigError, readAgentEnv } from "./env.js";
import { type HermesCommand, parseHermesArgs, USAGE, versionLine } from "./hermes-args.js";
import {
  hermesCommandEnv,
  hermesHome,
  newSessionId,
  parseHermesConfig,
  resolveEndpoint,
  sessionsDir,
} from "./hermes-config.js";
import { HermesSessionLog } from "./hermes-log.js";
import { exportText, HermesSessionStore, loadStore } from "./hermes-store.js";
import { AgentSession } from "./loop.js";
import { killAllCommandGroups } from "./shell.js";

export * from "./hermes-args.js";
export * from "./hermes-config.js";
export * from "./hermes-log.js";
export * from "./hermes-store.js";
export * from "./py-dumps.js";

// ---- the commands ----------------------------------------------------------------------------

const say = (text: string) => {
  try {
    writeSync(1, text);
  } catch {
    // stdout gone (EPIPE): the session store is what counts
  }
};
const err = (line: string) => {
  try {
    writeSync(2, `[hermes] ${line}\n`);
  } catch {
    // stderr gone
  }
};

function readText(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

async function chat(cmd: Extract<HermesCommand, { kind: "chat" }>): Promise<never> {
  const env = process.env;
  const home = hermesHome(env);
  const cfg = chatConfig(cmd, env, home);
  const store = new HermesSessionStore(sessionsDir(home), newSessionId(new Date()));
  const log = new HermesSessionLog(store, say, { toolsets: cmd.toolsets, maxTurns: cfg.maxTurns });
  const ac = new AbortController();
  const session = new AgentSession(cfg, {
    log,
    commandEnv: hermesCommandEnv(env),
    signal: ac.signal,
    progress: err,
    userPrompt: cmd.query,
  });
  const finish = (summary: SummaryRecord): never => {
    log.close();
    process.exit(summary.exit_code);
  };
  endOnSignalOrCrash(session, ac, store.sessionId, finish);
  err(
    `${versionLine()}: session ${store.sessionId}, model ${cfg.model} at ${cfg.baseUrl}, workdir ${cfg.workdir}`,
  );
  return finish(await session.run());
}

/** The agent's settings from the endpoint hermes resolved; a missing one exits with config_error. */
function chatConfig(
  cmd: Extract<HermesCommand, { kind: "chat" }>,
  env: NodeJS.ProcessEnv,
  home: string,
): AgentConfig {
  const ep = resolveEndpoint(env, parseHermesConfig(readText(join(home, "config.yaml"))), cmd.model);
  try {
    if (!ep.baseUrl)
      throw new AgentConfigError(
        `no model endpoint: set LLM_BASE_URL or model.base_url in ${home}/config.yaml`,
      );
    const cfg = readAgentEnv({
      ...env,
      LLM_BASE_URL: ep.baseUrl,
      LLM_MODEL: ep.model ?? "",
      LLM_API_KEY: ep.apiKey ?? "",
      ...(cmd.maxTurns !== undefined ? { AGENT_MAX_TURNS: String(cmd.maxTurns) } : {}),
    });
    mkdirSync(cfg.workdir, { recursive: true });
    return cfg;
  } catch (e) {
    err((e as Error).message);
    process.exit(AGENT_EXIT.config_error);
  }
}

/** SIGTERM/SIGINT/SIGHUP (upstream's deadline) or a crash: kill the tools, record the end, exit. */
function endOnSignalOrCrash(
  session: AgentSession,
  ac: AbortController,
  sessionId: string,
  finish: (summary: SummaryRecord) => never,
): void {
  const onSignal = (sig: NodeJS.Signals) => {
    killAllCommandGroups("SIGKILL");
    const summary = session.interrupt(sig);
    ac.abort(new Error(sig));
    err(`${sig}: session ${sessionId} ended after ${summary.turns} turns`);
    finish(summary);
  };
  for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"] as const) process.on(sig, onSignal);
  process.on("uncaughtException", (e) => {
    killAllCommandGroups("SIGKILL");
    err(`internal error: ${e.stack ?? e.message}`);
    finish(session.crash(e));
  });
}

function exportSessions(cmd: Extract<HermesCommand, { kind: "export" }>): number {
  let sessions = loadStore(sessionsDir(hermesHome(process.env)));
  if (cmd.source !== undefined) sessions = sessions.filter((s) => s.row.source === cmd.source);
  if (cmd.sessionId !== undefined) {
    const want = cmd.sessionId;
    const exact = sessions.filter((s) => s.row.id === want);
    const byPrefix = sessions.filter((s) => String(s.row.id).startsWith(want));
    const hit = exact.length === 1 ? exact : byPrefix.length === 1 ? byPrefix : [];
    if (hit.length === 0) {
      say(`Session '${want}' not found.\n`);
      return 0;
    }
    sessions = hit;
  }
  const text = exportText(sessions);
  if (cmd.output === "-") {
    say(text);
    return 0;
  }
  try {
    writeFileSync(cmd.output, text);
  } catch (e) {
    err(`cannot write ${cmd.output}: ${(e as Error).message}`);
    return 1;
  }
  say(
    cmd.sessionId !== undefined
      ? `Exported 1 session to ${cmd.output}\n`
      : `Exported ${sessions.length} sessions to ${cmd.output}\n`,
  );
  return 0;
}

/** The bundle's entry (scripts/build-agent.mjs): one command, then exit. */
export async function runHermesCli(argv: readonly string[]): Promise<never> {
  const cmd = parseHermesArgs(argv);
  switch (cmd.kind) {
    case "version":
      say(`${versionLine()}\n`);
      process.exit(0);
      break;
    case "help":
      say(`${USAGE}\n`);
      process.exit(0);
      break;
    case "usage_error":
      process.stderr.write(`${USAGE}\nhermes: error: ${cmd.message}\n`);
      process.exit(2);
      break;
    case "export":
      process.exit(exportSessions(cmd));
      break;
    case "chat":
      await chat(cmd);
  }
  process.exit(AGENT_EXIT.internal_error);
}
