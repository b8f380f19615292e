/**
 * `scenarios check [NAMES...]`: every scenario proves itself on the real engine. For each: build
 * its image (reused by content hash), run solution/solve.sh as the agent user in container A (no
 * network), grade that deliverable alone in a fresh container B (must be tests/tests), grade an
 * empty deliverable (must equal task.toml's null_floor). Prints a table; exit 1 if any fails.
 */
import type { Command } from "commander";
import { out, warn } from "./io.js";
import { parseSpecFlag, type ScenariosDirFlags, scenariosDirOf } from "./scenarios-flags.js";

interface CheckFlags extends ScenariosDirFlags {
  spec?: string;
  concurrency?: string;
  json?: boolean;
}

export function registerScenariosCheck(scenarios: Command): void {
  scenarios
    .command("check")
    .description(
      "build each scenario, grade its reference solution (all tests) and an empty deliverable (null floor)",
    )
    .argument("[names...]", "scenarios to check (default: all, or the spec's with --spec)")
    .option("--dir <dir>", "scenarios directory (default SCENARIOS_DIR, ./scenarios)")
    .option("--spec <n>", "check the scenarios of spec n")
    .option("--concurrency <n>", "scenarios checked at once (default 2)")
    .option("--json", "one JSON object per scenario instead of the table")
    .action(async (names: string[], flags: CheckFlags) => {
      const spec = parseSpecFlag(flags.spec);
      const concurrency = flags.concurrency === undefined ? 2 : Number(flags.concurrency);
      if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 16) {
        const { InputError } = await import("../errors.js");
        throw new InputError("invalid_flag", `--concurrency ${flags.concurrency}: expected 1..16`);
      }
      const [
        { loadConfig },
        { createLogger },
        scen,
        { checkScenarios, formatCheckTable },
        sandboxMod,
        { ProjectImages },
        { REPO_ROOT },
      ] = await Promise.all([
        import("../config.js"),
        import("../log.js"),
        import("../scenarios/index.js"),
        import("../episode/index.js"),
        import("../sandbox/index.js"),
        import("../bench/index.js"),
        import("../repo.js"),
      ]);
      const config = loadConfig();
      const catalogue = await scen.loadCatalogue(await scenariosDirOf(flags));
      const selected =
        spec !== undefined
          ? scen.resolveSpec(catalogue, spec).scenarios
          : scen.selectScenarios(catalogue, names);
      // Logs go to stderr (the table is the output); warnings and up unless LOG_LEVEL says more.
      const log = createLogger({
        level: config.logLevel === "info" ? "warn" : config.logLevel,
        destination: (await import("pino")).default.destination(2),
      });
      // No episode networks are made here, so the host firewall is not needed (nor root).
      const sandbox = await sandboxMod.Sandbox.open({
        socketPath: config.evaluation.dockerSocket,
        firewall: "off",
        reapIntervalMs: 0,
        log,
      });
      const images = new ProjectImages(sandbox.docker, {
        repoRoot: REPO_ROOT,
        ...(config.evaluation.agentImage ? { agentImage: config.evaluation.agentImage } : {}),
        log,
      });
      const ac = new AbortController();
      const stop = () => ac.abort(new Error("interrupted"));
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
      try {
        const rows = await checkScenarios(selected, {
          sandbox,
          images,
          concurrency,
          signal: ac.signal,
          log,
          onRow: (r) => {
            if (flags.json) out(JSON.stringify(r));
            else warn(`${r.ok ? "ok  " : "FAIL"} ${r.scenario} (${(r.ms.total / 1000).toFixed(1)} s)`);
          },
        });
        if (!flags.json) out(formatCheckTable(rows));
        if (rows.some((r) => !r.ok)) process.exitCode = 1;
      } finally {
        process.off("SIGINT", stop);
        process.off("SIGTERM", stop);
        await sandbox.close();
      }
    });
}
