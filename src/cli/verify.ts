/**
 * `trajrl-validator verify EVIDENCE...`: check a verdict's evidence (signature, files, receipts'
 * chain, costs, payload, graders' reports) and re-grade every episode on this machine's Docker
 * engine — the same verifier image, tests and deliverable, no model call, $0. One table per
 * evidence; with two or more of one pack, a comparison scenario by scenario. Exit 0 only when every
 * check that could run agrees. A log archive of the platform that carries evidence is read too.
 */
import type { Command } from "commander";
import { InfraError, InputError } from "../errors.js";
import type { Regrader, VerifyReport } from "../evidence/index.js";
import { numberFlag } from "./flags.js";
import { humanOutput, out } from "./io.js";

interface VerifyFlags {
  json?: boolean;
  progress?: boolean;
  regrade?: boolean;
  repeat?: string;
  signer?: string;
  network?: string;
  dir?: string;
}

interface OpenedRegrader {
  regrader: Regrader;
  close(): Promise<void>;
}

/** The re-grade's Docker side: a sandbox for graders only, this checkout's scenarios and images. */
async function openDockerRegrader(
  dir: string | undefined,
  network: "none" | "bridge" | undefined,
): Promise<OpenedRegrader> {
  const [{ loadConfig }, { createLogger }, sandboxMod, benchMod, scen, ev, { REPO_ROOT }, pino] =
    await Promise.all([
      import("../config.js"),
      import("../log.js"),
      import("../sandbox/index.js"),
      import("../bench/index.js"),
      import("../scenarios/index.js"),
      import("../evidence/index.js"),
      import("../repo.js"),
      import("pino"),
    ]);
  const config = loadConfig();
  const log = createLogger({
    // The engine's own warnings (e.g. its DNS advisory) are about episodes, not graders.
    level: config.logLevel === "info" ? "error" : config.logLevel,
    destination: pino.default.destination(2),
  });
  // Graders only: no episode networks, so no host firewall (nor root) is needed.
  const sandbox = await sandboxMod.Sandbox.open({
    socketPath: config.evaluation.dockerSocket,
    firewall: "off",
    reapIntervalMs: 0,
    // Re-grading runs its graders under runc (the host's kernel), as it always has: EPISODE_RUNTIME
    // is not read here.
    episodeRuntime: "runc",
    log,
  }).catch((err: Error) => {
    throw new InfraError(
      "docker_unavailable",
      `re-grading needs a Docker engine (${err.message}); --no-regrade checks the evidence without one`,
      { retryable: false },
    );
  });
  const catalogue = await scen.loadCatalogue(dir ?? config.evaluation.scenariosDir).catch(() => undefined);
  const regrader = new ev.DockerRegrader({
    sandbox,
    images: new benchMod.ProjectImages(sandbox.docker, {
      repoRoot: REPO_ROOT,
      ...(config.evaluation.agentImage ? { agentImage: config.evaluation.agentImage } : {}),
      log,
    }),
    catalogue,
    network,
    credentials: {
      username: config.evaluation.registryUsername,
      password: config.evaluation.registryPassword,
    },
    log,
  });
  return { regrader, close: () => sandbox.close() };
}

/** Opened on the first re-grade: a checks-only run (or evidence with nothing graded) needs no engine. */
class LazyRegrader implements Regrader {
  private opened: Promise<OpenedRegrader> | undefined;
  constructor(private readonly open: () => Promise<OpenedRegrader>) {}

  async regrade(...args: Parameters<Regrader["regrade"]>): ReturnType<Regrader["regrade"]> {
    this.opened ??= this.open();
    return (await this.opened).regrader.regrade(...args);
  }

  async close(): Promise<void> {
    if (this.opened) await (await this.opened).close();
  }
}

function parseNetwork(v: string | undefined): "none" | "bridge" | undefined {
  if (v === undefined || v === "none" || v === "bridge") return v;
  throw new InputError("invalid_flag", `--network ${v}: expected none or bridge`);
}

export function registerVerify(program: Command): void {
  program
    .command("verify")
    .description(
      "check a verdict's evidence and re-grade every episode offline ($0, no model call); exit 0 only when everything that could be checked agrees",
    )
    .argument(
      "<evidence...>",
      "evidence archives (DATA_DIR/evidence/<id>.tar.gz) or log archives that carry one",
    )
    .option("--json", "the reports as JSON on stdout, alone")
    .option("--progress", "with --json: show progress on stderr even when it is not a terminal")
    .option("--no-regrade", "the checks alone, no re-grade (no Docker needed)")
    .option("--repeat <n>", "re-grades per episode (2 or more measure the grader's determinism)", "1")
    .option("--signer <ss58>", "fail unless the evidence is signed by this hotkey")
    .option(
      "--network <net>",
      "re-grade bench verifiers on this network instead of the recorded one (none: offline)",
    )
    .option("--dir <dir>", "the built-in suite's scenarios (default SCENARIOS_DIR, ./scenarios)")
    .action(async (files: string[], flags: VerifyFlags) => {
      const ev = await import("../evidence/index.js");
      const repeat = numberFlag("repeat", flags.repeat, 1, 10, true) ?? 1;
      const network = parseNetwork(flags.network);
      const human = humanOutput(flags);
      const regrader =
        flags.regrade === false ? undefined : new LazyRegrader(() => openDockerRegrader(flags.dir, network));
      const reports: VerifyReport[] = [];
      try {
        for (const file of files) {
          for (const r of await ev.verifyFile(file, {
            ...(regrader ? { regrader } : {}),
            repeat,
            ...(flags.signer ? { expectSigner: flags.signer } : {}),
            network,
            onScenario: (row) =>
              human.line(`  ${row.scenario}: ${row.result}${row.why ? ` (${row.why})` : ""}`),
          })) {
            reports.push(r);
            if (!flags.json) human.line(`\n${ev.renderReport(r)}`);
          }
        }
      } finally {
        await regrader?.close();
      }
      if (flags.json) out(JSON.stringify(reports, null, 2));
      else if (reports.length > 1) human.line(`\n${ev.renderComparison(reports)}`);
      process.exitCode = reports.every((r) => r.ok) ? 0 : 1;
    });
}
