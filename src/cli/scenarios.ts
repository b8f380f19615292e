/**
 * `scenarios …`: the scenario catalogue from the command line. `list` lives here; `check`
 * (build, reference solution, empty deliverable) registers on the same `scenarios` command, next
 * to `list`, through registerScenarios below. Heavy modules load inside the actions so that
 * `--help` stays fast.
 */
import type { Command } from "commander";
import { InputError } from "../errors.js";
import { out } from "./io.js";
import { registerScenariosCheck } from "./scenarios-check.js";

/** Flags every scenarios subcommand shares. */
export interface ScenariosDirFlags {
  dir?: string;
}

/** --dir, else SCENARIOS_DIR (config), else ./scenarios. */
export async function scenariosDirOf(flags: ScenariosDirFlags): Promise<string> {
  if (flags.dir) return flags.dir;
  const { loadConfig } = await import("../config.js");
  return loadConfig().evaluation.scenariosDir;
}

/** Parse a --spec value: a non-negative integer. */
export function parseSpecFlag(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^(0|[1-9][0-9]{0,8})$/.test(value.trim()))
    throw new InputError("invalid_flag", `--spec ${value}: expected a spec number (a non-negative integer)`);
  return Number(value.trim());
}

interface ListFlags extends ScenariosDirFlags {
  spec?: string;
  json?: boolean;
}

function registerScenariosList(scenarios: Command): void {
  scenarios
    .command("list")
    .description("print the catalogue: name, category, timeouts, deliverable, null floor, specs")
    .option("--dir <dir>", "scenarios directory (default SCENARIOS_DIR, ./scenarios)")
    .option("--spec <n>", "only the scenarios of spec n, in the spec's order")
    .option("--json", "one JSON object per scenario instead of the table")
    .action(async (flags: ListFlags) => {
      const spec = parseSpecFlag(flags.spec);
      const { loadCatalogue, resolveSpec, formatScenarioTable, scenarioRows } = await import(
        "../scenarios/index.js"
      );
      const catalogue = await loadCatalogue(await scenariosDirOf(flags));
      const only = spec === undefined ? undefined : resolveSpec(catalogue, spec).scenarios;
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
