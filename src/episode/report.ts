/**
 * How a grader's report becomes a score, and when it is none (pure: facts in, verdict out).
 *
 * Two channels (GradeInput.report):
 * - "harness", the built-in suite: the validator writes a fresh key on the verifier's stdin; the
 *   harness (scenarios/_harness/harness.py) reads it before anything else runs, keeps it only in
 *   its own non-dumpable memory, and prints the final report as one line
 *   `@@TRAJRL-REPORT v1 <hmac-sha256(key, "trajrl-report v1\n" + report) hex> <base64 report>`.
 *   Files under /logs/verifier are ignored: a process of the deliverable that got root could
 *   rewrite them, but cannot sign. A grader killed by a signal, more or fewer than one signed
 *   report, or a report whose test count differs from the declared one, is not a score.
 * - "files", upstream's contract (trajrl-bench): /logs/verifier/ctrf.json, else reward.txt. Only
 *   what cannot move an honest deliverable's verdict is added: a declared test count, when there
 *   is one, must match.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import type { ErrorCode } from "../errors.js";
import { type DiskOver, diskOverText } from "./attribution.js";
import { type CtrfReport, parseCtrf, parseReward, scoreOf } from "./ctrf.js";
import type { EpisodeFailure } from "./types.js";

export const REPORT_PREFIX = "@@TRAJRL-REPORT v1 ";
const MAC_CONTEXT = Buffer.from("trajrl-report v1\n");

export type ReportChannel = "harness" | "files";

export interface ReportContract {
  channel: ReportChannel;
  /** The scenario's declared test count ([metadata].tests); a report with another count is not a score. */
  tests?: number | undefined;
}

/** A fresh key per grading: 32 random bytes, sent as 64 hex digits and a newline. */
export function newReportKey(): Buffer {
  return randomBytes(32);
}

export function signReport(key: Buffer, report: Buffer): string {
  return createHmac("sha256", key).update(MAC_CONTEXT).update(report).digest("hex");
}

export interface SignedReports {
  /** Reports whose MAC verified, in order of appearance. */
  valid: Buffer[];
  /** Lines that looked like a report and did not verify (someone other than the grader wrote them). */
  forged: number;
}

/** Every report line of the verifier's stdout, authenticated with `key`. */
export function readSignedReports(stdout: string, key: Buffer): SignedReports {
  const out: SignedReports = { valid: [], forged: 0 };
  for (const raw of stdout.split("\n")) {
    const line = raw.replace(/\r$/, "");
    if (!line.startsWith(REPORT_PREFIX)) continue;
    const m = /^([0-9a-f]{64}) ([A-Za-z0-9+/]+={0,2})$/.exec(line.slice(REPORT_PREFIX.length));
    if (!m) {
      out.forged++;
      continue;
    }
    const data = Buffer.from(m[2]!, "base64");
    const want = Buffer.from(signReport(key, data), "hex");
    if (timingSafeEqual(want, Buffer.from(m[1]!, "hex"))) out.valid.push(data);
    else out.forged++;
  }
  return out;
}

/** What the validator observed of one verifier run. */
export interface VerifierFacts {
  contract: ReportContract;
  timeoutMs: number;
  timedOut: boolean;
  exitCode: number | undefined;
  oomKilled: boolean;
  /** Set when the disk watchdog stopped the verifier. */
  diskExceeded?: DiskOver | undefined;
  /** harness: the verifier's stdout and the key it was given. */
  stdout?: string;
  key?: Buffer | undefined;
  /** files: the texts of /logs/verifier/ctrf.json and reward.txt, when they were regular files. */
  ctrfText?: string | undefined;
  rewardText?: string | undefined;
}

export interface ReportVerdict {
  /** passed/tests (or the reward); 0 whenever there is a failure. */
  quality: number;
  tests: number;
  passed: number;
  reward: number | undefined;
  ctrf: CtrfReport | undefined;
  /** The report as the grader wrote it (the signed one on the harness channel). */
  ctrfText: string | undefined;
  /** Report lines on stdout that did not verify. */
  forgedReports: number;
  failure: EpisodeFailure | undefined;
}

const policy = (code: ErrorCode, message: string): EpisodeFailure => ({ class: "policy", code, message });
const infra = (code: ErrorCode, message: string): EpisodeFailure => ({ class: "infra", code, message });

/** A verifier run that yields no score: nothing read, nothing forged. */
export const NO_SCORE = {
  quality: 0,
  tests: 0,
  passed: 0,
  reward: undefined,
  ctrf: undefined,
  ctrfText: undefined,
  forgedReports: 0,
} as const satisfies Omit<ReportVerdict, "failure">;

function none(failure: EpisodeFailure, extra: Partial<ReportVerdict> = {}): ReportVerdict {
  return { ...NO_SCORE, ...extra, failure };
}

export function judgeReport(f: VerifierFacts): ReportVerdict {
  return f.contract.channel === "harness" ? judgeHarness(f) : judgeFiles(f);
}

function judgeHarness(f: VerifierFacts): ReportVerdict {
  const signed = f.key ? readSignedReports(f.stdout ?? "", f.key) : { valid: [], forged: 0 };
  const seen = { forgedReports: signed.forged };
  if (f.diskExceeded)
    return none(
      policy(
        "verifier_disk_limit",
        `the verifier wrote past its root filesystem's bound (${diskOverText(f.diskExceeded)})`,
      ),
      seen,
    );
  if (f.timedOut) return none(policy("verifier_timeout", `the verifier exceeded ${f.timeoutMs} ms`), seen);
  // test.sh exits with the grader's status: 128+N when a signal killed it (nothing but a process
  // of the deliverable, or the memory limit it ran into, kills a grader).
  if ((f.exitCode ?? 0) >= 128 || (f.oomKilled && signed.valid.length === 0))
    return none(
      policy(
        "verifier_killed",
        `the grader was killed (exit ${f.exitCode}${f.oomKilled ? ", out of memory" : ""}): no score is taken from it`,
      ),
      seen,
    );
  if (signed.valid.length !== 1)
    return none(
      infra(
        "verifier_no_result",
        signed.valid.length === 0
          ? `the grader printed no signed report (exit ${f.exitCode}); a grader that does not use scenarios/_harness must declare [verifier] report = "files"`
          : `the grader printed ${signed.valid.length} signed reports`,
      ),
      seen,
    );
  const text = signed.valid[0]!.toString("utf8");
  const ctrf = parseCtrf(text);
  if (!ctrf.ok)
    return none(infra("verifier_no_result", `the signed report: ${ctrf.error}`), { ...seen, ctrfText: text });
  const r = ctrf.value;
  const got = { ...seen, ctrfText: text, ctrf: r, tests: r.tests, passed: r.passed };
  if (r.tests === 0) return none(infra("verifier_no_result", "the signed report has no tests"), got);
  if (f.contract.tests !== undefined && r.tests !== f.contract.tests)
    return none(
      infra(
        "verifier_bad_report",
        `the signed report has ${r.tests} tests, the scenario declares ${f.contract.tests}`,
      ),
      got,
    );
  const quality = r.passed / r.tests;
  return { ...got, quality, reward: quality, failure: undefined };
}

function judgeFiles(f: VerifierFacts): ReportVerdict {
  const ctrf = f.ctrfText !== undefined ? parseCtrf(f.ctrfText) : undefined;
  const reward = f.rewardText !== undefined ? parseReward(f.rewardText) : undefined;
  const base = {
    reward: reward?.ok ? reward.value : undefined,
    ctrf: ctrf?.ok ? ctrf.value : undefined,
    ctrfText: f.ctrfText,
    forgedReports: 0,
  };
  if (f.diskExceeded)
    return none(
      policy(
        "verifier_disk_limit",
        `the verifier wrote past its root filesystem's bound (${diskOverText(f.diskExceeded)})`,
      ),
      base,
    );
  const score = scoreOf(base.ctrf, base.reward);
  if (!score) {
    const why = [
      ctrf && !ctrf.ok ? ctrf.error : f.ctrfText === undefined ? "no ctrf.json" : "",
      reward && !reward.ok ? reward.error : reward === undefined ? "no reward.txt" : "",
    ]
      .filter(Boolean)
      .join("; ");
    // Graders bound every run of the deliverable: overrunning the verifier deadline is the
    // deliverable's doing (scored 0); a grader that ends without a report is our bug.
    return none(
      f.timedOut
        ? policy("verifier_timeout", `the verifier exceeded ${f.timeoutMs} ms (${why})`)
        : infra("verifier_no_result", `the verifier left no usable result: ${why}`),
      base,
    );
  }
  const declared = f.contract.tests;
  if (declared !== undefined && score.source === "ctrf" && score.tests !== declared)
    // An honest grader reports what it declares; anything else came from somewhere else.
    return none(
      policy("verifier_bad_report", `ctrf.json has ${score.tests} tests, the scenario declares ${declared}`),
      { ...base, tests: score.tests, passed: score.passed },
    );
  return { ...base, quality: score.quality, tests: score.tests, passed: score.passed, failure: undefined };
}
