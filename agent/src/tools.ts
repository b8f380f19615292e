/**
 * The five tools offered to the model, with Hermes' names, and their implementations. Every
 * failure becomes a tool result starting with `error:` (the model reads it and carries on); no
 * tool call can crash the agent.
 */
import { closeSync, openSync, readSync } from "node:fs";
import { mkdir, readFile, stat, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { dirname, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import type { ToolCallRecord } from "../contract.js";
import { capText } from "./output.js";
import { parseToolArguments } from "./repair.js";
import { runCommand, signalStatus } from "./shell.js";

export interface ToolContext {
  workdir: string;
  toolTimeoutS: number;
  outputCap: number;
  /** Environment of terminal commands (the agent's own, minus secrets). */
  env: NodeJS.ProcessEnv;
  /** Grace between SIGTERM and SIGKILL after a command timeout. */
  killGraceMs?: number;
  /**
   * The user every tool runs as, when the agent is root: shell commands are spawned as it, and the
   * file tools run in a worker process of it (`agent.js --tool-worker`), so no tool can reach what
   * only the agent may write (its session record) or the agent's process.
   */
  user?: ToolUser;
}

export interface ToolUser {
  uid: number;
  gid: number;
  /** Where the file tools run as this user. */
  files: FileToolRunner;
}

export interface ToolOutcome {
  /** What the model sees as the tool message content. */
  content: string;
  record: Omit<ToolCallRecord, "id" | "name" | "arguments_raw">;
}

export const TOOL_NAMES = ["terminal", "read_file", "write_file", "patch", "search_files"] as const;
export type ToolName = (typeof TOOL_NAMES)[number];

/** Longest timeout a model may ask of one command. */
export const MAX_COMMAND_TIMEOUT_S = 1800;
const SEARCH_MAX_LINES = 200;
const SEARCH_LINE_CHARS = 400;

export function toolSchemas(toolTimeoutS: number): object[] {
  const fn = (name: ToolName, description: string, properties: object, required: string[]) => ({
    type: "function",
    function: { name, description, parameters: { type: "object", properties, required } },
  });
  return [
    fn(
      "terminal",
      "Run a shell command with `bash -lc` in the working directory and return its combined stdout and " +
        "stderr followed by `[exit code: N]`. stdin is closed, so never run interactive programs. Long " +
        `output is cut in the middle. Default timeout ${toolTimeoutS} s; on timeout the command and ` +
        "everything it started are killed.",
      {
        command: { type: "string", description: "The command line to run." },
        timeout: {
          type: "integer",
          description: `Timeout in seconds (default ${toolTimeoutS}, at most ${MAX_COMMAND_TIMEOUT_S}).`,
        },
      },
      ["command"],
    ),
    fn(
      "read_file",
      "Read a text file and return its content. Relative paths are resolved against the working " +
        "directory. Long files are cut in the middle; read a range with terminal (sed -n '100,200p' FILE).",
      { path: { type: "string", description: "Path of the file to read." } },
      ["path"],
    ),
    fn(
      "write_file",
      "Create or overwrite a file with exactly the given content. Parent directories are created.",
      {
        path: { type: "string", description: "Path of the file to write." },
        content: { type: "string", description: "The complete new content of the file." },
      },
      ["path", "content"],
    ),
    fn(
      "patch",
      "Edit a file by replacing one exact occurrence of `old` with `new`. `old` must match the file " +
        "exactly (whitespace included) and occur exactly once; include surrounding lines to make it unique.",
      {
        path: { type: "string", description: "Path of the file to edit." },
        old: { type: "string", description: "The exact text to replace." },
        new: { type: "string", description: "The replacement text (may be empty)." },
      },
      ["path", "old", "new"],
    ),
    fn(
      "search_files",
      "Search file contents recursively with an extended regular expression (like `grep -rnE`). " +
        `Returns up to ${SEARCH_MAX_LINES} matching lines as path:line:text.`,
      {
        pattern: { type: "string", description: "Extended regular expression to search for." },
        path: {
          type: "string",
          description: "File or directory to search (default: the working directory).",
        },
      },
      ["pattern"],
    ),
  ];
}

const ALIASES: Record<string, Record<string, string>> = {
  // Hermes' own patch tool calls these old_string/new_string; models trained on it may send them.
  patch: { old_string: "old", new_string: "new", file_path: "path" },
  read_file: { file_path: "path", filename: "path" },
  write_file: { file_path: "path", filename: "path", text: "content" },
  terminal: { cmd: "command" },
  search_files: { regex: "pattern", query: "pattern", dir: "path" },
};

/** Run one tool call from its raw (possibly malformed) JSON arguments. Never throws. */
export async function executeToolCall(name: string, rawArgs: string, ctx: ToolContext): Promise<ToolOutcome> {
  const started = performance.now();
  const done = (content: string, rec: Partial<ToolOutcome["record"]> & { ok: boolean }): ToolOutcome => ({
    content,
    record: {
      duration_ms: Math.round(performance.now() - started),
      output_bytes: Buffer.byteLength(content),
      ...rec,
    },
  });
  if (!(TOOL_NAMES as readonly string[]).includes(name)) {
    return done(`error: unknown tool "${name}". Available tools: ${TOOL_NAMES.join(", ")}.`, {
      ok: false,
      error_code: "unknown_tool",
    });
  }
  const parsed = parseToolArguments(rawArgs);
  if (!parsed.ok) {
    const shown = rawArgs.length > 200 ? `${rawArgs.slice(0, 200)}…` : rawArgs;
    return done(
      `error: the arguments of this ${name} call are not valid JSON (${parsed.error}), so nothing was run. ` +
        `You sent: ${shown}\nResend the call with its arguments as one JSON object, e.g. ${example(name as ToolName)}.`,
      { ok: false, error_code: "bad_json" },
    );
  }
  const args = { ...parsed.args };
  for (const [alias, canonical] of Object.entries(ALIASES[name] ?? {})) {
    if (args[canonical] === undefined && args[alias] !== undefined) args[canonical] = args[alias];
  }
  const note = parsed.repaired
    ? `[note: the arguments were not valid JSON and were repaired: ${parsed.repaired}]\n`
    : "";
  let outcome: ToolOutcome;
  try {
    outcome =
      ctx.user && name !== "terminal"
        ? await runAsToolUser(name as ToolName, args, ctx, ctx.user)
        : await run(name as ToolName, args, ctx);
  } catch (e) {
    outcome = fail("tool_failed", (e as Error).message);
  }
  const content = note + outcome.content;
  return {
    content,
    record: {
      ...outcome.record,
      duration_ms: Math.round(performance.now() - started),
      output_bytes: Buffer.byteLength(content),
      ...(parsed.repaired ? { repaired: parsed.repaired } : {}),
    },
  };
}

function example(name: ToolName): string {
  switch (name) {
    case "terminal":
      return '{"command": "ls -la"}';
    case "read_file":
      return '{"path": "/workspace/INSTRUCTION.md"}';
    case "write_file":
      return '{"path": "out.txt", "content": "hello\\n"}';
    case "patch":
      return '{"path": "main.py", "old": "x = 1", "new": "x = 2"}';
    case "search_files":
      return '{"pattern": "TODO", "path": "."}';
  }
}

class ArgError extends Error {}

function requireString(args: Record<string, unknown>, key: string, tool: ToolName): string {
  const v = args[key];
  if (typeof v === "string") return v;
  if (v === undefined || v === null)
    throw new ArgError(`missing required argument "${key}" (a string) for ${tool}`);
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  throw new ArgError(
    `argument "${key}" of ${tool} must be a string, got ${Array.isArray(v) ? "an array" : typeof v}`,
  );
}

type Result = { content: string; record: ToolOutcome["record"] };
export type ToolResult = Result;
const ok = (content: string, extra: Partial<ToolOutcome["record"]> = {}): Result => ({
  content,
  record: { ok: true, duration_ms: 0, output_bytes: 0, ...extra },
});
const fail = (code: string, message: string): Result => ({
  content: `error: ${message}`,
  record: { ok: false, error_code: code, duration_ms: 0, output_bytes: 0 },
});

async function run(name: ToolName, args: Record<string, unknown>, ctx: ToolContext): Promise<Result> {
  try {
    switch (name) {
      case "terminal":
        return await terminal(args, ctx);
      case "read_file":
        return await readFileTool(args, ctx);
      case "write_file":
        return await writeFileTool(args, ctx);
      case "patch":
        return await patchTool(args, ctx);
      case "search_files":
        return await searchFiles(args, ctx);
    }
  } catch (e) {
    if (e instanceof ArgError) return fail("bad_arguments", e.message);
    const err = e as NodeJS.ErrnoException;
    return fail(err.code === "ENOENT" ? "not_found" : "tool_failed", err.message);
  }
}

export function resolvePath(p: string, workdir: string): string {
  if (p === "~" || p.startsWith("~/")) return resolve(homedir(), p.slice(2));
  return resolve(workdir, p);
}

function timeoutSeconds(v: unknown, dflt: number): number {
  const n = typeof v === "string" ? Number(v) : v;
  if (typeof n !== "number" || !Number.isFinite(n) || n <= 0) return dflt;
  return Math.min(Math.max(1, n), MAX_COMMAND_TIMEOUT_S);
}

async function terminal(args: Record<string, unknown>, ctx: ToolContext): Promise<Result> {
  const command = requireString(args, "command", "terminal");
  if (command.trim() === "") throw new ArgError('argument "command" of terminal is empty');
  const timeoutS = timeoutSeconds(args.timeout, ctx.toolTimeoutS);
  const r = await runCommand(command, {
    cwd: ctx.workdir,
    env: ctx.env,
    timeoutMs: timeoutS * 1000,
    outputCap: ctx.outputCap,
    killGraceMs: ctx.killGraceMs,
    ...(ctx.user ? { user: ctx.user } : {}),
  });
  if (r.spawnError !== undefined) return fail("spawn_failed", `could not start bash: ${r.spawnError}`);
  const out = r.totalBytes === 0 ? "(no output)" : r.output.replace(/\n$/, "");
  const status = r.exitCode ?? signalStatus(r.signal);
  let trailer: string;
  if (r.timedOut) trailer = `[timed out after ${timeoutS} s: the command and its process group were killed]`;
  else if (r.exitCode === null && r.signal) trailer = `[killed by ${r.signal}; exit code: ${status}]`;
  else trailer = `[exit code: ${status}]`;
  const good = !r.timedOut && r.exitCode === 0;
  return {
    content: `${out}\n${trailer}`,
    record: {
      ok: good,
      ...(good ? {} : { error_code: r.timedOut ? "timeout" : "exit_nonzero" }),
      exit_code: r.timedOut ? null : status,
      ...(r.timedOut ? { timed_out: true } : {}),
      ...(r.omittedBytes > 0 ? { truncated_bytes: r.omittedBytes } : {}),
      duration_ms: 0,
      output_bytes: 0,
    },
  };
}

async function readFileTool(args: Record<string, unknown>, ctx: ToolContext): Promise<Result> {
  const path = resolvePath(requireString(args, "path", "read_file"), ctx.workdir);
  const st = await stat(path).catch((e: NodeJS.ErrnoException) => {
    if (e.code === "ENOENT") throw Object.assign(new Error(`no such file: ${path}`), { code: "ENOENT" });
    throw e;
  });
  if (st.isDirectory())
    return fail("is_directory", `${path} is a directory; list it with terminal (ls -la ${path})`);
  const cap = ctx.outputCap;
  let buf: Buffer;
  let omitted = 0;
  if (st.size <= cap) {
    buf = await readFile(path);
  } else {
    // Read only the two ends of a large file: the middle is dropped anyway.
    const half = Math.floor(cap / 2);
    const fd = openSync(path, "r");
    try {
      const head = Buffer.alloc(half);
      const tail = Buffer.alloc(cap - half);
      const h = readSync(fd, head, 0, head.length, 0);
      const t = readSync(fd, tail, 0, tail.length, st.size - tail.length);
      omitted = st.size - h - t;
      buf = Buffer.concat([
        head.subarray(0, h),
        Buffer.from(
          `\n[... ${omitted} bytes omitted; read a range with terminal: sed -n 'A,Bp' ${path} ...]\n`,
        ),
        tail.subarray(0, t),
      ]);
    } finally {
      closeSync(fd);
    }
  }
  if (buf.subarray(0, 8000).includes(0))
    return fail(
      "binary_file",
      `${path} looks binary (${st.size} bytes); inspect it with terminal (file, od -c | head)`,
    );
  const text = buf.toString("utf8");
  if (text === "") return ok(`(empty file: ${path})`);
  return ok(text, omitted > 0 ? { truncated_bytes: omitted } : {});
}

async function writeFileTool(args: Record<string, unknown>, ctx: ToolContext): Promise<Result> {
  const path = resolvePath(requireString(args, "path", "write_file"), ctx.workdir);
  const content = requireString(args, "content", "write_file");
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, content, "utf8");
  return ok(`wrote ${Buffer.byteLength(content)} bytes to ${path}`);
}

async function patchTool(args: Record<string, unknown>, ctx: ToolContext): Promise<Result> {
  const path = resolvePath(requireString(args, "path", "patch"), ctx.workdir);
  const oldText = requireString(args, "old", "patch");
  const newText = requireString(args, "new", "patch");
  if (oldText === "")
    return fail("bad_arguments", 'argument "old" of patch is empty; use write_file to create a file');
  const text = await readFile(path, "utf8").catch((e: NodeJS.ErrnoException) => {
    if (e.code === "ENOENT") throw Object.assign(new Error(`no such file: ${path}`), { code: "ENOENT" });
    throw e;
  });
  const first = text.indexOf(oldText);
  if (first === -1) {
    const hint = text.includes(oldText.trim())
      ? " (it does occur with different surrounding whitespace: copy it exactly)"
      : "; read the file again and copy the text exactly, whitespace included";
    return fail("no_match", `the "old" text was not found in ${path}${hint}`);
  }
  let count = 0;
  for (let i = text.indexOf(oldText); i !== -1; i = text.indexOf(oldText, i + oldText.length)) count++;
  if (count > 1)
    return fail(
      "not_unique",
      `the "old" text occurs ${count} times in ${path}; include more surrounding lines so it matches exactly once`,
    );
  // Splice by index: String.replace would interpret `$&`, `$1`… in the replacement.
  const next = text.slice(0, first) + newText + text.slice(first + oldText.length);
  await writeFile(path, next, "utf8");
  const line = text.slice(0, first).split("\n").length;
  const oldLines = oldText.split("\n").length;
  const newLines = newText.split("\n").length;
  return ok(
    `patched ${path}: replaced 1 occurrence at line ${line} (${oldLines} line(s) → ${newLines} line(s))`,
  );
}

const OMITTED_MARKER = /^\[\.\.\. \d+ bytes omitted \.\.\.\]$/;
const shq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

async function searchFiles(args: Record<string, unknown>, ctx: ToolContext): Promise<Result> {
  const pattern = requireString(args, "pattern", "search_files");
  if (pattern === "") throw new ArgError('argument "pattern" of search_files is empty');
  const rawPath =
    args.path === undefined || args.path === null ? "." : requireString(args, "path", "search_files");
  const path = resolvePath(rawPath || ".", ctx.workdir);
  await stat(path).catch((e: NodeJS.ErrnoException) => {
    if (e.code === "ENOENT")
      throw Object.assign(new Error(`no such file or directory: ${path}`), { code: "ENOENT" });
    throw e;
  });
  const cmd =
    "grep -rnIE --color=never --exclude-dir=.git --exclude-dir=node_modules --exclude-dir=__pycache__ " +
    `-e ${shq(pattern)} -- ${shq(path)}`;
  // Bound what grep can produce before line-capping: lines beyond the cap are counted, not kept.
  const r = await runCommand(cmd, {
    cwd: ctx.workdir,
    env: ctx.env,
    timeoutMs: Math.min(ctx.toolTimeoutS, 60) * 1000,
    outputCap: Math.max(ctx.outputCap, SEARCH_MAX_LINES * SEARCH_LINE_CHARS),
    killGraceMs: ctx.killGraceMs,
  });
  if (r.spawnError !== undefined) return fail("spawn_failed", `could not run grep: ${r.spawnError}`);
  if (r.timedOut) return fail("timeout", "search timed out; narrow the path or the pattern");
  if (r.exitCode === 1) return ok(`no matches for /${pattern}/ in ${path}`);
  if (r.exitCode !== 0) return fail("search_failed", r.output.trim() || `grep exited with ${r.exitCode}`);
  const lines = r.output.split("\n").filter((l) => l !== "" && !OMITTED_MARKER.test(l));
  const shown = lines
    .slice(0, SEARCH_MAX_LINES)
    .map((l) => (l.length > SEARCH_LINE_CHARS ? `${l.slice(0, SEARCH_LINE_CHARS)}…` : l));
  const more = lines.length > SEARCH_MAX_LINES || r.omittedBytes > 0;
  const body = capText(shown.join("\n"), ctx.outputCap).text;
  return ok(more ? `${body}\n[more matches not shown; narrow the pattern or the path]` : body, {
    ...(more ? { truncated_bytes: Math.max(1, r.omittedBytes) } : {}),
  });
}

// ---- the file tools as the tool user -------------------------------------------------------

/** What a file tool needs of the context (no environment: the worker has its own). */
export interface FileToolContext {
  workdir: string;
  toolTimeoutS: number;
  outputCap: number;
  killGraceMs?: number | undefined;
}

/** Runs file tools somewhere else (a worker process of the tool user: tool-worker.ts). */
export interface FileToolRunner {
  run(
    name: ToolName,
    args: Record<string, unknown>,
    ctx: FileToolContext,
    timeoutMs: number,
  ): Promise<ToolResult>;
}

/** One file tool (not terminal) in this process: what a tool worker runs. Never throws. */
export async function runFileTool(
  name: ToolName,
  args: Record<string, unknown>,
  ctx: FileToolContext,
): Promise<ToolResult> {
  if (name === "terminal" || !(TOOL_NAMES as readonly string[]).includes(name))
    return fail("tool_failed", `not a file tool: ${String(name)}`);
  try {
    return await run(name, args, { ...ctx, env: process.env });
  } catch (e) {
    return fail("tool_failed", (e as Error).message);
  }
}

function runAsToolUser(
  name: ToolName,
  args: Record<string, unknown>,
  ctx: ToolContext,
  user: ToolUser,
): Promise<ToolResult> {
  // search_files bounds its grep at 60 s; the worker gets a little more to report it.
  const timeoutS = name === "search_files" ? Math.min(ctx.toolTimeoutS, 60) + 5 : ctx.toolTimeoutS;
  return user.files.run(
    name,
    args,
    {
      workdir: ctx.workdir,
      toolTimeoutS: ctx.toolTimeoutS,
      outputCap: ctx.outputCap,
      killGraceMs: ctx.killGraceMs,
    },
    timeoutS * 1000,
  );
}

/** Bytes a worker's answer may take (read_file and search_files answer within their caps). */
export function workerAnswerCap(outputCap: number): number {
  return 4 * Math.max(outputCap, SEARCH_MAX_LINES * SEARCH_LINE_CHARS) + 65536;
}
