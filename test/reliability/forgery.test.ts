/**
 * A deliverable that tries to forge its own grade (issue 25, item 1), each written by a scripted
 * model through a real episode — sidecar, agent, meter, Engy simulator, Docker — the way a real
 * model copies a script from a miner's SKILL.md (so every answer is metered and provenance holds).
 * The simulated model "knows" one forgery per SKILL.md (test/fixtures/forgeries/README.md). Each
 * forgery must score exactly what the same deliverable earns honestly: the null floor for those
 * that do nothing real, the score of the same runner without its forging lines for the runner.
 *
 * Before this change every one of them scored 1.0 (or 6/6), as measured on the old graders.
 *
 * Also here (issue 20, item 6): a deliverable that writes forever is bounded — as the agent user
 * by the verifier's sized tmpfs and the harness's lock-down, through a grader's hole as root by
 * the disk watchdog.
 */
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseCtrf } from "../../src/episode/ctrf.js";
import type { EpisodeResult, EpisodeScenario } from "../../src/episode/types.js";
import { type GradeResult, gradeDeliverable, reportContractOf } from "../../src/episode/verifier.js";
import { round4 } from "../../src/precision.js";
import { loadScenario } from "../../src/scenarios/index.js";
import {
  type EpisodeRig,
  packOf,
  REPO_ROOT,
  runTestEpisode,
  SCENARIOS_DIR,
  shippedScenario,
  startEpisodeRig,
} from "../helpers/episode.js";
import { TEST_EPISODE_RUNTIME } from "../helpers/sandbox.js";
import { forgerySkill } from "../helpers/skills.js";

const FORGERIES = join(REPO_ROOT, "test/fixtures/forgeries");
const MODEL = "glm-5.3-flash";
const MiB = 1024 * 1024;
/**
 * The `gvisor` project runs this file as production does with gVisor on the engine: `auto`, so each
 * scenario gets the runtime its episodes get (gVisor, runc where task.toml says `not_under_gvisor`).
 */
const UNDER_GVISOR = TEST_EPISODE_RUNTIME !== "runc";

/** One forgery: the file it makes the model write, at the scenario's deliverable path. */
interface Forgery {
  name: string;
  file: string;
  scenario: () => EpisodeScenario;
}

let rig: EpisodeRig;
let tmp: string;
let git: EpisodeScenario;
let runner: EpisodeScenario;
let hole: EpisodeScenario;

const FORGERY_LIST: Forgery[] = [
  { name: "git-fsmonitor", file: "recover.sh", scenario: () => git },
  { name: "git-global-hooks", file: "recover.sh", scenario: () => git },
  { name: "git-filter-stop", file: "recover.sh", scenario: () => git },
  { name: "runner-fake-record", file: "runner.py", scenario: () => runner },
  { name: "root-forge-kill", file: "answer.sh", scenario: () => hole },
  { name: "root-forge-frames", file: "answer.sh", scenario: () => hole },
];

/** The miner's notes that make the model write the forgery (the simulator recognises them). */
const skillOf = (f: Forgery, content: string) =>
  forgerySkill(f.name, f.scenario().task.verifier.agent_output_path, content);

const deliverableOf = (f: Forgery) => readFile(join(FORGERIES, f.name, f.file), "utf8");

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "trajrl-forgery-"));
  // The fixture scenario with a hole in its grader, using the real harness.
  const holeDir = join(tmp, "scenarios", "root-hole");
  await cp(join(FORGERIES, "root-hole-scenario"), holeDir, { recursive: true });
  for (const f of ["harness.py", "test.sh"])
    await cp(join(SCENARIOS_DIR, "_harness", f), join(holeDir, "tests", f));
  hole = await loadScenario(holeDir);
  git = await shippedScenario("git-lost-commit-recovery");
  runner = await shippedScenario("bounded-async-runner");
  // What the simulated model knows: each forgery's SKILL.md is the "instruction" it recognises,
  // and writing the forged file is its "solution".
  const sim = join(tmp, "sim");
  for (const f of FORGERY_LIST) {
    const content = await deliverableOf(f);
    const path = f.scenario().task.verifier.agent_output_path;
    await mkdir(join(sim, f.name, "solution"), { recursive: true });
    await writeFile(join(sim, f.name, "instruction.md"), skillOf(f, content));
    await writeFile(
      join(sim, f.name, "solution", "solve.sh"),
      `#!/bin/bash\ncat > ${path} <<'TRAJRL_FORGED'\n${content.trimEnd()}\nTRAJRL_FORGED\nchmod 0755 ${path}\n`,
    );
  }
  rig = await startEpisodeRig({
    episodeRuntime: UNDER_GVISOR ? "auto" : "runc",
    seed: 11,
    simScenariosDir: sim,
    simProfile: { models: { [MODEL]: { skill: 1, malformed_tool_json_rate: 0 } } },
  });
  expect(rig.sim.scenarios.sort()).toEqual(FORGERY_LIST.map((f) => f.name).sort());
  expect(rig.sandbox.episodeRuntime?.gvisor ?? false).toBe(UNDER_GVISOR);
  for (const s of [git, hole]) expect(rig.sandbox.runtimeFor(s)).toBe(UNDER_GVISOR ? "runsc" : "runc");
  await Promise.all([
    rig.images.sidecar(),
    rig.images.scenario(git),
    rig.images.scenario(runner),
    rig.images.scenario(hole),
  ]);
}, 1_200_000);

afterAll(async () => {
  await rig?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

async function forge(name: string): Promise<EpisodeResult> {
  const f = FORGERY_LIST.find((x) => x.name === name)!;
  const content = await deliverableOf(f);
  const { r } = await runTestEpisode(rig, {
    pack: packOf({}, skillOf(f, content)),
    scenario: f.scenario(),
    runsDir: join(tmp, "runs"),
    outDir: join(tmp, "runs", name),
    defaultModel: MODEL,
    timeouts: { agentMs: 120_000, stopGraceMs: 2_000 },
    report: (r) =>
      `forgery ${name}: ${r.status} ${r.failure ? `${r.failure.class}/${r.failure.code}` : "clean"} quality ${round4(r.quality)} (${r.passed}/${r.tests}) verifier ${Math.round(r.timings.verify_ms ?? 0)} ms`,
  });
  // A model wrote it through the meter: every answer the agent acted on matches a receipt...
  expect(r.answer_provenance?.unmatched).toBe(0);
  // ...and what it wrote is the forgery (its second line, a comment, is in the session).
  const turns = await readFile(join(r.artifacts.dir, "turns.jsonl"), "utf8");
  const marker = content.split("\n")[1]!;
  expect(marker.length).toBeGreaterThan(20);
  expect(turns).toContain(JSON.stringify(marker).slice(1, -1));
  return r;
}

/** The deliverable graded alone, without an episode, under the runtime the scenario's episodes get. */
async function grade(s: EpisodeScenario, deliverable: Buffer, label: string): Promise<GradeResult> {
  const scope = rig.sandbox.openScope(`forgery-${label}-${Date.now().toString(36)}`, 20 * 60_000, s);
  try {
    return await gradeDeliverable({
      engine: rig.sandbox.episodeEngine,
      scope,
      image: (await rig.images.scenario(s)).ref,
      testsDir: join(s.dir, "tests"),
      agentOutputPath: s.task.verifier.agent_output_path,
      deliverable,
      timeoutMs: s.task.verifier.timeout_sec * 1000,
      report: reportContractOf(s),
      label,
    });
  } finally {
    await scope.dispose();
  }
}

const verifierLog = (r: EpisodeResult) => readFile(join(r.artifacts.dir, "verifier.log"), "utf8");

describe("a deliverable that forges its grade scores what it earns honestly", () => {
  // git-lost-commit-recovery: the old grader ran git as root on the repositories the deliverable
  // had been given; each of these made root run its payload (forged report + grader killed or
  // stopped) and scored 6/6. None of them recovers anything: the null floor (the clean repository).
  it.each(["git-fsmonitor", "git-global-hooks", "git-filter-stop"])(
    "%s: git config that runs a program as root gets the null floor",
    async (name) => {
      const r = await forge(name);
      expect(r.status).toBe("scored");
      expect(r.failure).toBeNull();
      expect({ tests: r.tests, passed: r.passed }).toEqual({ tests: 6, passed: 1 });
      expect(round4(r.quality)).toBe(git.task.metadata!.null_floor);
    },
    600_000,
  );

  it("bounded-async-runner: a runner that ignores -j and rewrites the record scores as without the rewrite", async () => {
    // It declares it cannot run under gVisor (SO_PEERCRED): its episode and its twin run under runc.
    expect(runner.task.metadata?.not_under_gvisor).toBeTruthy();
    expect(rig.sandbox.runtimeFor(runner)).toBe("runc");
    const r = await forge("runner-fake-record");
    const file = await readFile(join(FORGERIES, "runner-fake-record", "runner.py"), "utf8");
    const honest = file.replace(/^FORGE = True$/m, "FORGE = False");
    expect(honest).not.toBe(file);
    const twin = await grade(runner, Buffer.from(honest), "honest-runner");
    expect(r.failure).toBeNull();
    expect(twin.failure).toBeUndefined();
    const statuses = (entries: readonly { name: string; status: string }[]) =>
      Object.fromEntries(entries.map((t) => [t.name, t.status]));
    // The artifact is the grader's signed report.
    const report = parseCtrf(await readFile(join(r.artifacts.dir, "ctrf.json"), "utf8"));
    if (!report.ok) throw new Error(report.error);
    const forged = statuses(report.value.entries);
    const plain = statuses(twin.ctrf!.entries);
    console.log(`runner: forged ${JSON.stringify(forged)}\nhonest ${JSON.stringify(plain)}`);
    // What the forged record claimed (at most K at once, file order, the child dead) is judged
    // from the grader's own record now: those tests fail, as they do without the forgery, and the
    // report test passes in both. (Whether an unbounded runner happens to have exactly 3 of 5 jobs
    // up at once, or job 3 connect after job 2 ended, depends on scheduling, with or without the
    // forgery: those two tests are not compared.)
    const judged = {
      "reports every job in file order with its status and exit code": "passed",
      "never more than K at once; jobs start in file order": "failed",
      "kills a job at its timeout together with the processes it started": "failed",
      "-j 1 runs strictly one job at a time; an empty job file prints nothing": "failed",
    };
    const pick = (all: Record<string, string>) =>
      Object.fromEntries(Object.keys(judged).map((name) => [name, all[name]]));
    expect(pick(plain)).toEqual(judged);
    expect(pick(forged)).toEqual(judged);
    expect(Object.keys(forged)).toHaveLength(6);
    // The old grader gave it 6/6 (its honest score there: 2/6).
    expect(r.passed).toBeLessThanOrEqual(2);
  }, 600_000);

  // The validator's depth: a grader with a hole that gives the deliverable root in the verifier.
  it("root in the verifier: forged files, a forged report line and a killed grader are no score", async () => {
    const r = await forge("root-forge-kill");
    expect(r.status).toBe("scored");
    expect(r.failure).toMatchObject({ class: "policy", code: "verifier_killed" });
    expect(r.quality).toBe(0);
    expect(r.quality).toBe(hole.task.metadata!.null_floor);
    const log = await verifierLog(r);
    // It did run as root, and found no key: the key lives only in the grader's non-dumpable
    // memory, which neither /proc/PID/mem nor ptrace reaches without CAP_SYS_PTRACE, under both runtimes.
    const probe = JSON.parse(
      log
        .split("\n")
        .find((l) => l.startsWith("PROBE "))!
        .slice(6),
    );
    console.log(`root probe: ${JSON.stringify(probe)}`);
    expect(probe).toMatchObject({ uid: 0, mem: "denied", ptrace: "denied", key_like: 0, stdin_bytes: 0 });
    // Linux also denies a non-dumpable process's environ and fd links (ptrace access check). gVisor
    // (Debian's runsc 20221219) checks only the files' modes there (root's, 0444), so a root
    // deliverable reads them. Nothing there is of use: the environment is the container's own,
    // which root reads in /proc/1/environ under runc too, fd 0 is /dev/null once the harness has
    // taken the key, and the others are files root can open anyway or the deliverable's own
    // stdio. The verdict does not move: verifier_killed, 0, under both (src/sandbox/README.md, gVisor).
    if (!UNDER_GVISOR) expect(probe).toMatchObject({ environ: "denied", fd: "denied" });
    expect(log).toMatch(/^@@TRAJRL-REPORT v1 0{64} /m);
  }, 600_000);

  it("root in the verifier, grader left to finish: the forged lines are refused, the grader's report stands", async () => {
    const r = await forge("root-forge-frames");
    expect(r.status).toBe("scored");
    expect(r.failure).toBeNull();
    expect({ tests: r.tests, passed: r.passed, quality: r.quality }).toEqual({
      tests: 3,
      passed: 0,
      quality: 0,
    });
    const lines = (await verifierLog(r)).split("\n").filter((l) => l.startsWith("@@TRAJRL-REPORT v1 "));
    expect(lines).toHaveLength(4); // one forged per test, then the grader's own
    expect(lines.filter((l) => l.startsWith(`@@TRAJRL-REPORT v1 ${"0".repeat(64)} `))).toHaveLength(3);
  }, 600_000);
});

describe("a deliverable that carries state from one run to the next", () => {
  it("sensor-log-compressor: input stashed in System V shared memory is gone before decompress", async () => {
    const sensor = await shippedScenario("sensor-log-compressor");
    const codec = await readFile(join(FORGERIES, "sensor-sysv-stash", "codec.py"));
    const g = await grade(sensor, codec, "sysv-stash");
    console.log(`sysv stash: ${g.passed}/${g.tests}`);
    // Before, the grader removed files and processes but not IPC objects: 5/5 for a 3-byte "archive".
    expect(g.failure).toBeUndefined();
    expect({ tests: g.tests, passed: g.passed }).toEqual({ tests: 5, passed: 0 });
  }, 600_000);
});

describe("a deliverable that writes forever (issue 20, item 6)", () => {
  it("as the agent user: ENOSPC at the /tmp tmpfs, nothing on the root filesystem; the grader reports", async () => {
    const writer = [
      "#!/bin/bash",
      "# Writes until it cannot, everywhere the agent user might.",
      'for d in /tmp /var/tmp /app /home/agent /workspace /run/lock /dev/shm "$1"; do',
      '  cat /dev/zero > "$d/fill.$RANDOM" 2>/dev/null',
      "done",
      "exit 0",
      "",
    ].join("\n");
    const g = await grade(git, Buffer.from(writer), "writer");
    console.log(
      `writer (agent user): ${g.failure?.code ?? "clean"} ${g.passed}/${g.tests}, root filesystem +${((g.diskBytes ?? 0) / MiB).toFixed(1)} MiB, ${Math.round(g.durationMs)} ms`,
    );
    expect(g.timedOut).toBe(false);
    expect(g.failure).toBeUndefined();
    expect(g.tests).toBe(6);
    expect(g.diskBytes).toBeDefined();
    expect(g.diskBytes!).toBeLessThan(32 * MiB);
  }, 600_000);

  it("as root through a grader's hole: the disk watchdog stops the verifier, quality 0", async () => {
    const writer = "#!/bin/bash\n# Root fills the root filesystem.\ncat /dev/zero > /var/fill\n";
    const g = await grade(hole, Buffer.from(writer), "root-writer");
    console.log(
      `writer (root): ${g.failure?.code ?? "clean"}, root filesystem ${((g.diskBytes ?? 0) / MiB).toFixed(0)} MiB when measured, ${Math.round(g.durationMs)} ms`,
    );
    expect(g.failure).toMatchObject({ class: "policy", code: "verifier_disk_limit" });
    expect(g.quality).toBe(0);
    expect(g.timedOut).toBe(false);
  }, 600_000);
});
