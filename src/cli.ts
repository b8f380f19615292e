#!/usr/bin/env node
/**
 * trajrl-validator: one entry for every job. Subcommands live in src/cli/*.ts.
 * Errors caused by what the operator or a miner handed us are one line on stderr, exit 1.
 */
import { Command, CommanderError } from "commander";
import { registerBackup } from "./cli/backup.js";
import { registerBench } from "./cli/bench.js";
import { registerEngines } from "./cli/engines.js";
import { registerEngySim } from "./cli/engy-sim.js";
import { registerEval } from "./cli/eval.js";
import { registerImages } from "./cli/images.js";
import { registerLocalnet } from "./cli/localnet.js";
import { registerMeter } from "./cli/meter.js";
import { registerPack } from "./cli/pack.js";
import { registerPolicy } from "./cli/policy.js";
import { registerPreflight } from "./cli/preflight.js";
import { registerRun } from "./cli/run.js";
import { registerScenarios } from "./cli/scenarios.js";
import { registerStatus } from "./cli/status.js";
import { registerVerify } from "./cli/verify.js";
import { isAbortError, ValidatorError } from "./errors.js";
import { termLines } from "./terminal-text.js";
import { VERSION } from "./version.js";

export function buildProgram(): Command {
  const program = new Command();
  program
    .name("trajrl-validator")
    .description("TrajectoryRL Season 2 validator (Bittensor subnet 11)")
    .version(VERSION)
    .showHelpAfterError()
    .exitOverride();
  registerEval(program);
  registerPack(program);
  registerEngySim(program);
  registerScenarios(program);
  registerMeter(program);
  registerPolicy(program);
  registerRun(program);
  registerStatus(program);
  registerImages(program);
  registerBench(program);
  registerPreflight(program);
  registerLocalnet(program);
  registerEngines(program);
  registerVerify(program);
  registerBackup(program);
  return program;
}

export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === "number" ? process.exitCode : 0;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode;
    if (
      err instanceof ValidatorError &&
      (err.failureClass === "input" || !err.retryable || err.failureClass === "policy")
    ) {
      process.stderr.write(`error: ${termLines(err.message)}\n`);
      return 1;
    }
    if (isAbortError(err)) {
      process.stderr.write("aborted\n");
      return 130;
    }
    const e = err as Error;
    process.stderr.write(`error: ${termLines(e?.message ?? String(err))}\n`);
    if (process.env.TRAJRL_DEBUG) process.stderr.write(`${e?.stack ?? ""}\n`);
    return 1;
  }
}

const invokedDirectly =
  import.meta.url === `file://${process.argv[1]}` ||
  process.argv[1]?.endsWith("/cli.ts") ||
  process.argv[1]?.endsWith("/cli.js");
/**
 * Every command's action resolves only when its work is done (servers wait for a signal), so a
 * handle still open afterwards is a leak (a socket, a timer): exit anyway once logs had time to flush.
 */
export function exitWhenDone(code: number, graceMs = 3000): void {
  process.exitCode = code;
  setTimeout(() => process.exit(code), graceMs).unref();
}

if (invokedDirectly) {
  main(process.argv).then((code) => exitWhenDone(code));
}
