/**
 * The grading step, shared by episodes and `scenarios check`: a fresh container of the scenario
 * image with no network, the hidden tests injected at /tests after create, the one deliverable
 * at agent_output_path (mode 0755), `bash /tests/test.sh` under the verifier deadline, then
 * /logs/verifier/ctrf.json and reward.txt read back.
 */
import { readdir, readFile } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { isAbortError } from "../errors.js";
import type { Logger } from "../log.js";
import { silentLogger } from "../log.js";
import {
  createContainer,
  getPath,
  putFiles,
  readLogs,
  removeContainer,
  SCENARIO_LIMITS,
  startContainer,
  stopContainer,
  waitExit,
} from "../sandbox/containers.js";
import type { Docker } from "../sandbox/docker.js";
import { safeName, uniqueName } from "../sandbox/labels.js";
import type { EpisodeScope } from "../sandbox/reaper.js";
import type { TarEntry } from "../sandbox/tar.js";
import { type CtrfReport, parseCtrf, parseReward, scoreOf } from "./ctrf.js";
import { deadline } from "./deadline.js";
import type { EpisodeFailure } from "./types.js";

export const CTRF_PATH = "/logs/verifier/ctrf.json";
export const REWARD_PATH = "/logs/verifier/reward.txt";
const REPORT_CAP = 4 * 1024 * 1024;

export interface GradeInput {
  docker: Docker;
  scope: EpisodeScope;
  /** Scenario image reference (the same image the agent ran in). */
  image: string;
  /** Host folder of the hidden tests (scenarios/<name>/tests). */
  testsDir: string;
  agentOutputPath: string;
  /** The deliverable's bytes (an empty deliverable is a 0-byte file). */
  deliverable: Buffer;
  timeoutMs: number;
  /** Distinguishes several verifiers of one scope (container name suffix). */
  label?: string;
  signal?: AbortSignal;
  log?: Logger;
}

export interface GradeResult {
  /** passed/tests (or the reward); 0 when the verifier produced nothing usable. */
  quality: number;
  tests: number;
  passed: number;
  reward: number | undefined;
  ctrf: CtrfReport | undefined;
  /** ctrf.json as written by the grader (copied to the artifacts). */
  ctrfText: string | undefined;
  exitCode: number | undefined;
  timedOut: boolean;
  durationMs: number;
  /** stdout+stderr of test.sh, capped. */
  log: string;
  failure: EpisodeFailure | undefined;
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

export async function gradeDeliverable(input: GradeInput): Promise<GradeResult> {
  const log = input.log ?? silentLogger;
  const t0 = performance.now();
  const suffix = input.label ? `-${safeName(input.label, 20)}` : "";
  const name = `trajrl-${uniqueName(input.scope.episodeId, 60)}-verifier${suffix}`;
  input.scope.trackContainer(name);
  const c = await createContainer(input.docker, {
    name,
    image: input.image,
    entrypoint: ["bash", "/tests/test.sh"],
    cmd: [],
    user: "0:0",
    labels: input.scope.labels("verifier"),
    limits: SCENARIO_LIMITS,
    network: { kind: "none" },
    init: true,
  });
  const out = input.agentOutputPath.replace(/^\/+/, "");
  await putFiles(c, "/", [
    ...(await dirEntries(input.testsDir, "tests")),
    { name: "logs/", type: "directory", mode: 0o755 },
    { name: "logs/verifier/", type: "directory", mode: 0o755 },
    { name: out, data: input.deliverable, mode: 0o755 },
  ]);
  const dl = deadline(input.timeoutMs, input.signal);
  let exitCode: number | undefined;
  let timedOut = false;
  try {
    await startContainer(c);
    exitCode = await waitExit(c, dl.signal);
  } catch (err) {
    if (!isAbortError(err) && !dl.signal.aborted) throw err;
    if (!dl.expired) throw input.signal?.reason ?? err;
    timedOut = true;
    await stopContainer(c, 0);
  } finally {
    dl.clear();
  }
  const [ctrfFile, rewardFile, logs] = await Promise.all([
    getPath(c, CTRF_PATH, REPORT_CAP),
    getPath(c, REWARD_PATH, 4096),
    readLogs(c, 256 * 1024).catch(() => ({ stdout: "", stderr: "", truncated: false })),
  ]);
  await removeContainer(input.docker, name).catch(() => undefined);
  const ctrfText = ctrfFile.kind === "file" ? ctrfFile.data.toString("utf8") : undefined;
  const ctrf = ctrfText !== undefined ? parseCtrf(ctrfText) : undefined;
  const reward = rewardFile.kind === "file" ? parseReward(rewardFile.data.toString("utf8")) : undefined;
  const score = scoreOf(ctrf?.ok ? ctrf.value : undefined, reward?.ok ? reward.value : undefined);
  const result: GradeResult = {
    quality: score?.quality ?? 0,
    tests: score?.tests ?? 0,
    passed: score?.passed ?? 0,
    reward: reward?.ok ? reward.value : undefined,
    ctrf: ctrf?.ok ? ctrf.value : undefined,
    ctrfText,
    exitCode,
    timedOut,
    durationMs: performance.now() - t0,
    log: `${logs.stdout}${logs.stderr ? `\n--- stderr ---\n${logs.stderr}` : ""}`,
    failure: undefined,
  };
  if (!score) {
    const why = [
      ctrf && !ctrf.ok ? ctrf.error : ctrfText === undefined ? "no ctrf.json" : "",
      reward && !reward.ok ? reward.error : reward === undefined ? "no reward.txt" : "",
    ]
      .filter(Boolean)
      .join("; ");
    // Graders bound every run of the deliverable: overrunning the verifier deadline is the
    // deliverable's doing (scored 0); a grader that ends without a report is our bug.
    result.failure = timedOut
      ? {
          class: "policy",
          code: "verifier_timeout",
          message: `the verifier exceeded ${input.timeoutMs} ms (${why})`,
        }
      : { class: "infra", code: "verifier_no_result", message: `the verifier left no usable result: ${why}` };
  }
  log.info(
    {
      quality: result.quality,
      tests: result.tests,
      passed: result.passed,
      timedOut,
      exitCode,
      ms: Math.round(result.durationMs),
      failure: result.failure?.code,
    },
    "verifier.done",
  );
  return result;
}
