/**
 * scenarios/specs.json: spec number → the scenario names an evaluation runs, and the default
 * spec. Pure: parsing (zod, once) and resolution; the catalogue does the reading.
 */
import { z } from "zod";
import { InputError } from "../errors.js";
import { ScenarioError } from "./task.js";

export const SPECS_FILE = "specs.json";

export interface SpecSet {
  /** The spec run when the platform names none. */
  readonly default: number;
  /** Spec number → scenario names, in the order they run. */
  readonly specs: ReadonlyMap<number, readonly string[]>;
}

/** The requested spec is not in specs.json; callers may fall back to `detail.default` with a warning. */
export class UnknownSpecError extends InputError {
  readonly spec: number;
  readonly known: number[];
  readonly defaultSpec: number;
  constructor(spec: number, known: number[], defaultSpec: number) {
    super(
      "unknown_spec",
      `spec ${spec} is not in ${SPECS_FILE} (known: ${known.join(", ")}; default ${defaultSpec})`,
      {
        detail: { spec, known, default: defaultSpec },
      },
    );
    this.name = "UnknownSpecError";
    this.spec = spec;
    this.known = known;
    this.defaultSpec = defaultSpec;
  }
}

const SPEC_KEY = /^(0|[1-9][0-9]{0,8})$/;

const SpecsSchema = z.object({
  default: z.number().int().nonnegative(),
  specs: z
    .record(
      z.string(),
      z
        .array(z.string().min(1))
        .min(1, "a spec needs at least one scenario")
        .refine((names) => new Set(names).size === names.length, "a scenario is listed twice"),
    )
    .refine((s) => Object.keys(s).length > 0, "no specs"),
});

/** Parse specs.json's text; every name must be one of `known` (the catalogue's scenarios). */
export function parseSpecs(text: string, file: string, known: ReadonlySet<string>): SpecSet {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new ScenarioError("specs_invalid", `${file}: not JSON: ${(err as Error).message}`);
  }
  const r = SpecsSchema.safeParse(raw);
  if (!r.success) {
    const fields = r.error.issues.map((i) => `${i.path.map(String).join(".") || "(file)"}: ${i.message}`);
    throw new ScenarioError("specs_invalid", `${file}: ${fields.join("; ")}`);
  }
  const specs = new Map<number, readonly string[]>();
  for (const [key, names] of Object.entries(r.data.specs)) {
    if (!SPEC_KEY.test(key))
      throw new ScenarioError(
        "specs_invalid",
        `${file}: specs.${key}: spec numbers are non-negative integers`,
      );
    const unknown = names.filter((n) => !known.has(n));
    if (unknown.length)
      throw new ScenarioError(
        "specs_invalid",
        `${file}: specs.${key}: unknown scenario ${unknown.join(", ")}`,
      );
    specs.set(Number(key), Object.freeze([...names]));
  }
  if (!specs.has(r.data.default))
    throw new ScenarioError("specs_invalid", `${file}: default: spec ${r.data.default} is not defined`);
  return { default: r.data.default, specs };
}

/** Spec numbers in ascending order. */
export function specNumbers(set: SpecSet): number[] {
  return [...set.specs.keys()].sort((a, b) => a - b);
}

/** Which specs list a scenario (ascending). */
export function specsOf(set: SpecSet, name: string): number[] {
  return specNumbers(set).filter((n) => set.specs.get(n)?.includes(name));
}

/** The names of a spec (`undefined` → the default); unknown → UnknownSpecError. */
export function specNames(
  set: SpecSet,
  spec: number | undefined,
): { spec: number; names: readonly string[] } {
  const n = spec ?? set.default;
  const names = set.specs.get(n);
  if (!names) throw new UnknownSpecError(n, specNumbers(set), set.default);
  return { spec: n, names };
}
