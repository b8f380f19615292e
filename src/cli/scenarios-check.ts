/**
 * `scenarios check [NAMES...]`: every scenario proves itself on the real engine. For each: its image
 * (built from the sources, reused by content hash — or with `--bench REF` pulled from the registry
 * as an evaluation pulls it), run solution/solve.sh from the sources as the agent user in container
 * A (no network), grade that deliverable alone in a fresh container B (must be tests/tests), grade
 * an empty deliverable (must equal the sources' task.toml null_floor). With `--bench` the grading is
 * the registry bench's verifier (the tests the bench's scenario-info probe gives, upstream's
 * /test.sh + /tests/ layout, VERIFIER_NETWORK). Prints a table; exit 1 if any fails.
 */
import type { Command } from "commander";
import { numberFlag } from "./flags.js";
import { humanOutput, out, warn } from "./io.js";
import { parseSpecFlag, type ScenariosDirFlags, scenariosDirOf } from "./scenarios-flags.js";

/**
 * The engine, with the runtime episodes use (EPISODE_RUNTIME): the check proves each scenario under
 * it (each row names it). No episode networks are made here, so no host firewall (nor root).
 */
function openCheckSandbox(
  sandboxMod: typeof import("../sandbox/index.js"),
  config: import("../config.js").Config,
  log: import("../log.js").Logger,
) {
  return sandboxMod.Sandbox.open({
    socketPath: config.evaluation.dockerSocket,
    firewall: "off",
    reapIntervalMs: 0,
    episodeRuntime: config.evaluation.episodeRuntime,
    log,
  });
}

interface BenchRowsInput {
  /** --bench: the trajrl-bench image. */
  ref: string;
  names: string[];
  flags: CheckFlags;
  spec: number | undefined;
  catalogue: import("../scenarios/index.js").Catalogue;
  config: import("../config.js").Config;
  sandbox: import("../sandbox/index.js").Sandbox;
  say: (line: string) => void;
  log: import("../log.js").Logger;
  common: Omit<import("../episode/index.js").CheckOptions, "images">;
}

/** `--bench REF`: the bench's scenarios, pulled and prepared, proved with the bench's verifier. */
async function benchRows(input: BenchRowsInput): Promise<import("../episode/index.js").CheckRow[]> {
  const { ref, names, flags, spec, catalogue, config, sandbox, say, log, common } = input;
  const [{ InputError }, scen, benchMod, { benchGrader, checkScenarios }] = await Promise.all([
    import("../errors.js"),
    import("../scenarios/index.js"),
    import("../bench/index.js"),
    import("../episode/index.js"),
  ]);
  const { sdkSingleFile } = await import("../policy/index.js");
  const sdk = sdkSingleFile();
  const specs = await benchMod.loadSubnetSpecs(config.evaluation.subnetSpecsFile);
  const bench = new benchMod.RegistryBench({
    docker: sandbox.docker,
    session: sandbox.session,
    ref,
    specs,
    sdk: { entry: sdk.name, files: [{ path: sdk.name, data: sdk.content }] },
    verifierNetwork: config.evaluation.verifierNetwork ?? "bridge",
    credentials: {
      username: config.evaluation.registryUsername,
      password: config.evaluation.registryPassword,
    },
    log,
  });
  const onProgress = (p: { image: string; ref: string; phase: string; note?: string }) => {
    if (p.phase === "ready" || p.phase === "cached")
      say(`${p.phase === "ready" ? "pulled" : "up to date"}: ${p.image} (${p.ref})`);
    if (p.phase === "fallback") say(`WARNING: pulling ${p.ref} failed (${p.note}); using the cached image`);
  };
  let wanted: readonly string[];
  if (names.length > 0) wanted = names;
  else if (flags.suite !== undefined)
    wanted = scen.resolveSuite(catalogue, flags.suite).scenarios.map((s) => s.name);
  else if (spec !== undefined) {
    const hit = specs.specs.get(spec);
    if (!hit)
      throw new InputError(
        "unknown_spec",
        `spec ${spec} is not in the subnet's spec table (known: ${[...specs.specs.keys()].join(", ")})`,
      );
    wanted = hit.scenarios;
  } else wanted = (await bench.refreshBench({ signal: common.signal, onProgress })).probe.scenarios;
  const prepared = await bench.prepare(bench.resolve({ scenarios: wanted }), {
    signal: common.signal,
    onProgress,
  });
  // What the image says (tests, deliverable, timeouts) with what only the sources hold: the
  // reference solution (never shipped in an image) and the null floor to prove.
  const scenarios = prepared.scenarios.map((s) => {
    const source = catalogue.byName(s.name);
    return {
      ...s,
      dir: source?.dir ?? "",
      task: {
        ...s.task,
        metadata: source
          ? { null_floor: source.task.metadata.null_floor, tests: source.task.metadata.tests }
          : {},
      },
    };
  });
  return checkScenarios(scenarios, {
    ...common,
    images: prepared.images,
    grader: benchGrader(config.evaluation.verifierNetwork ?? "bridge"),
  });
}

interface CheckFlags extends ScenariosDirFlags {
  suite?: string;
  bench?: string;
  spec?: string;
  concurrency?: string;
  json?: boolean;
  progress?: boolean;
}

/** The flags that choose what to check: one way of naming the scenarios, a spec only with --bench. */
async function selectionFlags(
  names: string[],
  flags: CheckFlags,
): Promise<{ spec: number | undefined; concurrency: number }> {
  const { InputError } = await import("../errors.js");
  const spec = parseSpecFlag(flags.spec);
  if (spec !== undefined && !flags.bench)
    throw new InputError(
      "invalid_flag",
      `--spec ${flags.spec} names a subnet spec: it needs --bench REF (the built-in suite has named sets: --suite NAME)`,
    );
  if ([names.length > 0, flags.suite !== undefined, spec !== undefined].filter(Boolean).length > 1)
    throw new InputError("invalid_flag", "name the scenarios one way: NAMES, --suite or --spec");
  return { spec, concurrency: numberFlag("concurrency", flags.concurrency, 1, 16, true) ?? 2 };
}

export function registerScenariosCheck(scenarios: Command): void {
  scenarios
    .command("check")
    .description(
      "grade each scenario's reference solution (all tests) and an empty deliverable (null floor), on images built from the sources or pulled with --bench",
    )
    .argument("[names...]", "scenarios to check (default: all; with --bench, every scenario the bench lists)")
    .option("--dir <dir>", "scenarios directory: the sources (default SCENARIOS_DIR, ./scenarios)")
    .option("--suite <name>", "check the scenarios of this built-in suite set (scenarios/suites.json)")
    .option(
      "--bench <ref>",
      "check the scenarios of this trajrl-bench image, pulled from its registry, with the bench's verifier",
    )
    .option("--spec <n>", "with --bench: the scenarios of subnet spec n")
    .option("--concurrency <n>", "scenarios checked at once (default 2)")
    .option("--json", "one JSON object per scenario on stdout, alone (progress on stderr when a terminal)")
    .option("--progress", "with --json: show progress on stderr even when it is not a terminal")
    .action(async (names: string[], flags: CheckFlags) => {
      const { spec, concurrency } = await selectionFlags(names, flags);
      const [
        { loadConfig },
        { createLogger },
        scen,
        { checkScenarios, formatCheckTable },
        sandboxMod,
        benchMod,
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
      // Progress is for people: stderr (with --json, only on a terminal unless --progress).
      const say = flags.json ? humanOutput(flags).line : warn;
      // Logs go to stderr (the table is the output); warnings and up unless LOG_LEVEL says more.
      const log = createLogger({
        level: config.logLevel === "info" ? "warn" : config.logLevel,
        destination: (await import("pino")).default.destination(2),
      });
      const sandbox = await openCheckSandbox(sandboxMod, config, log);
      const ac = new AbortController();
      const stop = () => ac.abort(new Error("interrupted"));
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
      const common = {
        sandbox,
        concurrency,
        signal: ac.signal,
        log,
        onRow: (r: import("../episode/index.js").CheckRow) => {
          if (flags.json) out(JSON.stringify(r));
          say(`${r.ok ? "ok  " : "FAIL"} ${r.scenario} (${(r.ms.total / 1000).toFixed(1)} s)`);
        },
      };
      try {
        let rows: import("../episode/index.js").CheckRow[];
        if (!flags.bench) {
          const selected =
            flags.suite !== undefined
              ? scen.resolveSuite(catalogue, flags.suite).scenarios
              : scen.selectScenarios(catalogue, names);
          const images = new benchMod.ProjectImages(sandbox.docker, {
            repoRoot: REPO_ROOT,
            ...(config.evaluation.agentImage ? { agentImage: config.evaluation.agentImage } : {}),
            log,
          });
          rows = await checkScenarios(selected, { ...common, images });
        } else {
          const input = {
            ref: flags.bench,
            names,
            flags,
            spec,
            catalogue,
            config,
            sandbox,
            say,
            log,
            common,
          };
          rows = await benchRows(input);
        }
        if (!flags.json) out(formatCheckTable(rows));
        if (rows.some((r) => !r.ok)) process.exitCode = 1;
      } finally {
        process.off("SIGINT", stop);
        process.off("SIGTERM", stop);
        await sandbox.close();
      }
    });
}
