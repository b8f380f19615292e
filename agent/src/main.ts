/**
 * trajrl-agent: the in-container agent. `node agent.js` runs one session from its environment
 * (see agent/README.md); `--self-test` checks every tool and the loop offline; `--version`.
 * Exit codes: AGENT_EXIT in agent/contract.js.
 */
import { mkdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { AGENT_EXIT, AGENT_VERSION, type SummaryRecord, TURNS_FILE_NAME } from "../contract.js";
import { type AgentConfig, AgentConfigError, commandEnv, readAgentEnv } from "./env.js";
import { AgentSession } from "./loop.js";
import { runSelfTest } from "./selftest.js";
import { killAllCommandGroups } from "./shell.js";
import { serveToolWorker, ToolWorker } from "./tool-worker.js";
import type { ToolUser } from "./tools.js";
import { SessionLog } from "./turns.js";

const USAGE = `usage: node agent.js [--self-test | --version | --help | --tool-worker]
Runs one agent session configured by the environment: LLM_BASE_URL, LLM_MODEL, LLM_API_KEY,
AGENT_MAX_TURNS, AGENT_WORKDIR, AGENT_WORKSPACE, AGENT_TURNS_FILE, AGENT_TRANSCRIPT_FILE,
AGENT_TOOL_TIMEOUT_S, AGENT_OUTPUT_CAP, AGENT_LLM_TIMEOUT_S, AGENT_LLM_RETRIES, AGENT_RETRY_BASE_MS.`;

const err = (line: string) => process.stderr.write(`[agent] ${line}\n`);

function versionLine(): string {
  return `trajrl-agent ${AGENT_VERSION} (node ${process.version})`;
}

/** The tool user's name and home from /etc/passwd (for USER, LOGNAME, HOME of its commands). */
function passwdEntry(uid: number): { name: string; home: string } | undefined {
  try {
    for (const line of readFileSync("/etc/passwd", "utf8").split("\n")) {
      const f = line.split(":");
      if (f.length >= 6 && Number(f[2]) === uid) return { name: f[0]!, home: f[5]! };
    }
  } catch {
    // no passwd: the defaults below
  }
  return undefined;
}

/**
 * The tools' user and environment. With AGENT_TOOL_UID the agent must be root (it acts as that
 * user for every tool); the tools then see the user's HOME, USER and LOGNAME, not root's.
 */
function toolSetup(cfg: AgentConfig): { user: ToolUser | undefined; env: NodeJS.ProcessEnv } {
  const env = commandEnv(process.env);
  const t = cfg.toolUser;
  if (!t) return { user: undefined, env };
  if (process.getuid?.() !== 0)
    throw new AgentConfigError(
      `AGENT_TOOL_UID=${t.uid}: the agent must run as root to run its tools as that user`,
    );
  const pw = passwdEntry(t.uid);
  env.HOME = t.home ?? pw?.home ?? "/";
  env.USER = pw?.name ?? String(t.uid);
  env.LOGNAME = env.USER;
  const files = new ToolWorker({
    argv: [process.execPath, process.argv[1] ?? "", "--tool-worker"],
    uid: t.uid,
    gid: t.gid,
    cwd: cfg.workdir,
    env,
  });
  return { user: { uid: t.uid, gid: t.gid, files }, env };
}

function exitWith(summary: SummaryRecord, log: SessionLog): never {
  log.close();
  process.stdout.write(
    `${JSON.stringify({ reason: summary.reason, code: summary.code, turns: summary.turns, exit_code: summary.exit_code })}\n`,
  );
  process.exit(summary.exit_code);
}

async function runSession(): Promise<never> {
  let cfg: ReturnType<typeof readAgentEnv>;
  let tools: ReturnType<typeof toolSetup>;
  try {
    cfg = readAgentEnv(process.env);
    tools = toolSetup(cfg);
    mkdirSync(cfg.workdir, { recursive: true });
    if (!statSync(cfg.workdir).isDirectory())
      throw new AgentConfigError(`AGENT_WORKDIR ${cfg.workdir} is not a directory`);
  } catch (e) {
    const message = (e as Error).message;
    err(message);
    // Leave the reason where the episode runner looks for it, if that place is writable.
    const ws = process.env.AGENT_WORKSPACE?.trim() || "/workspace";
    const log = new SessionLog(
      process.env.AGENT_TURNS_FILE?.trim() || join(ws, TURNS_FILE_NAME),
      "/dev/null",
    );
    log.summary({
      type: "summary",
      reason: "config_error",
      code: e instanceof AgentConfigError ? e.code : "config_error",
      detail: message,
      exit_code: AGENT_EXIT.config_error,
      turns: 0,
      tool_call_count: 0,
      finish_reasons: [],
      usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, cached_tokens: 0 },
      llm_retries: 0,
      duration_ms: 0,
      ended_at: new Date().toISOString(),
      final_message: null,
    });
    log.close();
    process.exit(AGENT_EXIT.config_error);
  }
  const log = new SessionLog(cfg.turnsFile, cfg.transcriptFile);
  const ac = new AbortController();
  const session = new AgentSession(cfg, {
    log,
    commandEnv: tools.env,
    signal: ac.signal,
    progress: err,
    ...(tools.user ? { toolUser: tools.user } : {}),
  });
  const onSignal = (sig: NodeJS.Signals) => {
    // Synchronous from here to exit: the tools' process groups die first so nothing outlives us,
    // then the partial turn and the summary are appended.
    killAllCommandGroups("SIGKILL");
    const summary = session.interrupt(sig);
    ac.abort(new Error(sig));
    err(`${sig}: session ended after ${summary.turns} turns`);
    exitWith(summary, log);
  };
  for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"] as const) process.on(sig, onSignal);
  process.on("uncaughtException", (e) => {
    killAllCommandGroups("SIGKILL");
    err(`internal error: ${e.stack ?? e.message}`);
    exitWith(session.crash(e), log);
  });
  err(
    `${versionLine()}: model ${cfg.model} at ${cfg.baseUrl}, workdir ${cfg.workdir}, max ${cfg.maxTurns} turns` +
      (tools.user ? `, tools as uid ${tools.user.uid}` : ""),
  );
  const summary = await session.run();
  err(
    `session ended: ${summary.reason}${summary.code ? ` (${summary.code})` : ""} after ${summary.turns} turns`,
  );
  exitWith(summary, log);
}

const args = process.argv.slice(2);
if (args.includes("--version") || args.includes("-v")) {
  process.stdout.write(`${versionLine()}\n`);
  process.exit(0);
} else if (args.includes("--help") || args.includes("-h")) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
} else if (args.includes("--tool-worker")) {
  serveToolWorker().then(
    () => process.exit(0),
    (e) => {
      process.stderr.write(`tool worker: ${(e as Error).message}\n`);
      process.exit(1);
    },
  );
} else if (args.includes("--self-test")) {
  runSelfTest().then(
    (r) => {
      process.stdout.write(`${r.line}\n`);
      process.exit(r.ok ? 0 : 1);
    },
    (e) => {
      process.stdout.write(`self-test FAILED: ${(e as Error).message}\n`);
      process.exit(1);
    },
  );
} else if (args.length > 0) {
  process.stderr.write(`unknown argument: ${args[0]}\n${USAGE}\n`);
  process.exit(AGENT_EXIT.config_error);
} else {
  void runSession();
}
