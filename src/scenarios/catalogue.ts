/**
 * The scenario catalogue: every folder of the scenarios directory (except those starting with
 * "." or "_", which hold shared tooling) is one scenario in the Harbor / Terminal-Bench shape,
 * plus suites.json (the suite's named sets). Loading validates everything up front, so an evaluation never starts on a
 * half-broken catalogue; a problem is one clear error naming the file and the field.
 */
import { readdir, readFile, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import { InputError } from "../errors.js";
import { exists } from "../fs.js";
import { scenarioDigest } from "./digest.js";
import { parseSuites, SUITES_FILE, type SuiteSet, suiteScenarioNames } from "./suites.js";
import { parseTaskToml, ScenarioError, type TaskSpec } from "./task.js";

export const SCENARIO_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;

export interface ScenarioPaths {
  taskToml: string;
  instruction: string;
  /** Docker build context of the scenario image. */
  environment: string;
  dockerfile: string;
  /** Hidden tests, copied to /tests of the verifier only. */
  tests: string;
  testScript: string;
  solution: string;
  /** Reference solution (bash, run as the agent user with cwd /app); null when absent. */
  solveScript: string | null;
  /** A plausible half-solution (used by the Engy simulator); null when absent. */
  partialScript: string | null;
  /** The scenario's own design note; null when absent. */
  design: string | null;
}

export interface Scenario {
  readonly name: string;
  /** Absolute path of scenarios/<name>. */
  readonly dir: string;
  readonly task: TaskSpec;
  /** instruction.md's text (becomes /workspace/INSTRUCTION.md). */
  readonly instruction: string;
  readonly paths: ScenarioPaths;
  /** sha256 (hex) over environment/, tests/ and task.toml: provenance of every score. */
  readonly digest: string;
}

/** The scenarios in name order, with the directory they came from and its named sets. */
export interface Catalogue extends ReadonlyArray<Scenario> {
  readonly dir: string;
  readonly suites: SuiteSet;
  byName(name: string): Scenario | undefined;
}

async function isDir(p: string): Promise<boolean> {
  return (await stat(p).catch(() => undefined))?.isDirectory() ?? false;
}

async function requireFile(p: string, what: string): Promise<void> {
  const st = await stat(p).catch(() => undefined);
  if (!st?.isFile()) throw new ScenarioError("scenario_invalid", `${p}: missing (${what})`);
}

/** Load and validate one scenario folder. */
export async function loadScenario(dir: string): Promise<Scenario> {
  const abs = resolve(dir);
  const name = abs.split("/").pop() ?? "";
  if (!SCENARIO_NAME.test(name))
    throw new ScenarioError(
      "scenario_invalid",
      `${abs}: the folder name must be lowercase letters, digits and '-' (it names a Docker image)`,
    );
  const paths: ScenarioPaths = {
    taskToml: join(abs, "task.toml"),
    instruction: join(abs, "instruction.md"),
    environment: join(abs, "environment"),
    dockerfile: join(abs, "environment", "Dockerfile"),
    tests: join(abs, "tests"),
    testScript: join(abs, "tests", "test.sh"),
    solution: join(abs, "solution"),
    solveScript: null,
    partialScript: null,
    design: null,
  };
  await requireFile(paths.taskToml, "the task definition");
  await requireFile(paths.instruction, "what the agent is told");
  await requireFile(paths.dockerfile, "the scenario image");
  await requireFile(paths.testScript, "the hidden grader entry point");
  const task = parseTaskToml(await readFile(paths.taskToml, "utf8"), paths.taskToml);
  const instruction = await readFile(paths.instruction, "utf8");
  if (instruction.trim() === "") throw new ScenarioError("scenario_invalid", `${paths.instruction}: empty`);
  const solve = join(abs, "solution", "solve.sh");
  const partial = join(abs, "solution", "partial.sh");
  const design = join(abs, "DESIGN.md");
  return {
    name,
    dir: abs,
    task,
    instruction,
    paths: {
      ...paths,
      solveScript: (await exists(solve)) ? solve : null,
      partialScript: (await exists(partial)) ? partial : null,
      design: (await exists(design)) ? design : null,
    },
    digest: await scenarioDigest(abs),
  };
}

/** Every scenario of `dir` plus its suites.json, validated. */
export async function loadCatalogue(dir: string): Promise<Catalogue> {
  const abs = resolve(dir);
  let names: string[];
  try {
    names = await readdir(abs);
  } catch (err) {
    throw new InputError(
      "scenarios_dir_unreadable",
      `${abs}: cannot read the scenarios directory (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    );
  }
  const folders: string[] = [];
  for (const n of names.sort()) {
    if (n.startsWith(".") || n.startsWith("_")) continue;
    if (await isDir(join(abs, n))) folders.push(n);
  }
  const scenarios: Scenario[] = [];
  for (const n of folders) scenarios.push(await loadScenario(join(abs, n)));
  const suitesPath = join(abs, SUITES_FILE);
  let suitesText: string;
  try {
    suitesText = await readFile(suitesPath, "utf8");
  } catch {
    throw new ScenarioError("suites_invalid", `${suitesPath}: missing (suite name → scenario names)`);
  }
  const suites = parseSuites(suitesText, suitesPath, new Set(scenarios.map((s) => s.name)));
  return makeCatalogue(abs, scenarios, suites);
}

/** Wrap scenarios (sorted by name) as a Catalogue. */
export function makeCatalogue(dir: string, scenarios: readonly Scenario[], suites: SuiteSet): Catalogue {
  const list = [...scenarios].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const index = new Map(list.map((s) => [s.name, s]));
  return Object.freeze(
    Object.assign(list, {
      dir,
      suites,
      byName: (name: string) => index.get(name),
    }),
  ) as Catalogue;
}

export interface ResolvedSuite {
  suite: string;
  scenarios: Scenario[];
}

/** The scenarios of a suite, in the suite's order (`undefined` → the default); unknown → UnknownSuiteError. */
export function resolveSuite(catalogue: Catalogue, suite: string | undefined): ResolvedSuite {
  const r = suiteScenarioNames(catalogue.suites, suite);
  return { suite: r.suite, scenarios: r.names.map((n) => catalogue.byName(n)!) };
}

/** Scenarios by name, in the order given (`scenarios check NAMES`); unknown → InputError. */
export function selectScenarios(catalogue: Catalogue, names: readonly string[]): Scenario[] {
  if (names.length === 0) return [...catalogue];
  const unknown = names.filter((n) => !catalogue.byName(n));
  if (unknown.length)
    throw new InputError(
      "unknown_scenario",
      `unknown scenario ${unknown.join(", ")} (known: ${catalogue.map((s) => s.name).join(", ")})`,
    );
  return [...new Set(names)].map((n) => catalogue.byName(n)!);
}
