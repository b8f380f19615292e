/**
 * `scenarios …`: the scenario catalogue from the command line. `list` lives here; `check`
 * (build, reference solution, empty deliverable) registers on the same `scenarios` command, next
 * to `list`, through registerScenarios below. Heavy modules load inside the actions so that
 * `--help` stays fast.
 */
import type { Command } from "commander";
import { out } from "./io.js";
import { registerScenariosCheck } from "./scenarios-check.js";
import { type ScenariosDirFlags, scenariosDirOf } from "./scenarios-flags.js";

interface ListFlags extends ScenariosDirFlags {
  suite?: string;
  json?: boolean;
}

function registerScenariosList(scenarios: Command): void {
  scenarios
    .command("list")
    .description("print the catalogue: name, category, timeouts, deliverable, null floor, suites")
    .option("--dir <dir>", "scenarios directory (default SCENARIOS_DIR, ./scenarios)")
    .option("--suite <name>", "only the scenarios of this suite set (scenarios/suites.json), in its order")
    .option("--json", "one JSON object per scenario instead of the table")
    .action(async (flags: ListFlags) => {
      const { loadCatalogue, resolveSuite, formatScenarioTable, scenarioRows } = await import(
        "../scenarios/index.js"
      );
      const catalogue = await loadCatalogue(await scenariosDirOf(flags));
      const only = flags.suite === undefined ? undefined : resolveSuite(catalogue, flags.suite).scenarios;
      if (flags.json) {
        for (const row of scenarioRows(catalogue, only)) out(JSON.stringify(row));
        return;
      }
      out(formatScenarioTable(catalogue, only));
    });
}

/** Registers `scenarios` and its subcommands; returns the group so callers can add more. */
export function registerScenarios(program: Command): Command {
  const scenarios = program
    .command("scenarios")
    .description("the scenario catalogue: list and check scenarios");
  registerScenariosList(scenarios);
  registerScenariosCheck(scenarios);
  return scenarios;
}
