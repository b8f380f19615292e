/**
 * The `eval` command as a child process, the way an operator or miner runs it (real Docker, the
 * in-process Engy simulator at latency 0, seed 11), and what its processes left behind.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { requireDocker } from "./docker.js";
import { REPO_ROOT } from "./episode.js";

export interface EvalRun {
  code: number | null;
  stdout: string;
  stderr: string;
  pid: number;
  ms: number;
}

export function runEvalCli(
  dataDir: string,
  args: string[],
  o: { killAfterMs?: number; onChild?: (c: ChildProcess) => void; env?: Record<string, string> } = {},
): Promise<EvalRun> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const child = spawn(
      process.execPath,
      ["--import", "tsx", join(REPO_ROOT, "src/cli.ts"), "eval", ...args],
      {
        cwd: REPO_ROOT,
        env: {
          ...process.env,
          DATA_DIR: dataDir,
          LLM_API_KEY: "",
          ENGY_SIM_SEED: "11",
          ENGY_SIM_LATENCY_SCALE: "0",
          ...o.env,
        },
      },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer =
      o.killAfterMs === undefined ? undefined : setTimeout(() => child.kill("SIGKILL"), o.killAfterMs);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, pid: child.pid!, ms: performance.now() - t0 });
    });
    o.onChild?.(child);
  });
}

/** Containers and networks made by the given processes (other test files may be running episodes too). */
export async function leftoversOf(pids: number[]): Promise<number> {
  const docker = await requireDocker();
  let n = 0;
  for (const pid of pids) {
    const label = [`trajrl.pid=${pid}`];
    n += (await docker.listContainers({ all: true, filters: { label } })).length;
    n += (await docker.listNetworks({ filters: { label } })).length;
  }
  return n;
}
