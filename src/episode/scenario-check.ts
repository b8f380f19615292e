/**
 * `scenarios check`: every scenario proves itself. The reference solution runs as the agent's
 * user in container A (no network); its deliverable alone is graded in a fresh container B and
 * must score tests/tests; an empty deliverable must score the recorded null floor; and the hostile
 * probe (scenarios/_tools/hostile-probe), graded as the deliverable, must get nothing the empty
 * deliverable does not get and must not end the grader: a grader that lets root run anything the
 * deliverable planted fails here. The grading function is the one episodes use: the built-in
 * suite's (signed report), or with `verifier: bench` the registry bench's (upstream's /test.sh +
 * /tests/ layout and reward.txt / ctrf.json, on images pulled from a registry). The hostile probe
 * tests the built-in suite's report channel and is not run against the bench's verifier, whose
 * report is the files the grader (root) writes — upstream's contract.
 */
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import pLimit from "p-limit";
import { isAbortError, toValidatorError } from "../errors.js";
import type { Logger } from "../log.js";
import { silentLogger } from "../log.js";
import { round4 } from "../precision.js";
import { REPO_ROOT } from "../repo.js";
import { type BuiltImage, type Sandbox, SCENARIO_LIMITS, safeName } from "../sandbox/index.js";
import { termText } from "../terminal-text.js";
import type { Score } from "./ctrf.js";
import { deadline } from "./deadline.js";
import { builtinGrader, type Grader, type GradeSite } from "./grader.js";
import type { EpisodeImages, EpisodeScenario } from "./types.js";
import { dirEntries, type GradeResult } from "./verifier.js";

export const AGENT_USER = "10000:10000";
const DELIVERABLE_CAP = 64 * 1024 * 1024;
/** The probe every scenario's grader must withstand (bash and python3 at once). */
export const HOSTILE_PROBE_PATH = join(REPO_ROOT, "scenarios/_tools/hostile-probe");

/** What one grading of the check scored. */
export type CheckScore = Pick<Score, "quality" | "tests" | "passed">;

export interface CheckRow {
  scenario: string;
  image: string | undefined;
  imageBuilt: boolean;
  reference: CheckScore | undefined;
  empty: CheckScore | undefined;
  /** The hostile probe graded as the deliverable. */
  hostile: CheckScore | undefined;
  nullFloor: number | undefined;
  /** The OCI runtime the reference run and the graders ran under (the episodes' runtime: runsc = gVisor). */
  runtime: string;
  ok: boolean;
  problems: string[];
  ms: { build: number; solve: number; grade: number; total: number };
}

export interface CheckOptions {
  sandbox: Sandbox;
  /** Scenario images (built, or pulled); `agentBase` is built once first when given (the built-in suite). */
  images: Pick<EpisodeImages, "scenario"> & { agentBase?(signal?: AbortSignal): Promise<BuiltImage> };
  /** Which grader grades (grader.ts): default the built-in suite's; the bench's needs each scenario's `testFiles`. */
  grader?: Grader;
  signal?: AbortSignal;
  log?: Logger;
  /** Scenarios checked at once (builds and runs); the default suits a 2-core machine. */
  concurrency?: number;
  /** The hostile probe's bytes (default: HOSTILE_PROBE_PATH). */
  hostileProbe?: Buffer;
  onRow?: (row: CheckRow) => void;
}

/** Run solution/solve.sh as the agent user in a throwaway container and fetch the deliverable. */
async function runReference(
  sb: Sandbox,
  scenario: EpisodeScenario,
  image: BuiltImage,
  scopeId: string,
  signal: AbortSignal | undefined,
): Promise<{ deliverable: Buffer | undefined; problem?: string; log: string }> {
  const scope = sb.openScope(scopeId, (scenario.task.agent.timeout_sec + 120) * 1000, scenario);
  try {
    const name = `trajrl-${safeName(scopeId)}-solve`;
    scope.trackContainer(name);
    const c = await sb.episodeEngine.create({
      name,
      image: image.ref,
      entrypoint: ["bash", "/solution/solve.sh"],
      cmd: [],
      user: AGENT_USER,
      workingDir: "/app",
      labels: scope.labels("check"),
      limits: SCENARIO_LIMITS,
      network: { kind: "none" },
      dropAllCaps: true,
      init: true,
    });
    await c.write("/", await dirEntries(join(scenario.dir, "solution"), "solution"));
    const dl = deadline(scenario.task.agent.timeout_sec * 1000, signal);
    let exit: number | undefined;
    try {
      await c.start();
      exit = await c.wait(dl.signal);
    } catch (err) {
      if (!dl.expired) throw err;
      await c.stop(0);
    } finally {
      dl.clear();
    }
    const logs = await c.logs(64 * 1024).catch(() => ({ stdout: "", stderr: "" }));
    const log = `${logs.stdout}${logs.stderr}`;
    const got = await c.read(scenario.task.verifier.agent_output_path, DELIVERABLE_CAP);
    await sb.episodeEngine.remove(name);
    if (exit === undefined) return { deliverable: undefined, problem: "solve.sh timed out", log };
    if (got.kind !== "file")
      return {
        deliverable: undefined,
        problem: `solve.sh (exit ${exit}) left no file at ${scenario.task.verifier.agent_output_path} (${got.kind})`,
        log,
      };
    return exit === 0
      ? { deliverable: got.data, log }
      : { deliverable: got.data, problem: `solve.sh exited ${exit}`, log };
  } finally {
    await scope.dispose();
  }
}

/** How long the check's grading scope (the reference's and the empty deliverable's) may live. */
const gradingTtlMs = (s: EpisodeScenario) => (s.task.verifier.timeout_sec * 2 + 120) * 1000;

/** A row before anything ran: not ok until every figure is in. */
function emptyRow(scenario: EpisodeScenario, runtime: string): CheckRow {
  return {
    scenario: scenario.name,
    image: undefined,
    imageBuilt: false,
    reference: undefined,
    empty: undefined,
    hostile: undefined,
    nullFloor: scenario.task.metadata?.null_floor,
    runtime,
    ok: false,
    problems: [],
    ms: { build: 0, solve: 0, grade: 0, total: 0 },
  };
}

/** The reference solution's deliverable; it always comes from the sources (`dir`), never an image. */
async function solveReference(
  scenario: EpisodeScenario,
  image: BuiltImage,
  scopeId: string,
  opts: CheckOptions,
): Promise<{ deliverable: Buffer | undefined; problem?: string; log: string }> {
  if (scenario.dir !== "" && existsSync(join(scenario.dir, "solution", "solve.sh")))
    return runReference(opts.sandbox, scenario, image, scopeId, opts.signal);
  const problem =
    scenario.dir === ""
      ? "not in the sources (no reference solution)"
      : `no solution/solve.sh in ${scenario.dir}`;
  return { deliverable: undefined, problem, log: "" };
}

/** Pure: the three gradings into the row, with what each says is wrong. */
function recordGrades(
  row: CheckRow,
  refGrade: GradeResult | undefined,
  emptyGrade: GradeResult,
  hostileGrade: GradeResult | undefined,
): void {
  const figures = (g: GradeResult) => ({ quality: g.quality, tests: g.tests, passed: g.passed });
  if (refGrade) {
    row.reference = figures(refGrade);
    if (refGrade.failure)
      row.problems.push(`reference: ${refGrade.failure.code}: ${refGrade.failure.message}`);
    else if (refGrade.tests === 0 || refGrade.passed !== refGrade.tests)
      row.problems.push(`reference scored ${refGrade.passed}/${refGrade.tests}, expected all tests to pass`);
  }
  row.empty = figures(emptyGrade);
  if (emptyGrade.failure)
    row.problems.push(`empty: ${emptyGrade.failure.code}: ${emptyGrade.failure.message}`);
  else if (row.nullFloor === undefined) row.problems.push("task.toml has no [metadata].null_floor");
  else if (round4(emptyGrade.quality) !== round4(row.nullFloor))
    row.problems.push(
      `empty deliverable scored ${round4(emptyGrade.quality)}, task.toml null_floor is ${row.nullFloor}`,
    );
  if (hostileGrade) {
    row.hostile = figures(hostileGrade);
    row.problems.push(...hostileProblems(hostileGrade, emptyGrade));
  }
}

/**
 * One grading of the check, by the check's grader: in the shared grading scope (told apart by its
 * label), or in a scope of its own when the grader names its container after the scope alone.
 */
function checkGrading(
  scenario: EpisodeScenario,
  image: BuiltImage,
  scope: GradeSite["scope"],
  id: string,
  opts: CheckOptions,
  log: Logger,
): (label: string, data: Buffer) => Promise<GradeResult> {
  const grader = opts.grader ?? builtinGrader;
  const site: GradeSite = {
    engine: opts.sandbox.episodeEngine,
    networks: opts.sandbox.networks,
    scope,
    log,
    signal: opts.signal,
  };
  const ask = (label: string, data: Buffer) => ({
    image: image.ref,
    agentOutputPath: scenario.task.verifier.agent_output_path,
    deliverable: data,
    timeoutMs: scenario.task.verifier.timeout_sec * 1000,
    label,
  });
  return async (label, data) => {
    if (!grader.scopePerGrading) return grader.grade(site, scenario, ask(label, data));
    const ttl = (scenario.task.verifier.timeout_sec + 120) * 1000;
    const own = opts.sandbox.openScope(`${id}-${label}`, ttl, scenario);
    try {
      return await grader.grade({ ...site, scope: own }, scenario, ask(label, data));
    } finally {
      await own.dispose();
    }
  };
}

export async function checkScenario(scenario: EpisodeScenario, opts: CheckOptions): Promise<CheckRow> {
  const log = (opts.log ?? silentLogger).child({ scenario: scenario.name });
  const t0 = performance.now();
  const runtime = runtimeOrRefusal(opts.sandbox, scenario);
  const row = emptyRow(scenario, runtime.name);
  if (runtime.refused) return finish(row, [runtime.refused], t0, log);
  const id = `check-${safeName(scenario.name, 24)}-${randomBytes(3).toString("hex")}`;
  try {
    const image = await opts.images.scenario(scenario, opts.signal);
    row.image = image.ref;
    row.imageBuilt = image.built;
    row.ms.build = performance.now() - t0;

    const t1 = performance.now();
    const ref = await solveReference(scenario, image, `${id}-a`, opts);
    row.ms.solve = performance.now() - t1;
    if (ref.problem) row.problems.push(ref.problem);
    if (ref.problem && ref.log) log.warn({ log: ref.log.slice(-2000) }, "check.solve.output");

    const t2 = performance.now();
    const scope = opts.sandbox.openScope(`${id}-b`, gradingTtlMs(scenario), scenario);
    const grader = opts.grader ?? builtinGrader;
    grader.ensureTests(scenario);
    const grade = checkGrading(scenario, image, scope, id, opts, log);
    const probe = grader.gradesHostileProbe
      ? (opts.hostileProbe ?? (await readFile(HOSTILE_PROBE_PATH)))
      : undefined;
    try {
      const [refGrade, emptyGrade, hostileGrade] = await Promise.all([
        ref.deliverable ? grade("reference", ref.deliverable) : Promise.resolve(undefined),
        grade("empty", Buffer.alloc(0)),
        probe ? grade("hostile", probe) : Promise.resolve(undefined),
      ]);
      recordGrades(row, refGrade, emptyGrade, hostileGrade);
    } finally {
      await scope.dispose();
    }
    row.ms.grade = performance.now() - t2;
  } catch (err) {
    if (isAbortError(err) || opts.signal?.aborted) throw err;
    const e = toValidatorError(err);
    row.problems.push(`${e.code}: ${e.message}`);
  }
  return finish(row, [], t0, log);
}

/**
 * The runtime the scenario's episodes get, or why they get none (a scenario that declared it cannot
 * run under gVisor, under EPISODE_RUNTIME=runsc): a FAIL row naming it, the other rows still run.
 */
function runtimeOrRefusal(sb: Sandbox, scenario: EpisodeScenario): { name: string; refused?: string } {
  try {
    return { name: sb.runtimeFor(scenario) };
  } catch (err) {
    const e = toValidatorError(err);
    return { name: sb.episodeRuntime?.name ?? "runc", refused: `${e.code}: ${e.message}` };
  }
}

function finish(row: CheckRow, problems: string[], t0: number, log: Logger): CheckRow {
  row.problems.push(...problems);
  row.ok = row.problems.length === 0;
  row.ms.total = performance.now() - t0;
  log.info({ ok: row.ok, problems: row.problems, ms: Math.round(row.ms.total) }, "check.done");
  return row;
}

/**
 * What the hostile probe's grading says about the grader: it must end normally (a root process
 * running the probe's payload kills everything and prints forged report lines) and pass no test
 * that the empty deliverable fails.
 */
export function hostileProblems(hostile: GradeResult, empty: GradeResult): string[] {
  const problems: string[] = [];
  if (hostile.failure) problems.push(`hostile probe: ${hostile.failure.code}: ${hostile.failure.message}`);
  if (hostile.forgedReports > 0)
    problems.push(
      `hostile probe: ${hostile.forgedReports} forged report line(s) on the grader's stdout (root ran its payload)`,
    );
  if (!hostile.failure && !empty.failure) {
    const passedByEmpty = new Set(
      (empty.ctrf?.entries ?? []).filter((t) => t.status === "passed").map((t) => t.name),
    );
    const gained = (hostile.ctrf?.entries ?? [])
      .filter((t) => t.status === "passed" && !passedByEmpty.has(t.name))
      .map((t) => t.name);
    if (gained.length || hostile.passed > empty.passed)
      problems.push(
        `hostile probe passed what the empty deliverable fails (${hostile.passed}/${hostile.tests}): ${gained.join("; ") || "more tests"}`,
      );
  }
  return problems;
}

export async function checkScenarios(
  scenarios: readonly EpisodeScenario[],
  opts: CheckOptions,
): Promise<CheckRow[]> {
  // The shared agent base is built once up front, so parallel scenario builds do not queue on it.
  await opts.images.agentBase?.(opts.signal);
  const limit = pLimit(Math.max(1, opts.concurrency ?? 2));
  return Promise.all(
    scenarios.map((s) =>
      limit(async () => {
        const row = await checkScenario(s, opts);
        opts.onRow?.(row);
        return row;
      }),
    ),
  );
}

/** The table `scenarios check` prints. */
export function formatCheckTable(rows: readonly CheckRow[]): string {
  const fmt = (g: CheckRow["reference"]) => (g ? `${g.passed}/${g.tests} (${round4(g.quality)})` : "-");
  const header = ["scenario", "reference", "empty", "hostile", "null_floor", "result", "seconds", "runtime"];
  const body = rows.map((r) => [
    termText(r.scenario),
    fmt(r.reference),
    fmt(r.empty),
    fmt(r.hostile),
    r.nullFloor === undefined ? "-" : String(r.nullFloor),
    r.ok ? "ok" : "FAIL",
    (r.ms.total / 1000).toFixed(1),
    r.runtime,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join("  ")
      .trimEnd();
  const out = [line(header), ...body.map(line)];
  for (const r of rows) for (const p of r.problems) out.push(`  ${termText(r.scenario)}: ${termText(p)}`);
  return out.join("\n");
}
