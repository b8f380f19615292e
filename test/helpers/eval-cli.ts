/**
 * The `eval` command as a child process, the way an operator or miner runs it (real Docker, the
 * in-process Engy simulator at latency 0, seed 11), and what its processes left behind.
 */
import type { ChildProcess } from "node:child_process";
import { startCli } from "./cli.js";

export interface EvalRun {
  code: number | null;
  stdout: string;
  stderr: string;
  pid: number;
  ms: number;
}

export async function runEvalCli(
  dataDir: string,
  args: string[],
  o: { killAfterMs?: number; onChild?: (c: ChildProcess) => void; env?: Record<string, string> } = {},
): Promise<EvalRun> {
  const t0 = performance.now();
  const run = startCli(["eval", ...args], {
    env: { DATA_DIR: dataDir, LLM_API_KEY: "", ENGY_SIM_SEED: "11", ENGY_SIM_LATENCY_SCALE: "0", ...o.env },
    ...(o.killAfterMs === undefined ? {} : { timeoutMs: o.killAfterMs, killSignal: "SIGKILL" as const }),
  });
  o.onChild?.(run.child);
  const { code, stdout, stderr, pid } = await run.done;
  return { code, stdout, stderr, pid, ms: performance.now() - t0 };
}
