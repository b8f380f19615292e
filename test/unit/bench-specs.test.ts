/**
 * The subnet's spec table and its resolution, on upstream's own cases (tests/test_spec_resolution.py
 * at b057b1a5) and the scenario list issue 27 names for specs 26 and 27.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { mergeSpecFile, PUBLISHED_SPECS, resolveSubnetSpec } from "../../src/bench/index.js";
import { pythonInt } from "../../src/python-int.js";

const spec = (n: number) => [...(PUBLISHED_SPECS.specs.get(n)?.scenarios ?? [])];
const set = (n: number) => new Set(spec(n));
const minus = (a: Set<string>, b: Set<string>) => new Set([...a].filter((x) => !b.has(x)));

/** Issue 27: "Spec 26 and 27 are the same 20 scenarios". */
const SPEC_27 = [
  "audio-synth-stft-peaks",
  "configure-git-webserver",
  "crack-7z-hash",
  "db-wal-recovery",
  "deterministic-tarball",
  "fix-code-vulnerability",
  "git-multibranch",
  "large-scale-text-editing",
  "largest-eigenval",
  "llm-inference-batching-scheduler",
  "nginx-request-logging",
  "parallel-particle-simulator",
  "path-tracing",
  "postgres-csv-clean",
  "puzzle-solver",
  "query-optimize",
  "regex-engine-from-scratch",
  "swe-bench-astropy-2",
  "torch-tensor-parallelism",
  "write-compressor",
];

describe("the published spec table", () => {
  it("holds specs 20–27, each sorted and unique, with upstream's sizes and swaps", () => {
    expect([...PUBLISHED_SPECS.specs.keys()]).toEqual([20, 21, 22, 23, 24, 25, 26, 27]);
    for (const [n, s] of PUBLISHED_SPECS.specs)
      expect(s.scenarios, `spec ${n}`).toEqual([...new Set(s.scenarios)].sort());
    expect([17, 20, 23, 26, 26, 26, 20, 20]).toEqual(
      [20, 21, 22, 23, 24, 25, 26, 27].map((n) => spec(n).length),
    );
    expect(minus(set(21), set(20))).toEqual(
      new Set(["audio-synth-stft-peaks", "puzzle-solver", "query-optimize"]),
    );
    expect(minus(set(22), set(21))).toEqual(
      new Set(["crack-7z-hash", "parallel-particle-simulator", "regex-engine-from-scratch"]),
    );
    expect(minus(set(23), set(22))).toEqual(
      new Set(["attention-mil", "llm-inference-batching-scheduler", "torch-tensor-parallelism"]),
    );
    expect(minus(set(24), set(23))).toEqual(
      new Set(["fix-code-vulnerability", "large-scale-text-editing", "postgres-csv-clean"]),
    );
    expect(minus(set(23), set(24))).toEqual(
      new Set(["schemelike-metacircular-eval", "3d-model-format-legacy", "pcap-to-netflow"]),
    );
    expect(spec(25)).toEqual(spec(24));
    expect(minus(set(25), set(26))).toEqual(
      new Set([
        "regex-chess",
        "race-condition-fix",
        "custom-memory-heap-crash",
        "attention-mil",
        "git-leak-recovery",
        "tree-directory-parser",
      ]),
    );
    expect(spec(26)).toEqual(SPEC_27);
    expect(spec(27)).toEqual(SPEC_27);
  });

  it("caps every episode at $1.00 up to spec 26 and $0.30 at spec 27; the local spec is 27", () => {
    for (const n of [20, 21, 22, 23, 24, 25, 26]) expect(PUBLISHED_SPECS.specs.get(n)?.episodeCapUsd).toBe(1);
    expect(PUBLISHED_SPECS.specs.get(27)?.episodeCapUsd).toBe(0.3);
    expect(PUBLISHED_SPECS.local).toBe(27);
  });
});

describe("resolveSubnetSpec (upstream's resolve_eval_spec + spec_config)", () => {
  it("an exact match is used with its own cap (a spec-26 epoch keeps $1.00)", () => {
    expect(resolveSubnetSpec(PUBLISHED_SPECS, 20)).toMatchObject({
      spec: 20,
      scenarios: spec(20),
      episodeCapUsd: 1,
    });
    expect(resolveSubnetSpec(PUBLISHED_SPECS, 26)).toMatchObject({ spec: 26, episodeCapUsd: 1 });
    expect(resolveSubnetSpec(PUBLISHED_SPECS, 27)).toMatchObject({ spec: 27, episodeCapUsd: 0.3 });
    expect(resolveSubnetSpec(PUBLISHED_SPECS, 23).fellBackFrom).toBeUndefined();
  });

  it("coerces as Python's int(): '20' and 20.0 are spec 20", () => {
    expect(resolveSubnetSpec(PUBLISHED_SPECS, "20").spec).toBe(20);
    expect(resolveSubnetSpec(PUBLISHED_SPECS, " 21 ").spec).toBe(21);
    expect(resolveSubnetSpec(PUBLISHED_SPECS, 22.0).spec).toBe(22);
  });

  it.each([99, 3, "not-a-spec", null, undefined, "2.5e1", Number.NaN])(
    "anything else (%s) evaluates the local spec under the local cap",
    (asked) => {
      const r = resolveSubnetSpec(PUBLISHED_SPECS, asked);
      expect(r).toMatchObject({ spec: 27, scenarios: spec(27), episodeCapUsd: 0.3 });
      // The warning names the requested spec (nothing to name for a missing one).
      expect(r.fellBackFrom).toBe(asked === null ? undefined : asked);
    },
  );
});

describe("pythonInt", () => {
  it("reads what Python's int() reads and nothing else", () => {
    expect(pythonInt("1_000")).toBe(1000);
    expect(pythonInt("-7")).toBe(-7);
    expect(pythonInt("\t12\n")).toBe(12);
    expect(pythonInt(true)).toBe(1);
    expect(pythonInt(3.9)).toBe(3);
    expect(pythonInt(-3.9)).toBe(-3);
    for (const bad of ["", "1__0", "_1", "0x10", "1.0", "1e3", "one", [], {}, null, Number.POSITIVE_INFINITY])
      expect(pythonInt(bad), JSON.stringify(bad)).toBeUndefined();
    fc.assert(fc.property(fc.integer({ min: -1e12, max: 1e12 }), (n) => pythonInt(String(n)) === n));
  });
});

describe("an operator's spec file", () => {
  it("adds a newer spec without a release and may move the local spec", () => {
    const t = mergeSpecFile(
      PUBLISHED_SPECS,
      JSON.stringify({
        local: 28,
        specs: { "28": { scenarios: ["a-new-one", "path-tracing"], episode_cap_usd: 0.25 } },
      }),
      "specs.json",
    );
    expect(resolveSubnetSpec(t, 28)).toMatchObject({ spec: 28, episodeCapUsd: 0.25 });
    expect(resolveSubnetSpec(t, "junk").spec).toBe(28);
    expect(resolveSubnetSpec(t, 27).episodeCapUsd).toBe(0.3);
  });

  it.each([
    ["not json", "{", /not JSON/],
    ["a spec without a cap", JSON.stringify({ specs: { "28": { scenarios: ["a"] } } }), /episode_cap_usd/],
    [
      "a duplicate scenario",
      JSON.stringify({ specs: { "28": { scenarios: ["a", "a"], episode_cap_usd: 1 } } }),
      /twice/,
    ],
    ["an unknown local spec", JSON.stringify({ local: 40, specs: {} }), /local spec 40/],
    [
      "a bad spec key",
      JSON.stringify({ specs: { x: { scenarios: ["a"], episode_cap_usd: 1 } } }),
      /specs\.x/,
    ],
  ])("refuses %s with one message naming the file", (_, text, why) => {
    expect(() => mergeSpecFile(PUBLISHED_SPECS, text, "/etc/specs.json")).toThrow(why);
    expect(() => mergeSpecFile(PUBLISHED_SPECS, text, "/etc/specs.json")).toThrow(/\/etc\/specs\.json/);
  });
});
