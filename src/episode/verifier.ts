/**
 * The grading step, shared by episodes and `scenarios check`: a fresh container of the scenario
 * image with no network, the hidden tests injected at /tests after create, the one deliverable
 * at agent_output_path (mode 0755), `bash /tests/test.sh` under the verifier deadline.
 *
 * The report comes through `input.report.channel` (report.ts): for the built-in suite ("harness")
 * a fresh key goes on the verifier's stdin and the grader's signed report is read from its stdout,
 * in a container that keeps only the capabilities a grader needs, writes its scratch data to a
 * sized tmpfs and is watched for disk; for upstream's contract ("files") /logs/verifier/ctrf.json
 * and reward.txt are read back as before. `gradeDeliverable` is the whole interface: callers give
 * the image, the tests, the deliverable, the deadline and the contract, and get a GradeResult.
 */
import { readdir, readFile } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { InfraError, isAbortError } from "../errors.js";
import type { Logger } from "../log.js";
import { silentLogger } from "../log.js";
import {
  type ContainerSpec,
  type EpisodeContainer,
  type EpisodeEngine,
  type EpisodeScope,
  type LayerBounds,
  type LayerUse,
  type LayerWatch,
  SCENARIO_LIMITS,
  safeName,
  type TarEntry,
  uniqueName,
} from "../sandbox/index.js";
import type { DiskOver } from "./attribution.js";
import { deadline } from "./deadline.js";
import { judgeReport, newReportKey, type ReportContract, type ReportVerdict } from "./report.js";
import type { EpisodeScenario } from "./types.js";

export type { ReportChannel, ReportContract } from "./report.js";

export const CTRF_PATH = "/logs/verifier/ctrf.json";
export const REWARD_PATH = "/logs/verifier/reward.txt";
const REPORT_CAP = 4 * 1024 * 1024;
const MiB = 1024 * 1024;

/**
 * The built-in suite's verifier: root with the capabilities the harness uses (hand files to the
 * agent user and take them back, switch to it, kill what it leaves) and nothing else — no
 * CAP_SYS_PTRACE, so no process can read the grader's key; scratch space on a sized tmpfs (counted
 * against the container's memory); /logs on a small one. The harness gives root everything else
 * the agent user could write, so the deliverable cannot reach the disk at all.
 */
export const HARNESS_VERIFIER = {
  capAdd: ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"],
  tmpfs: {
    "/tmp": "rw,nosuid,nodev,exec,size=1g,mode=1777",
    "/logs": "rw,nosuid,nodev,noexec,size=16m,mode=0755",
  },
  /**
   * The root filesystem may grow this much (copy-ups of what the harness takes back), in bytes and
   * in inodes; its layer stays small, so measuring it is cheap: often.
   */
  disk: { limitBytes: 256 * MiB, limitInodes: 100_000, pollMs: 1_000 },
} as const;

/** Upstream's graders install tools at grade time: generous bounds that no honest grader meets. */
export const FILES_VERIFIER_DISK: LayerBounds = {
  limitBytes: 8 * 1024 * MiB,
  limitInodes: 500_000,
  pollMs: 3_000,
};

/** The report contract of a catalogue scenario (task.toml [verifier].report, [metadata].tests). */
export function reportContractOf(scenario: EpisodeScenario): ReportContract {
  return { channel: scenario.task.verifier.report ?? "harness", tests: scenario.task.metadata?.tests };
}

export interface GradeInput {
  /** The container engine, through the episode's seam. */
  engine: EpisodeEngine;
  scope: EpisodeScope;
  /** Scenario image reference (the same image the agent ran in). */
  image: string;
  /** Host folder of the hidden tests (scenarios/<name>/tests). */
  testsDir: string;
  agentOutputPath: string;
  /** The deliverable's bytes (an empty deliverable is a 0-byte file). */
  deliverable: Buffer;
  timeoutMs: number;
  /** Where the report comes from and the declared test count; default the harness channel. */
  report?: ReportContract;
  /** Distinguishes several verifiers of one scope (container name suffix). */
  label?: string;
  signal?: AbortSignal;
  log?: Logger;
}

/** The verdict read from the grader's report (report.ts) and how the grader's run went. */
export interface GradeResult extends ReportVerdict {
  /** reward.txt as the grader wrote it (the files contract; absent on the harness channel). */
  rewardText?: string | undefined;
  exitCode: number | undefined;
  timedOut: boolean;
  durationMs: number;
  /** stdout+stderr of test.sh, capped. */
  log: string;
  /** Bytes the verifier added to its root filesystem, as last measured. */
  diskBytes: number | undefined;
}

/** Every file under `dir` as tar entries below `prefix`, executable (the tests run as root). */
export async function dirEntries(dir: string, prefix: string): Promise<TarEntry[]> {
  const out: TarEntry[] = [{ name: `${prefix}/`, type: "directory", mode: 0o755 }];
  const walk = async (d: string): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const abs = join(d, e.name);
      const rel = relative(dir, abs).split(sep).join("/");
      if (e.isDirectory()) {
        out.push({ name: `${prefix}/${rel}/`, type: "directory", mode: 0o755 });
        await walk(abs);
      } else if (e.isFile()) out.push({ name: `${prefix}/${rel}`, data: await readFile(abs), mode: 0o755 });
    }
  };
  await walk(dir);
  return out;
}

/**
 * Watch the verifier's writable layer until `signal` fires; past a bound (bytes or inodes) the
 * container is killed and `state.over` set with what was measured.
 */
export async function watchDisk(
  c: EpisodeContainer,
  w: Omit<LayerWatch, "docker">,
  signal: AbortSignal,
  state: LayerUse & { over?: DiskOver },
): Promise<void> {
  const over = await c.watchLayer(w, signal, state);
  if (!over) return;
  state.over = { ...over, limitBytes: w.limitBytes, limitInodes: w.limitInodes };
  await c.kill().catch(() => undefined);
}

/** The verifier's container: the scenario's image, no network, root; the harness's capabilities and tmpfs. */
function verifierSpec(input: GradeInput, name: string, harness: boolean): ContainerSpec {
  return {
    name,
    image: input.image,
    entrypoint: ["bash", "/tests/test.sh"],
    cmd: [],
    user: "0:0",
    labels: input.scope.labels("verifier"),
    limits: SCENARIO_LIMITS,
    network: { kind: "none" },
    init: true,
    ...(harness
      ? { dropAllCaps: true, capAdd: HARNESS_VERIFIER.capAdd, tmpfs: HARNESS_VERIFIER.tmpfs, stdin: true }
      : {}),
  };
}

type DiskState = LayerUse & { over?: DiskOver };

/**
 * Start the verifier (the harness's key on its stdin before anything else runs) and wait for it
 * under the deadline and the disk watchdog; past the deadline it is stopped.
 */
async function runVerifier(
  c: EpisodeContainer,
  input: GradeInput,
  w: Omit<LayerWatch, "docker">,
  key: Buffer | undefined,
): Promise<{ exitCode: number | undefined; timedOut: boolean; disk: DiskState }> {
  const stdin = key ? await c.openStdin() : undefined;
  const dl = deadline(input.timeoutMs, input.signal);
  const disk: DiskState = {};
  const watching = new AbortController();
  let watcher: Promise<void> | undefined;
  let exitCode: number | undefined;
  let timedOut = false;
  try {
    await c.start();
    // The key goes in before anything of the deliverable can run: the harness reads it first.
    await stdin?.send(Buffer.from(`${key!.toString("hex")}\n`));
    watcher = watchDisk(c, w, watching.signal, disk);
    exitCode = await c.wait(dl.signal);
  } catch (err) {
    if (!isAbortError(err) && !dl.signal.aborted) throw err;
    if (!dl.expired) throw input.signal?.reason ?? err;
    timedOut = true;
    await c.stop(0);
  } finally {
    dl.clear();
    watching.abort();
    await watcher;
  }
  return { exitCode, timedOut, disk };
}

/** Past a disk bound: what the watchdog saw, or the final size measured after the run. */
function diskOver(
  bounds: LayerBounds,
  disk: DiskState,
  finalBytes: number | undefined,
): DiskOver | undefined {
  if (disk.over) return disk.over;
  const bytes = finalBytes ?? disk.bytes;
  if (bytes === undefined || bytes <= bounds.limitBytes) return undefined;
  return { bytes, inodes: disk.inodes, limitBytes: bounds.limitBytes, limitInodes: bounds.limitInodes };
}

function logGrade(log: Logger, channel: string, r: GradeResult): void {
  const fields = {
    channel,
    quality: r.quality,
    tests: r.tests,
    passed: r.passed,
    timedOut: r.timedOut,
    exitCode: r.exitCode,
    diskBytes: r.diskBytes,
    forgedReports: r.forgedReports,
    ms: Math.round(r.durationMs),
    failure: r.failure?.code,
  };
  if (r.forgedReports > 0) log.warn(fields, "verifier.forged_report");
  log.info(fields, "verifier.done");
}

export async function gradeDeliverable(input: GradeInput): Promise<GradeResult> {
  const log = input.log ?? silentLogger;
  const t0 = performance.now();
  const contract: ReportContract = input.report ?? { channel: "harness" };
  const harness = contract.channel === "harness";
  if (harness && /^\/+tmp(\/|$)/.test(input.agentOutputPath))
    throw new InfraError(
      "verifier_bad_scenario",
      `${input.agentOutputPath}: a harness verifier mounts a fresh tmpfs on /tmp, the deliverable would be hidden`,
    );
  const suffix = input.label ? `-${safeName(input.label, 20)}` : "";
  const name = `trajrl-${uniqueName(input.scope.episodeId, 60)}-verifier${suffix}`;
  input.scope.trackContainer(name);
  const bounds = harness ? HARNESS_VERIFIER.disk : FILES_VERIFIER_DISK;
  const c = await input.engine.create(verifierSpec(input, name, harness));
  const out = input.agentOutputPath.replace(/^\/+/, "");
  await c.write("/", [
    ...(await dirEntries(input.testsDir, "tests")),
    { name: "logs/", type: "directory", mode: 0o755 },
    { name: "logs/verifier/", type: "directory", mode: 0o755 },
    { name: out, data: input.deliverable, mode: 0o755 },
  ]);
  const key = harness ? newReportKey() : undefined;
  const w = { ...bounds, scope: input.scope, log };
  const { exitCode, timedOut, disk } = await runVerifier(c, input, w, key);
  const [state, ctrfFile, rewardFile, logs, finalSize] = await Promise.all([
    c.state().catch(() => undefined),
    harness ? undefined : c.read(CTRF_PATH, REPORT_CAP),
    harness ? undefined : c.read(REWARD_PATH, 4096),
    c.logs(256 * 1024).catch(() => ({ stdout: "", stderr: "", truncated: false })),
    c.layerBytes(),
  ]);
  await input.engine.remove(name).catch(() => undefined);
  const rewardText = rewardFile?.kind === "file" ? rewardFile.data.toString("utf8") : undefined;
  const diskBytes = finalSize ?? disk.bytes;
  const verdict = judgeReport({
    contract,
    timeoutMs: input.timeoutMs,
    timedOut: timedOut && !disk.over,
    exitCode,
    oomKilled: Boolean(state?.oomKilled),
    diskExceeded: diskOver(bounds, disk, finalSize),
    stdout: logs.stdout,
    key,
    ctrfText: ctrfFile?.kind === "file" ? ctrfFile.data.toString("utf8") : undefined,
    rewardText,
  });
  // The report's verdict (quality, counts, reward, ctrf, forged lines, failure) and what was observed.
  const result: GradeResult = {
    ...verdict,
    rewardText,
    exitCode,
    timedOut,
    durationMs: performance.now() - t0,
    log: `${logs.stdout}${logs.stderr ? `\n--- stderr ---\n${logs.stderr}` : ""}`,
    diskBytes,
  };
  logGrade(log, contract.channel, result);
  return result;
}
