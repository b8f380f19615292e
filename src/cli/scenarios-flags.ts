/**
 * What the `scenarios` subcommands share: the scenarios directory and the flag parsers. Its own
 * module, so `scenarios.ts` (which registers `check`) and `scenarios-check.ts` import it, not each
 * other.
 */
import { InputError } from "../errors.js";

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
