/**
 * The subnet's spec table: spec number → the trajrl-bench scenarios an evaluation runs and the
 * per-episode cap, as upstream's validator holds them (trajectoryrl/utils/sandbox_harness.py
 * SCENARIOS_BY_SPEC and SPEC_CONFIG_BY_SPEC, Season 2). A spec's entry is never edited: a change is
 * a new spec number. Newer specs reach an operator without a release through a JSON file with the
 * same shape (SUBNET_SPECS_FILE), merged over the built-in table. Pure apart from reading that file.
 */
import { readFile } from "node:fs/promises";
import { z } from "zod";
import { InputError } from "../errors.js";
import { pythonInt } from "../python-int.js";

export interface SubnetSpec {
  readonly scenarios: readonly string[];
  /** Safety cap per episode in USD at the frozen price table (not a scoring term). */
  readonly episodeCapUsd: number;
}

export interface SubnetSpecTable {
  /** The spec this validator evaluates when the platform names none it knows (upstream's SPEC_NUMBER). */
  readonly local: number;
  readonly specs: ReadonlyMap<number, SubnetSpec>;
}

const SPEC_20 = [
  "3d-model-format-legacy",
  "configure-git-webserver",
  "custom-memory-heap-crash",
  "db-wal-recovery",
  "deterministic-tarball",
  "git-leak-recovery",
  "git-multibranch",
  "largest-eigenval",
  "nginx-request-logging",
  "path-tracing",
  "pcap-to-netflow",
  "race-condition-fix",
  "regex-chess",
  "schemelike-metacircular-eval",
  "swe-bench-astropy-2",
  "tree-directory-parser",
  "write-compressor",
];
const SPEC_21 = [...SPEC_20, "audio-synth-stft-peaks", "puzzle-solver", "query-optimize"].sort();
const SPEC_22 = [
  ...SPEC_21,
  "crack-7z-hash",
  "parallel-particle-simulator",
  "regex-engine-from-scratch",
].sort();
const SPEC_23 = [
  ...SPEC_22,
  "attention-mil",
  "llm-inference-batching-scheduler",
  "torch-tensor-parallelism",
].sort();
const SPEC_24 = [
  ...SPEC_23.filter(
    (s) => !["schemelike-metacircular-eval", "3d-model-format-legacy", "pcap-to-netflow"].includes(s),
  ),
  "fix-code-vulnerability",
  "large-scale-text-editing",
  "postgres-csv-clean",
].sort();
/** SPEC 26: SPEC 24/25 less six low-signal or high-cost scenarios (26 → 20). */
const SPEC_26 = SPEC_24.filter(
  (s) =>
    ![
      "regex-chess",
      "race-condition-fix",
      "custom-memory-heap-crash",
      "attention-mil",
      "git-leak-recovery",
      "tree-directory-parser",
    ].includes(s),
);

const LAUNCH_CAP_USD = 1.0;

/** The published table (specs 20–27; 27's cap went from $1.00 to $0.30, its scenarios are 26's). */
export const PUBLISHED_SPECS: SubnetSpecTable = {
  local: 27,
  specs: new Map<number, SubnetSpec>([
    [20, { scenarios: SPEC_20, episodeCapUsd: LAUNCH_CAP_USD }],
    [21, { scenarios: SPEC_21, episodeCapUsd: LAUNCH_CAP_USD }],
    [22, { scenarios: SPEC_22, episodeCapUsd: LAUNCH_CAP_USD }],
    [23, { scenarios: SPEC_23, episodeCapUsd: LAUNCH_CAP_USD }],
    [24, { scenarios: SPEC_24, episodeCapUsd: LAUNCH_CAP_USD }],
    [25, { scenarios: SPEC_24, episodeCapUsd: LAUNCH_CAP_USD }],
    [26, { scenarios: SPEC_26, episodeCapUsd: LAUNCH_CAP_USD }],
    [27, { scenarios: SPEC_26, episodeCapUsd: 0.3 }],
  ]),
};

const SCENARIO = /^[a-z0-9][a-z0-9._-]{0,127}$/;

const SpecFileSchema = z.object({
  local: z.number().int().nonnegative().optional(),
  specs: z.record(
    z.string().regex(/^(0|[1-9][0-9]{0,8})$/, "spec numbers are non-negative integers"),
    z.object({
      scenarios: z
        .array(z.string().regex(SCENARIO, "a scenario name is lowercase letters, digits, '.', '_' and '-'"))
        .min(1, "a spec needs at least one scenario")
        .refine((a) => new Set(a).size === a.length, "a scenario is listed twice"),
      episode_cap_usd: z.number().positive().max(1000),
    }),
  ),
});

/** Merge an operator's spec file (its text) over a table; every problem is one InputError naming the file. */
export function mergeSpecFile(base: SubnetSpecTable, text: string, file: string): SubnetSpecTable {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new InputError("subnet_specs_invalid", `${file}: not JSON: ${(err as Error).message}`);
  }
  const r = SpecFileSchema.safeParse(raw);
  if (!r.success) {
    const why = r.error.issues.map((i) => `${i.path.map(String).join(".") || "(file)"}: ${i.message}`);
    throw new InputError("subnet_specs_invalid", `${file}: ${why.join("; ")}`);
  }
  const specs = new Map(base.specs);
  for (const [k, v] of Object.entries(r.data.specs))
    specs.set(Number(k), { scenarios: Object.freeze([...v.scenarios]), episodeCapUsd: v.episode_cap_usd });
  const local = r.data.local ?? base.local;
  if (!specs.has(local))
    throw new InputError("subnet_specs_invalid", `${file}: local spec ${local} is not defined`);
  return { local, specs };
}

/** The table this process uses: the published one, merged with the operator's file when given. */
export async function loadSubnetSpecs(file: string | undefined): Promise<SubnetSpecTable> {
  if (!file) return PUBLISHED_SPECS;
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw new InputError(
      "subnet_specs_unreadable",
      `SUBNET_SPECS_FILE ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  return mergeSpecFile(PUBLISHED_SPECS, text, file);
}

export interface ResolvedSubnetSpec {
  spec: number;
  scenarios: readonly string[];
  episodeCapUsd: number;
  /** The spec the platform asked for when it was not in the table (upstream falls back, with a warning). */
  fellBackFrom?: unknown;
}

/**
 * Upstream's resolve_eval_spec + spec_config: the platform's spec_number coerced as Python's int()
 * would; an exact match in the table is used, anything else (missing, garbage, older, newer)
 * evaluates the local spec's scenarios under the local spec's cap.
 */
export function resolveSubnetSpec(table: SubnetSpecTable, requested: unknown): ResolvedSubnetSpec {
  const n = pythonInt(requested);
  const hit = n === undefined ? undefined : table.specs.get(n);
  if (n !== undefined && hit) return { spec: n, scenarios: hit.scenarios, episodeCapUsd: hit.episodeCapUsd };
  const local = table.specs.get(table.local)!;
  return {
    spec: table.local,
    scenarios: local.scenarios,
    episodeCapUsd: local.episodeCapUsd,
    ...(requested !== undefined && requested !== null ? { fellBackFrom: requested } : {}),
  };
}
