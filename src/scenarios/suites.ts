/**
 * scenarios/suites.json: the built-in suite's named sets (name → the scenario names an evaluation
 * runs, in order) and the set run when none is named. Names, never numbers: a spec number is the
 * subnet's (src/bench/subnet-specs.ts) and the built-in suite never claims one. Pure: parsing (zod,
 * once) and resolution; the catalogue does the reading.
 */
import { z } from "zod";
import { InputError } from "../errors.js";
import { ScenarioError } from "./task.js";

export const SUITES_FILE = "suites.json";

/**
 * The `spec` of every verdict on the built-in suite: no subnet spec (the subnet's start at 1). The
 * suite's name is in the verdict's provenance (`provenance.suite`).
 */
export const BUILTIN_SPEC = 0;

/** What a run over an explicit scenario list (`--scenarios a,b`) records as its suite. */
export const CUSTOM_SUITE = "custom";

/** A suite name: a lowercase word that starts with a letter, so it never reads as a spec number. */
export const SUITE_NAME = /^[a-z][a-z0-9-]{0,31}$/;

export interface SuiteSet {
  /** The suite run when none is named. */
  readonly default: string;
  /** Suite name → scenario names, in the order they run. */
  readonly suites: ReadonlyMap<string, readonly string[]>;
}

export class UnknownSuiteError extends InputError {
  readonly suite: string;
  readonly known: string[];
  constructor(suite: string, known: string[]) {
    super(
      "unknown_suite",
      `no suite ${JSON.stringify(suite)} in ${SUITES_FILE} (known: ${known.join(", ")})`,
      { detail: { suite, known } },
    );
    this.name = "UnknownSuiteError";
    this.suite = suite;
    this.known = known;
  }
}

const SuitesSchema = z.object({
  default: z.string(),
  suites: z
    .record(
      z.string(),
      z
        .array(z.string().min(1))
        .min(1, "a suite needs at least one scenario")
        .refine((names) => new Set(names).size === names.length, "a scenario is listed twice"),
    )
    .refine((s) => Object.keys(s).length > 0, "no suites"),
});

/** Parse suites.json's text; every name must be one of `known` (the catalogue's scenarios). */
export function parseSuites(text: string, file: string, known: ReadonlySet<string>): SuiteSet {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new ScenarioError("suites_invalid", `${file}: not JSON: ${(err as Error).message}`);
  }
  const r = SuitesSchema.safeParse(raw);
  if (!r.success) {
    const fields = r.error.issues.map((i) => `${i.path.map(String).join(".") || "(file)"}: ${i.message}`);
    throw new ScenarioError("suites_invalid", `${file}: ${fields.join("; ")}`);
  }
  const suites = new Map<string, readonly string[]>();
  for (const [name, names] of Object.entries(r.data.suites)) {
    if (!SUITE_NAME.test(name))
      throw new ScenarioError(
        "suites_invalid",
        `${file}: suites.${name}: a suite name is a lowercase word starting with a letter (a spec number belongs to the subnet)`,
      );
    if (name === CUSTOM_SUITE)
      throw new ScenarioError(
        "suites_invalid",
        `${file}: suites.${name}: "${CUSTOM_SUITE}" is reserved for runs over an explicit scenario list`,
      );
    const unknown = names.filter((n) => !known.has(n));
    if (unknown.length)
      throw new ScenarioError(
        "suites_invalid",
        `${file}: suites.${name}: unknown scenario ${unknown.join(", ")}`,
      );
    suites.set(name, Object.freeze([...names]));
  }
  if (!suites.has(r.data.default))
    throw new ScenarioError(
      "suites_invalid",
      `${file}: default: suite ${JSON.stringify(r.data.default)} is not defined`,
    );
  return { default: r.data.default, suites };
}

/** Suite names: the default first, then by name. */
export function suiteNames(set: SuiteSet): string[] {
  const rest = [...set.suites.keys()].filter((n) => n !== set.default).sort();
  return [set.default, ...rest];
}

/** Which suites list a scenario (in suiteNames order). */
export function suitesOf(set: SuiteSet, name: string): string[] {
  return suiteNames(set).filter((n) => set.suites.get(n)?.includes(name));
}

/** The scenario names of a suite (`undefined` → the default); unknown → UnknownSuiteError. */
export function suiteScenarioNames(
  set: SuiteSet,
  suite: string | undefined,
): { suite: string; names: readonly string[] } {
  const n = suite ?? set.default;
  const names = set.suites.get(n);
  if (!names) throw new UnknownSuiteError(n, suiteNames(set));
  return { suite: n, names };
}

/** How people are shown what a verdict was scored on: `suite quick` (built-in), else `spec 27`. */
export function specLabel(spec: number, suite: string | null | undefined): string {
  return suite ? `suite ${suite}` : `spec ${spec}`;
}
