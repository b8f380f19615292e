/** `hermes`'s command line, parsed as Hermes Agent's argparse does for the commands upstream uses. */
import { AGENT_VERSION } from "../contract.js";

export const HERMES_NAME = "trajrl-agent";

/** First line of `hermes --version`: upstream's probe takes the leading word and the first x.y.z. */
export function versionLine(): string {
  return `${HERMES_NAME} v${AGENT_VERSION} (hermes-compatible; node ${process.version})`;
}

export const USAGE = `usage: hermes chat -q PROMPT [-m MODEL] [-t TOOLSETS] [--max-turns N] [--quiet] [--yolo]
       hermes sessions export OUTPUT [--session-id ID] [--source SOURCE]   (OUTPUT "-" = stdout)
       hermes --version
${HERMES_NAME}, behind Hermes Agent's command line. The model endpoint: LLM_BASE_URL, else
$HERMES_HOME/config.yaml (model.base_url); the key: LLM_API_KEY, else config.yaml's api_key, else
OPENAI_API_KEY; the model: -m, else LLM_MODEL, else config.yaml's model.default. Sessions are kept
under $HERMES_HOME/sessions (HERMES_HOME defaults to $HOME/.hermes).`;

export type HermesCommand =
  | { kind: "version" }
  | { kind: "help" }
  | {
      kind: "chat";
      query: string;
      model?: string;
      toolsets: string[];
      maxTurns?: number;
      quiet: boolean;
      yolo: boolean;
      provider?: string;
    }
  | { kind: "export"; output: string; sessionId?: string; source?: string }
  | { kind: "usage_error"; message: string };

type FlagSpec = Record<string, { key: string; value: boolean }>;

const CHAT_FLAGS: FlagSpec = {
  "-q": { key: "query", value: true },
  "--query": { key: "query", value: true },
  "-m": { key: "model", value: true },
  "--model": { key: "model", value: true },
  "-t": { key: "toolsets", value: true },
  "--toolsets": { key: "toolsets", value: true },
  "--provider": { key: "provider", value: true },
  "--max-turns": { key: "maxTurns", value: true },
  "-Q": { key: "quiet", value: false },
  "--quiet": { key: "quiet", value: false },
  "--yolo": { key: "yolo", value: false },
  "-v": { key: "verbose", value: false },
  "--verbose": { key: "verbose", value: false },
};

const EXPORT_FLAGS: FlagSpec = {
  "--session-id": { key: "sessionId", value: true },
  "--source": { key: "source", value: true },
};

/** Flags (`-x V`, `--xx V`, `--xx=V`) and positionals, argparse-style; the first problem wins. */
function parseFlags(
  args: readonly string[],
  spec: FlagSpec,
): { flags: Record<string, string | true>; positionals: string[] } | { error: string } {
  const flags: Record<string, string | true> = {};
  const positionals: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--") {
      positionals.push(...args.slice(i + 1));
      break;
    }
    if (a.startsWith("-") && a !== "-") {
      const eq = a.indexOf("=");
      const name = a.startsWith("--") && eq > 0 ? a.slice(0, eq) : a;
      const f = spec[name];
      if (!f) return { error: `unrecognized argument: ${a}` };
      if (!f.value) {
        if (name !== a) return { error: `argument ${name}: ignored explicit argument` };
        flags[f.key] = true;
        continue;
      }
      const v = name !== a ? a.slice(eq + 1) : args[++i];
      if (v === undefined) return { error: `argument ${name}: expected one argument` };
      flags[f.key] = v;
      continue;
    }
    positionals.push(a);
  }
  return { flags, positionals };
}

export function parseHermesArgs(argv: readonly string[]): HermesCommand {
  const [cmd, ...rest] = argv;
  if (cmd === undefined)
    return { kind: "usage_error", message: "a command is required (non-interactive only)" };
  if (cmd === "--version" || cmd === "-V" || cmd === "version") return { kind: "version" };
  if (cmd === "--help" || cmd === "-h" || cmd === "help") return { kind: "help" };
  if (cmd === "chat") return parseChat(rest);
  if (cmd === "sessions") return parseSessions(rest);
  return { kind: "usage_error", message: `unknown command '${cmd}'` };
}

/** `chat -q PROMPT …`: a prompt is required (this hermes is non-interactive). */
function parseChat(args: readonly string[]): HermesCommand {
  const p = parseFlags(args, CHAT_FLAGS);
  if ("error" in p) return { kind: "usage_error", message: p.error };
  if (p.positionals.length > 0)
    return { kind: "usage_error", message: `unrecognized argument: ${p.positionals[0]}` };
  const f = p.flags;
  if (typeof f.query !== "string" || f.query.trim() === "")
    return { kind: "usage_error", message: "chat needs -q PROMPT (this hermes is non-interactive)" };
  let maxTurns: number | undefined;
  if (typeof f.maxTurns === "string") {
    maxTurns = Number(f.maxTurns);
    if (!Number.isInteger(maxTurns) || maxTurns < 1)
      return { kind: "usage_error", message: `argument --max-turns: invalid int value: '${f.maxTurns}'` };
  }
  return {
    kind: "chat",
    query: f.query,
    ...(typeof f.model === "string" && f.model !== "" ? { model: f.model } : {}),
    toolsets:
      typeof f.toolsets === "string"
        ? f.toolsets
            .split(",")
            .map((s) => s.trim())
            .filter(Boolean)
        : [],
    ...(maxTurns !== undefined ? { maxTurns } : {}),
    quiet: f.quiet === true,
    yolo: f.yolo === true,
    ...(typeof f.provider === "string" ? { provider: f.provider } : {}),
  };
}

/** `sessions export OUTPUT [--session-id ID] [--source SOURCE]`, the one sessions action. */
function parseSessions(args: readonly string[]): HermesCommand {
  const [action, ...more] = args;
  if (action !== "export")
    return {
      kind: "usage_error",
      message: `sessions: ${action === undefined ? "an action is required" : `unsupported action '${action}'`} (export)`,
    };
  const p = parseFlags(more, EXPORT_FLAGS);
  if ("error" in p) return { kind: "usage_error", message: p.error };
  if (p.positionals.length !== 1)
    return { kind: "usage_error", message: "sessions export needs exactly one OUTPUT path (- for stdout)" };
  const f = p.flags;
  return {
    kind: "export",
    output: p.positionals[0]!,
    ...(typeof f.sessionId === "string" ? { sessionId: f.sessionId } : {}),
    ...(typeof f.source === "string" ? { source: f.source } : {}),
  };
}
