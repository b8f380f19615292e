/**
 * `check`'s runtime line: the OCI runtime episodes get on each engine, EPISODE_RUNTIME resolved as
 * the pool resolves it at start (src/sandbox/runtime.ts). gVisor is ok; runc is a warning where a
 * vote comes of it (finney, test): miners' and models' code would share the host's kernel there.
 */
import type { Config } from "../config.js";
import type { ResolvedRuntime } from "../sandbox/index.js";
import type { CheckLevel, CheckResult } from "./preflight.js";
import { withTimeout } from "./within.js";

interface EngineRuntime {
  name: string;
  runtime?: ResolvedRuntime;
  problem?: string;
}

async function runtimeOn(
  config: Config,
  engine: Config["evaluation"]["engines"]["list"][number],
  timeoutMs: number,
): Promise<EngineRuntime> {
  const { chooseEpisodeRuntime, connectEngine, engineRuntimes } = await import("../sandbox/index.js");
  const sshAgent = config.evaluation.engines.sshAgent;
  try {
    const conn = connectEngine({
      url: engine.url,
      ...(engine.tlsDir ? { tlsDir: engine.tlsDir } : {}),
      ...(engine.sshKey ? { sshKey: engine.sshKey } : {}),
      ...(sshAgent ? { sshAgent } : {}),
    });
    try {
      const available = await withTimeout(engineRuntimes(conn.docker), timeoutMs, engine.name);
      return {
        name: engine.name,
        runtime: chooseEpisodeRuntime(config.evaluation.episodeRuntime, available),
      };
    } finally {
      conn.sever("check done");
    }
  } catch (err) {
    return { name: engine.name, problem: (err as Error).message };
  }
}

/** Pure: the line for what each engine would run episodes under. */
export function runtimeResult(
  engines: readonly EngineRuntime[],
  setting: Config["evaluation"]["episodeRuntime"],
  network: Config["chain"]["network"],
): CheckResult {
  const votes = network !== "local";
  const text = (e: EngineRuntime) =>
    e.runtime
      ? `${e.name} ${e.runtime.name} (${e.runtime.gvisor ? "gVisor" : "the host's kernel"})`
      : `${e.name}: ${e.problem}`;
  const detail = `EPISODE_RUNTIME=${setting}: ${engines.map(text).join("; ")}`;
  const fix =
    "register gVisor on each engine (README, Several hosts: `bash scripts/runsc-up.sh --print` shows the daemon.json entry), then EPISODE_RUNTIME=auto";
  const missing = engines.filter((e) => !e.runtime);
  const onRunc = engines.filter((e) => e.runtime && !e.runtime.gvisor);
  let level: CheckLevel = "ok";
  if (missing.length) level = engines[0]?.runtime ? "warn" : "fail";
  else if (onRunc.length && votes) level = "warn";
  if (level === "ok") return { name: "runtime", level, detail };
  const why = missing.length
    ? ""
    : `; miners' and models' code shares the host's kernel on ${onRunc.map((e) => e.name).join(", ")} (${network})`;
  return { name: "runtime", level, detail: `${detail}${why}`, fix };
}

export async function checkRuntime(ctx: { config: Config; timeoutMs: number }): Promise<CheckResult> {
  const { config } = ctx;
  const engines = await Promise.all(
    config.evaluation.engines.list.map((e) => runtimeOn(config, e, ctx.timeoutMs)),
  );
  return runtimeResult(engines, config.evaluation.episodeRuntime, config.chain.network);
}
