/**
 * `trajrl-validator eval PACK...`: the validator's main job on packs from files — exactly the code a
 * validator runs on a challenge epoch. Embedded defaults: SQLite under DATA_DIR, the in-process Engy
 * simulator when no LLM_API_KEY is set, images built on first use. A killed run resumes when the same
 * command is run again. Two benches: the built-in suite (default, offline; its sets have names,
 * `--suite`) or the subnet's trajrl-bench (`--bench REF`; its specs have numbers, `--spec`).
 * `--json` prints the results alone on stdout; lines for people then go to stderr (see io.ts).
 */
import { mkdirSync, readFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import type { Command } from "commander";
import type { Config } from "../config.js";
import type { Environment } from "../environment/index.js";
import { InputError } from "../errors.js";
import type { EvaluationResult, ProgressView } from "../evaluation/index.js";
import { termText } from "../terminal-text.js";
import {
  benchProgressPrinter,
  type EvalResult,
  finishEval,
  reportPathOf,
  writeEvalEvidence,
} from "./eval-output.js";
import { humanOutput } from "./io.js";

interface EvalFlags {
  scenarios?: string;
  suite?: string;
  spec?: string;
  concurrency?: string;
  out?: string;
  json?: boolean;
  progress?: boolean;
  seed?: string;
  bench?: string;
  strictProvenance?: boolean;
  engines?: string;
}

function positiveInt(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1)
    throw new InputError("bad_flag", `${name} must be a positive integer, got ${JSON.stringify(v)}`);
  return n;
}

/** A pack's name in every view: its file's name, which whoever sent the file chose (escaped: src/terminal-text.ts). */
function labelOf(file: string, taken: Set<string>): string {
  const name = termText(basename(file).replace(/\.json$/i, ""));
  let label = name || "pack";
  for (let k = 2; taken.has(label); k++) label = `${name}-${k}`;
  taken.add(label);
  return label;
}

export function registerEval(program: Command): void {
  program
    .command("eval")
    .description("evaluate packs over the scenario suite (the validator's main job) and print a leaderboard")
    .argument("<packs...>", "pack JSON files")
    .option(
      "--suite <name>",
      "built-in suite: the set of scenarios/suites.json to run (default: SUITE, else builtin = all)",
    )
    .option("--scenarios <names>", "comma-separated scenario names instead of a suite or spec")
    .option(
      "--spec <n>",
      "with --bench: the subnet spec whose scenarios run (default: SPEC_NUMBER, else the newest published)",
    )
    .option("--concurrency <n>", "episodes in parallel (default: EVAL_CONCURRENCY, 3)")
    .option("--out <dir>", "per-episode artifacts and report.html go here")
    .option("--seed <n>", "simulator seed (only without LLM_API_KEY; default ENGY_SIM_SEED)")
    .option(
      "--bench <ref>",
      "run the subnet's benchmark from this trajrl-bench image (e.g. ghcr.io/trajectoryrl/sandbox-agent:latest); default: the built-in suite",
    )
    .option(
      "--strict-provenance",
      "an answer no metered model call produced fails its episode with quality 0 (local rule; the subnet only reports it)",
    )
    .option(
      "--engines <list>",
      "the Docker engines to run episodes on, as ENGINES (`name=a url=local slots=2; name=b url=tcp://HOST:2376 slots=2 tls=DIR`); default: ENGINES, else this host's engine",
    )
    .option(
      "--json",
      "print the results as JSON on stdout, alone (progress on stderr, when it is a terminal)",
    )
    .option("--progress", "with --json: show progress on stderr even when it is not a terminal")
    .action(runEval);
}

/** The `eval` action: flags → packs read → environment → each pack evaluated → results printed. */
async function runEval(packs: string[], flags: EvalFlags): Promise<void> {
  const { loadConfig } = await import("../config.js");
  const { createLogger } = await import("../log.js");
  const { openEnvironment } = await import("../environment/index.js");
  const { ProgressView, SHUTDOWN } = await import("../evaluation/index.js");
  const pino = (await import("pino")).default;

  const config = loadConfig(configEnvOf(flags));
  const { concurrency, selection } = selectionOf(flags, config);
  const inputs = readPacks(packs);
  // JSON logs go to a file: the terminal shows the progress view.
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  const outDir = flags.out ? resolve(flags.out) : undefined;
  const logFile = logFileOf(config, outDir, stamp);
  const log = createLogger({
    level: config.logLevel,
    destination: pino.destination({ dest: logFile, mkdir: true, sync: false }),
  });
  const interrupt = interruptOnSignals(SHUTDOWN);
  const env = await openEnvironment(config, {
    log,
    ...(flags.bench ? { bench: "registry" as const, benchRef: flags.bench } : {}),
  });
  // With --json, stdout carries the JSON alone: everything for people goes to `human`.
  const human = humanOutput(flags);
  const run: EvalRun = {
    env,
    flags,
    selection,
    concurrency,
    outDir,
    logFile,
    signal: interrupt.signal,
    say: human.line,
  };
  const view = new ProgressView(human.stream);
  const results: EvalResult[] = [];
  try {
    await evaluateAll(run, inputs, view, results);
  } finally {
    view.stop();
    await env.close();
    interrupt.dispose();
  }
  await finishEval(results, {
    json: Boolean(flags.json),
    aborted: interrupt.signal.aborted,
    say: run.say,
    reportPath: reportPathOf(outDir, config.dataDir, stamp),
  });
}

interface EvalRun {
  env: Environment;
  flags: EvalFlags;
  selection: Selection;
  concurrency: number;
  outDir: string | undefined;
  logFile: string;
  signal: AbortSignal;
  say: (line: string) => void;
}

interface Selection {
  specNumber?: number;
  suite?: string;
  scenarios?: string[];
}

interface PackInput {
  file: string;
  label: string;
  bytes: Buffer;
}

/** The flags that are settings (seed, strict provenance, engines) go through the configuration. */
function configEnvOf(flags: EvalFlags): Record<string, string | undefined> {
  const env0: Record<string, string | undefined> = { ...process.env };
  if (flags.seed !== undefined) env0.ENGY_SIM_SEED = flags.seed;
  if (flags.strictProvenance) env0.STRICT_PROVENANCE = "1";
  if (flags.engines !== undefined) env0.ENGINES = flags.engines;
  return env0;
}

/** The concurrency, and which scenarios run: a suite of the built-in bench, a spec of the subnet's, or names. */
function selectionOf(flags: EvalFlags, config: Config): { concurrency: number; selection: Selection } {
  // With a pool of engines their slots bound the evaluation unless --concurrency says otherwise.
  const engineSlots = config.evaluation.engines.explicit
    ? config.evaluation.engines.list.reduce((n, e) => n + (e.slots ?? config.evaluation.concurrency), 0)
    : undefined;
  const concurrency =
    positiveInt("--concurrency", flags.concurrency) ?? engineSlots ?? config.evaluation.concurrency;
  const spec = flags.spec === undefined ? undefined : Number(flags.spec);
  if (spec !== undefined && (!Number.isInteger(spec) || spec < 0))
    throw new InputError("bad_flag", `--spec must be a number`);
  // Spec numbers are the subnet's; the built-in suite's sets have names.
  if (spec !== undefined && !flags.bench)
    throw new InputError(
      "bad_flag",
      `--spec ${flags.spec} names a subnet spec: it needs --bench REF (the built-in suite has named sets: --suite NAME)`,
    );
  if (flags.suite !== undefined && flags.bench)
    throw new InputError(
      "bad_flag",
      "--suite names a set of the built-in suite; with --bench the subnet's specs apply (--spec N)",
    );
  const scenarioNames = flags.scenarios
    ?.split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const selection = {
    ...(spec !== undefined ? { specNumber: spec } : {}),
    ...(flags.suite !== undefined ? { suite: flags.suite } : {}),
    ...(scenarioNames ? { scenarios: scenarioNames } : {}),
  };
  return { concurrency, selection };
}

/** Every pack is read first: a missing file is the operator's mistake, reported before any work. */
function readPacks(packs: string[]): PackInput[] {
  const taken = new Set<string>();
  return packs.map((file) => {
    try {
      return { file, label: labelOf(file, taken), bytes: readFileSync(file) };
    } catch (err) {
      throw new InputError(
        "file_not_readable",
        `${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
  });
}

function logFileOf(config: Config, outDir: string | undefined, stamp: string): string {
  const logDir = outDir ?? join(config.dataDir, "logs");
  mkdirSync(logDir, { recursive: true });
  return join(logDir, outDir ? "eval.log" : `eval-${stamp}.log`);
}

/** The first Ctrl-C stops for a resumable restart; the second exits at once. */
function interruptOnSignals(reason: unknown): { signal: AbortSignal; dispose(): void } {
  const ac = new AbortController();
  let signals = 0;
  const onSignal = () => {
    signals++;
    if (signals > 1) process.exit(130);
    process.stderr.write(
      "\ninterrupting: cleaning up containers (run the same command again to resume)...\n",
    );
    ac.abort(reason);
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  return {
    signal: ac.signal,
    dispose: () => {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    },
  };
}

/** Each pack in turn, until an interrupt; its evidence written and its result said. */
async function evaluateAll(
  run: EvalRun,
  inputs: PackInput[],
  view: ProgressView,
  results: EvalResult[],
): Promise<void> {
  const { evaluatePack } = await import("../evaluation/index.js");
  const { loadPack } = await import("../pack/index.js");
  const { env, say, outDir } = run;
  const names = await announceRun(run);
  // Images are built or pulled as each pack's evaluation starts (cached after the first).
  const onBenchProgress = benchProgressPrinter(say, env.bench.kind === "registry");
  const signer = await signerOf(env);
  for (const input of inputs) {
    if (run.signal.aborted) break;
    view.start(`\n${input.label}`, names);
    const result = await evaluatePack(env, {
      pack: loadPack(input.bytes),
      label: input.label,
      ...run.selection,
      source: "local",
      ...(outDir ? { outDir: join(outDir, input.label) } : {}),
      concurrency: run.concurrency,
      signal: run.signal,
      onEvent: (e) => view.onEvent(e),
      onBenchProgress,
    });
    view.stop();
    const evidence = await writeEvalEvidence(env, result, {
      signer,
      dir: outDir ?? env.config.dataDir,
      log: env.log,
      say,
    });
    results.push({ label: input.label, result, ...(evidence ? { evidence } : {}) });
    await sayResult(run, input.label, result);
  }
}

/** One line on what runs where, the engines, and where the logs go; returns the scenarios' names. */
async function announceRun(run: EvalRun): Promise<string[]> {
  const { resolveRequest } = await import("../evaluation/index.js");
  const { specLabel } = await import("../scenarios/index.js");
  const { env, say } = run;
  const config = env.config;
  const resolved = resolveRequest(env, run.selection);
  const what =
    resolved.suite !== undefined
      ? `${env.bench.label} · ${specLabel(resolved.spec, resolved.suite)}`
      : `${env.bench.label} · spec ${resolved.spec}`;
  say(
    `${config.llm.simulated ? "Engy simulator (no LLM_API_KEY set)" : `metering ${config.llm.baseUrl}`} · ${what} · ${resolved.names.length} scenarios · concurrency ${run.concurrency} · cap $${resolved.episodeCapUsd} per episode`,
  );
  if (config.evaluation.engines.explicit)
    say(
      `engines: ${env.pool
        .views()
        .map((v) => `${v.name} ${v.state}${v.slots === null ? "" : ` ×${v.slots}`}`)
        .join(", ")}`,
    );
  say(`logs: ${run.logFile}`);
  return [...resolved.names];
}

/** Every verdict's evidence is signed: the wallet's hotkey when readable, else this machine's local key. */
async function signerOf(env: Environment) {
  const { evalSigner } = await import("../evidence/index.js");
  const chain = env.config.chain;
  return evalSigner(
    { walletPath: chain.walletPath, walletName: chain.walletName, walletHotkey: chain.walletHotkey },
    env.config.dataDir,
    env.log,
  );
}

async function sayResult(run: EvalRun, label: string, result: EvaluationResult): Promise<void> {
  const { verdictTable } = await import("../evaluation/index.js");
  if (result.kind === "verdict" && !run.flags.json) {
    const v = result.verdict;
    run.say(
      v.rejected
        ? `${label}: REJECTED ${v.rejection?.code}: ${termText(v.rejection?.message)}`
        : verdictTable(v),
    );
  } else if (result.kind === "discarded") {
    run.say(`${label}: DISCARDED (${result.code}): ${termText(result.message)}`);
  } else if (result.kind === "aborted") {
    run.say(`${label}: interrupted (${result.reason})`);
  }
}
