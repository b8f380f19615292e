/**
 * The built-in suite never claims a subnet spec: whatever spec number a caller (a local platform,
 * SPEC_NUMBER) names, it runs a named set of scenarios/suites.json under spec 0, and the set's name
 * reaches the verdict's provenance. Real catalogue, real SQLite (in memory); no
 * Docker (a rejected pack is recorded before any image is needed).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { BuiltinBench, type ProjectImages } from "../../src/bench/index.js";
import { type EvaluationEnvironment, evaluatePack, resolveRequest } from "../../src/evaluation/index.js";
import { silentLogger } from "../../src/log.js";
import { loadPack } from "../../src/pack/index.js";
import { BUILTIN_SPEC, type Catalogue, loadCatalogue } from "../../src/scenarios/index.js";
import { EvaluationRepo, openDb } from "../../src/store/index.js";

const DIR = new URL("../../scenarios/", import.meta.url).pathname;
// resolve() reads only the catalogue; prepare() (not called here) builds images.
const NO_IMAGES = {} as ProjectImages;

let catalogue: Catalogue;
beforeAll(async () => {
  catalogue = await loadCatalogue(DIR);
});

const bench = (defaultSuite?: string) =>
  new BuiltinBench(catalogue, NO_IMAGES, { episodeCapUsd: 0.3, ...(defaultSuite ? { defaultSuite } : {}) });

describe("BuiltinBench.resolve", () => {
  it("runs the file's default set under spec 0 whatever spec number is asked for", () => {
    for (const specNumber of [undefined, 27, 900, "27", null]) {
      const r = bench().resolve({ specNumber });
      expect(r.spec).toBe(BUILTIN_SPEC);
      expect(r.suite).toBe("builtin");
      expect(r.names).toHaveLength(catalogue.length);
      expect(r.fellBackFrom).toBeUndefined();
      expect(r.episodeCapUsd).toBe(0.3);
    }
  });

  it("a named set (the request's, else SUITE's) runs in its order; an explicit list is the set `custom`", () => {
    const quick = ["binary-flag-hunt", "access-log-regex", "git-lost-commit-recovery"];
    expect(bench().resolve({ suite: "quick" })).toMatchObject({ spec: 0, suite: "quick", names: quick });
    expect(bench("quick").resolve({ specNumber: 27 })).toMatchObject({
      spec: 0,
      suite: "quick",
      names: quick,
    });
    expect(bench("quick").resolve({ suite: "builtin" }).names).toHaveLength(catalogue.length);
    expect(bench().resolve({ scenarios: ["sqlite-wal-recovery"], suite: "quick" })).toMatchObject({
      spec: 0,
      suite: "custom",
      names: ["sqlite-wal-recovery"],
    });
  });

  it("an unknown set is the operator's input error, said when the bench is made (SUITE) or asked (--suite)", () => {
    expect(() => bench("900")).toThrow(/no suite "900" in suites\.json \(known: builtin, quick\)/);
    expect(() => bench().resolve({ suite: "nope" })).toThrow(
      expect.objectContaining({ code: "unknown_suite" }),
    );
  });
});

describe("a built-in evaluation's verdict", () => {
  function env(): EvaluationEnvironment & { alarms: string[] } {
    const alarms: string[] = [];
    return {
      alarms,
      log: silentLogger,
      repo: new EvaluationRepo(openDb(":memory:")),
      meter: { priceTableHash: "p".repeat(64) } as EvaluationEnvironment["meter"],
      sandbox: {} as EvaluationEnvironment["sandbox"],
      bench: bench(),
      observer: {
        startEvaluation: () => {},
        onProgress: () => {},
        episodeEnd: () => {},
        endEvaluation: () => {},
        raise: (code) => alarms.push(code),
      },
      settings: {
        dataDir: "/nonexistent",
        concurrency: 1,
        specNumber: 27,
        defaultModel: "m",
        agentCommand: undefined,
        episodeTimeouts: undefined,
        strictProvenance: false,
        llm: { baseUrl: "x", simulated: true },
      },
    };
  }

  it("resolving with SPEC_NUMBER set raises no unknown-spec alarm: the built-in suite has no specs to miss", () => {
    const e = env();
    expect(resolveRequest(e, {})).toMatchObject({ spec: 0, suite: "builtin" });
    expect(resolveRequest(e, { specNumber: 31, suite: "quick" })).toMatchObject({ spec: 0, suite: "quick" });
    expect(e.alarms).toEqual([]);
  });

  it("is spec 0 with the set's name in its provenance (here a rejected pack, recorded before any image)", async () => {
    const e = env();
    const r = await evaluatePack(e, {
      pack: loadPack(Buffer.from("{not a pack")),
      rejectedHash: "ab".repeat(32),
      label: "broken",
      specNumber: 27,
      suite: "quick",
      source: "local",
    });
    expect(r.kind).toBe("verdict");
    if (r.kind !== "verdict") return;
    expect(r.verdict.spec).toBe(0);
    expect(r.verdict.rejected).toBe(true);
    expect(r.verdict.provenance.suite).toBe("quick");
    // What SQLite holds is what was returned.
    const row = e.repo.get(r.evaluationId)!;
    expect(row.spec).toBe(0);
    expect((row.verdict as { provenance: { suite?: string } }).provenance.suite).toBe("quick");
  });
});
