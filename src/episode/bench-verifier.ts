/**
 * Grading a trajrl-bench deliverable as upstream's validator does (`_run_verifier_container`): a
 * fresh container of the scenario image, `test.sh` at /test.sh (0755), every other file of the
 * bench's tests at /tests/<name>, the deliverable at its path (0755), the command
 * `bash -c "mkdir -p /logs/verifier && bash /test.sh"`, the verifier timeout, then
 * /logs/verifier/reward.txt and ctrf.json read back. The rules are upstream's: no reward.txt → 0
 * (ctrf.json is then not read); reward = clamp(int(text), 0, 1), unparsable → 0; quality =
 * ctrf passed/tests when tests > 0, else the reward. A grader that overruns is killed and what it
 * wrote still counts. The network: `bridge` (the default, as upstream's: graders fetch test tools
 * at grade time) is a network of the grading's own with a route out and none to the host — the
 * host's services and every episode's meter listener are dropped (src/sandbox firewall, chain
 * TRAJRL-GRADER), where upstream's Docker `bridge` reaches them; `none` when the operator chose it.
 * The container is never given an episode's networks.
 */
import { isAbortError } from "../errors.js";
import { pythonInt } from "../python-int.js";
import {
  type Container,
  createContainer,
  type EpisodeScope,
  getPath,
  type LayerBounds,
  type LayerUse,
  layerBytes,
  type NetworkAttachment,
  putFiles,
  readLogs,
  removeContainer,
  type Sandbox,
  startContainer,
  type TarEntry,
  uniqueName,
  waitExit,
} from "../sandbox/index.js";
import type { DiskOver } from "./attribution.js";
import { diskOverText } from "./attribution.js";
import { NO_SCORE } from "./report.js";
import { FILES_VERIFIER_DISK, type GradeResult, watchDisk } from "./verifier.js";

export const BENCH_REWARD_PATH = "/logs/verifier/reward.txt";
export const BENCH_CTRF_PATH = "/logs/verifier/ctrf.json";
const REPORT_CAP = 4 * 1024 * 1024;

export interface BenchGradeInput {
  /** The engine, and the address pool the grader's own network comes from. */
  sandbox: Pick<Sandbox, "docker" | "networks">;
  scope: EpisodeScope;
  image: string;
  testFiles: Readonly<Record<string, Buffer>>;
  agentOutputPath: string;
  /** Absent when the agent left no regular file there: the tests run without it, as upstream's. */
  deliverable: Buffer | undefined;
  timeoutMs: number;
  network: "none" | "bridge";
  /** The disk watchdog's bounds; default FILES_VERIFIER_DISK (tests run smaller ones). */
  disk?: LayerBounds;
  signal?: AbortSignal;
}

/** upstream `_parse_ctrf_correctness`: (passed, total) from results.summary, (0, 0) when unusable. */
export function ctrfCorrectness(ctrf: unknown): { passed: number; total: number } {
  if (!ctrf || typeof ctrf !== "object" || Array.isArray(ctrf)) return { passed: 0, total: 0 };
  const results = (ctrf as Record<string, unknown>).results;
  const summary =
    results && typeof results === "object" && !Array.isArray(results)
      ? (results as Record<string, unknown>).summary
      : undefined;
  if (!summary || typeof summary !== "object" || Array.isArray(summary)) return { passed: 0, total: 0 };
  const s = summary as Record<string, unknown>;
  const total = pythonInt(s.tests ?? 0);
  const passed = pythonInt(s.passed ?? 0);
  if (total === undefined || passed === undefined || total <= 0) return { passed: 0, total: 0 };
  return { passed, total };
}

/** The JSON value of a text, undefined when there is none or it does not parse. */
function jsonOf(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** upstream: `max(0, min(1, int(raw.decode().strip())))`, 0 when it does not parse. */
export function rewardOf(text: string): number {
  const n = pythonInt(text);
  return n === undefined ? 0 : Math.max(0, Math.min(1, n));
}

/**
 * The grader's network: none, or (`bridge`) a network of this grading's own with a route out and
 * none to the host; removed by the returned function (and with the scope, whatever happens).
 */
async function graderNetwork(
  input: BenchGradeInput,
  name: string,
): Promise<{ attach: NetworkAttachment; release: () => Promise<void> }> {
  if (input.network === "none") return { attach: { kind: "none" }, release: async () => undefined };
  const net = `${name}-net`;
  input.scope.trackNetwork(net, true);
  await input.sandbox.networks.create("grader", net, input.scope.labels("net-grader"));
  return { attach: { kind: "network", name: net }, release: () => input.scope.removeNetwork(net) };
}

/** The bench's tests at /test.sh and /tests/, the deliverable at its path (0755) when there is one. */
async function placeFiles(c: Container, input: BenchGradeInput): Promise<void> {
  const files = Object.entries(input.testFiles);
  const testSh = input.testFiles["test.sh"] ?? Buffer.alloc(0);
  await putFiles(c, "/", [{ name: "test.sh", data: testSh, mode: 0o755 }]);
  const helpers: TarEntry[] = files
    .filter(([n]) => n !== "test.sh")
    .map(([n, data]) => ({ name: `tests/${n}`, data, mode: 0o644 }));
  if (helpers.length)
    await putFiles(c, "/", [{ name: "tests/", type: "directory", mode: 0o755 }, ...helpers]);
  const slash = input.agentOutputPath.lastIndexOf("/");
  const dir = input.agentOutputPath.slice(0, slash) || "/";
  const base = input.agentOutputPath.slice(slash + 1);
  if (input.deliverable !== undefined)
    await putFiles(c, dir, [{ name: base, data: input.deliverable, mode: 0o755 }]);
}

/** Run the grader to its end or its timeout (then killed), under the disk watchdog. */
async function runGrader(
  c: Container,
  input: BenchGradeInput,
): Promise<{ exitCode: number | undefined; timedOut: boolean; disk: LayerUse & { over?: DiskOver } }> {
  await startContainer(c);
  let exitCode: number | undefined;
  let timedOut = false;
  const deadline = AbortSignal.timeout(input.timeoutMs);
  // A bound upstream does not have, far above what an honest grader writes (it may install tools).
  const disk: LayerUse & { over?: DiskOver } = {};
  const watching = new AbortController();
  const w = { ...(input.disk ?? FILES_VERIFIER_DISK), docker: input.sandbox.docker, scope: input.scope };
  const watcher = watchDisk(c, w, watching.signal, disk);
  try {
    exitCode = await waitExit(c, input.signal ? AbortSignal.any([input.signal, deadline]) : deadline);
  } catch (err) {
    if (input.signal?.aborted) throw err;
    if (!isAbortError(err) && !deadline.aborted) throw err;
    timedOut = true;
    await c.kill({ signal: "SIGKILL" }).catch(() => undefined);
    await waitExit(c, AbortSignal.timeout(30_000)).catch(() => undefined);
  } finally {
    watching.abort();
    await watcher;
  }
  return { exitCode, timedOut, disk };
}

/** upstream's reading of what the grader left: no reward.txt → 0; quality = ctrf passed/tests, else the reward. */
async function readGrade(
  c: Container,
  run: { exitCode: number | undefined; timedOut: boolean; diskBytes: number | undefined; t0: number },
): Promise<GradeResult> {
  const [logs, reward, ctrf] = await Promise.all([
    readLogs(c, 1024 * 1024).catch(() => ({ stdout: "", stderr: "", truncated: false })),
    getPath(c, BENCH_REWARD_PATH, REPORT_CAP),
    getPath(c, BENCH_CTRF_PATH, REPORT_CAP),
  ]);
  const log = `${logs.stdout}${logs.stderr ? `\n--- stderr ---\n${logs.stderr}` : ""}`;
  const ran = {
    log,
    exitCode: run.exitCode,
    timedOut: run.timedOut,
    durationMs: performance.now() - run.t0,
    diskBytes: run.diskBytes,
    failure: undefined,
  };
  // No reward.txt: upstream scores 0 and does not read ctrf.json.
  if (reward.kind !== "file") return { ...NO_SCORE, ...ran };
  const rewardText = reward.data.toString("utf8");
  const r = rewardOf(rewardText);
  const ctrfText = ctrf.kind === "file" ? ctrf.data.toString("utf8") : undefined;
  const { passed, total } = ctrfCorrectness(jsonOf(ctrfText));
  return {
    quality: total > 0 ? passed / total : r,
    tests: total,
    passed,
    reward: r,
    ctrf: undefined,
    ctrfText,
    rewardText,
    forgedReports: 0,
    ...ran,
  };
}

export async function gradeBenchDeliverable(input: BenchGradeInput): Promise<GradeResult> {
  const t0 = performance.now();
  const { docker } = input.sandbox;
  const name = `trajrl-${uniqueName(input.scope.episodeId, 60)}-verifier`;
  input.scope.trackContainer(name);
  const net = await graderNetwork(input, name);
  try {
    const c = await createContainer(docker, input.scope.runtime, {
      name,
      image: input.image,
      cmd: ["bash", "-c", "mkdir -p /logs/verifier && bash /test.sh"],
      labels: input.scope.labels("verifier"),
      // Upstream bounds neither CPU nor memory here; a bound could fail an honest deliverable's tests.
      limits: { cpus: 0, memoryBytes: 0, pidsLimit: 8192 },
      network: net.attach,
      outsideNames: net.attach.kind === "network",
      logMaxBytes: 10 * 1024 * 1024,
    });
    await placeFiles(c, input);
    const { exitCode, timedOut, disk } = await runGrader(c, input);
    const diskBytes = (await layerBytes(c)) ?? disk.bytes;
    if (disk.over)
      return {
        ...NO_SCORE,
        log: "",
        exitCode,
        timedOut: false,
        durationMs: performance.now() - t0,
        diskBytes,
        failure: {
          class: "policy",
          code: "verifier_disk_limit",
          message: `the grader wrote past its filesystem's bound (${diskOverText(disk.over)}) and was stopped`,
        },
      };
    return await readGrade(c, { exitCode, timedOut, diskBytes, t0 });
  } finally {
    await removeContainer(docker, name).catch(() => undefined);
    await net.release();
  }
}
