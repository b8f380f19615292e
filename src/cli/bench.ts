/**
 * `bench build`: the offline trajrl-bench (src/bench/offline-bench.ts). Builds the sandbox-agent
 * base and one scenario image per scenario in upstream's image contract, named
 * `REGISTRY/NAMESPACE/{sandbox-agent,scenario-<name>}:TAG`, and with `--push` pushes them. Progress
 * lines go to stderr; `--json` prints the summary on stdout.
 */
import { readFileSync } from "node:fs";
import type { Command } from "commander";
import { out, warn } from "./io.js";
import { type ScenariosDirFlags, scenariosDirOf } from "./scenarios-flags.js";

interface BuildFlags extends ScenariosDirFlags {
  push?: string;
  name?: string;
  tag: string;
  scenarios?: string;
  json?: boolean;
  dockerConfig?: string;
  username?: string;
  passwordStdin?: boolean;
}

/** Where the images are named when nothing is pushed. */
export const LOCAL_BENCH_TARGET = "localhost/trajrl-bench";

export function registerBench(program: Command): void {
  const bench = program.command("bench").description("the offline trajrl-bench (upstream's image contract)");
  bench
    .command("build")
    .description(
      "build the sandbox-agent base and one scenario image per scenario (FROM it); with --push, push them",
    )
    .option("--push <registry/namespace>", "name the images REGISTRY/NAMESPACE/… and push them there")
    .option(
      "--name <registry/namespace>",
      `name the images REGISTRY/NAMESPACE/… without pushing (default ${LOCAL_BENCH_TARGET})`,
    )
    .option("--tag <tag>", "tag of every image (the bench channel)", "latest")
    .option("--scenarios <a,b>", "only these scenarios (default: all)")
    .option("--dir <dir>", "scenarios directory (default SCENARIOS_DIR, ./scenarios)")
    .option("--json", "print the build summary as JSON on stdout")
    .option(
      "--docker-config <dir>",
      "Docker config directory with the registry's credentials (default ~/.docker)",
    )
    .option("--username <user>", "registry user (with --password-stdin)")
    .option("--password-stdin", "read the registry password from stdin")
    .action(async (flags: BuildFlags) => {
      const [
        { loadConfig },
        { createLogger },
        sandboxMod,
        benchMod,
        { REPO_ROOT },
        { InputError, InfraError },
      ] = await Promise.all([
        import("../config.js"),
        import("../log.js"),
        import("../sandbox/index.js"),
        import("../bench/index.js"),
        import("../repo.js"),
        import("../errors.js"),
      ]);
      if (flags.push !== undefined && flags.name !== undefined)
        throw new InputError("invalid_flag", "--push and --name are exclusive (--push names and pushes)");
      if ((flags.username === undefined) !== (flags.passwordStdin !== true))
        throw new InputError("invalid_flag", "--username and --password-stdin go together");
      const target = benchMod.parseBenchTarget(flags.push ?? flags.name ?? LOCAL_BENCH_TARGET);
      const tag = benchMod.parseBenchTag(flags.tag);
      const scenarios = flags.scenarios
        ?.split(",")
        .map((s) => s.trim())
        .filter(Boolean);
      const config = loadConfig();
      const log = createLogger({
        level: config.logLevel === "info" ? "warn" : config.logLevel,
        destination: (await import("pino")).default.destination(2),
      });
      const docker = sandboxMod.connectDocker(config.evaluation.dockerSocket);
      await docker.ping().catch((err: Error) => {
        throw new InfraError(
          "docker_unavailable",
          `no Docker engine answers on ${config.evaluation.dockerSocket} (${err.message})`,
          { retryable: false },
        );
      });
      let auth: Awaited<ReturnType<typeof benchMod.pushAuthFor>> | undefined;
      if (flags.push !== undefined) {
        const password = flags.passwordStdin ? readFileSync(0, "utf8").replace(/\r?\n$/, "") : undefined;
        auth = await benchMod.pushAuthFor(target.registry, {
          ...(flags.username !== undefined ? { username: flags.username } : {}),
          ...(password !== undefined ? { password } : {}),
          ...(flags.dockerConfig !== undefined ? { dockerConfigDir: flags.dockerConfig } : {}),
        });
      }
      const bench = new benchMod.OfflineBench(docker, {
        repoRoot: REPO_ROOT,
        scenariosDir: await scenariosDirOf(flags),
        log,
        progress: (line) => warn(`bench: ${line}`),
      });
      const ac = new AbortController();
      const stop = () => ac.abort(new Error("interrupted"));
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
      try {
        const r = await bench.build({
          target: target.prefix,
          tag,
          ...(scenarios?.length ? { scenarios } : {}),
          push: flags.push !== undefined,
          ...(auth ? { auth } : {}),
          signal: ac.signal,
        });
        if (flags.json) out(JSON.stringify(r, null, 2));
        else {
          out(`${r.base.ref}${r.base.digest ? `@${r.base.digest}` : ""}`);
          for (const s of r.scenarios) out(`${s.ref}${s.digest ? `@${s.digest}` : ""}`);
        }
      } finally {
        process.off("SIGINT", stop);
        process.off("SIGTERM", stop);
      }
    });
}
