import type { Command } from "commander";
import { numberFlag } from "./flags.js";
import { out } from "./io.js";

interface EngySimFlags {
  host: string;
  port?: string;
  seed?: string;
  profile?: string;
  scenarios?: string;
  latencyScale?: string;
  apiKey?: string[];
}

export function registerEngySim(program: Command): void {
  program
    .command("engy-sim")
    .description(
      "serve the deterministic Engy simulator (OpenAI-compatible, the 8 allowlisted models); prints its base URL first",
    )
    .option("--host <host>", "listen address", "127.0.0.1")
    .option("--port <port>", "port (0 = any free port)", "8791")
    .option("--seed <n>", "seed of every simulated decision (default ENGY_SIM_SEED)")
    .option("--profile <file>", "JSON overriding the per-model profiles (default ENGY_SIM_PROFILE)")
    .option("--scenarios <dir>", "scenarios to recognise (default SCENARIOS_DIR)")
    .option(
      "--latency-scale <x>",
      "multiplier on simulated latencies, 0 = instant (default ENGY_SIM_LATENCY_SCALE)",
    )
    .option("--api-key <key...>", "accepted bearer tokens (default: any non-empty token)")
    .action(async (flags: EngySimFlags) => {
      const port = numberFlag("port", flags.port, 0, 65535, true);
      const seed = numberFlag("seed", flags.seed, 0, Number.MAX_SAFE_INTEGER, true);
      const latencyScale = numberFlag("latency-scale", flags.latencyScale, 0, 100);
      const [{ loadConfig }, { createLogger }, { startEngySim }, pino] = await Promise.all([
        import("../config.js"),
        import("../log.js"),
        import("../engy-sim/index.js"),
        import("pino"),
      ]);
      const config = loadConfig();
      // stdout carries the URL (first line) for whoever started us; logs go to stderr.
      const log = createLogger({
        level: config.logLevel,
        name: "engy-sim",
        destination: pino.default.destination({ dest: 2, sync: false }),
      });
      const sim = await startEngySim({
        host: flags.host,
        port: port ?? 8791,
        seed: seed ?? config.sim.seed,
        profile: flags.profile ?? config.sim.profilePath,
        scenariosDir: flags.scenarios ?? config.evaluation.scenariosDir,
        latencyScale: latencyScale ?? config.sim.latencyScale,
        apiKeys: flags.apiKey && flags.apiKey.length > 0 ? flags.apiKey : "any",
        log,
      });
      out(sim.url);
      const signal = await new Promise<NodeJS.Signals>((done) => {
        process.once("SIGINT", () => done("SIGINT"));
        process.once("SIGTERM", () => done("SIGTERM"));
      });
      log.info({ signal, ...sim.stats() }, "engy_sim.stopping");
      await sim.close();
      log.flush();
    });
}
