/**
 * The grader's report → a score, or none (src/episode/report.ts): on the harness channel only a
 * report signed with the grading's key counts, and a killed grader, a missing or doubled report or
 * a wrong test count is never a score; on upstream's files channel the old rules hold, plus a
 * declared count. The Python side signs exactly as this side verifies (harness.py, run here).
 */
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  judgeReport,
  newReportKey,
  REPORT_PREFIX,
  readSignedReports,
  signReport,
  type VerifierFacts,
} from "../../src/episode/report.js";

const HARNESS_DIR = join(import.meta.dirname, "../../scenarios/_harness");

const ctrf = (passed: number, tests: number) =>
  JSON.stringify({
    results: {
      tool: { name: "g" },
      summary: { tests, passed, failed: tests - passed },
      tests: Array.from({ length: tests }, (_, i) => ({
        name: `t${i}`,
        status: i < passed ? "passed" : "failed",
        duration: 1,
      })),
    },
  });

const line = (key: Buffer, text: string) => {
  const data = Buffer.from(text);
  return `${REPORT_PREFIX}${signReport(key, data)} ${data.toString("base64")}`;
};

const harness = (over: Partial<VerifierFacts> = {}): VerifierFacts => ({
  contract: { channel: "harness", tests: 6 },
  timeoutMs: 1000,
  timedOut: false,
  exitCode: 0,
  oomKilled: false,
  stdout: "",
  ...over,
});

describe("signed reports", () => {
  it("verifies what the key signed and counts every other report line as forged", () => {
    const key = newReportKey();
    const other = newReportKey();
    const stdout = [
      "PASSED  t0",
      line(other, ctrf(6, 6)),
      `${REPORT_PREFIX}${"0".repeat(64)} e30=`,
      `${REPORT_PREFIX}not-hex e30=`,
      line(key, ctrf(1, 6)),
      "6/6 passed",
    ].join("\n");
    const r = readSignedReports(stdout, key);
    expect(r.valid.map((b) => b.toString())).toEqual([ctrf(1, 6)]);
    expect(r.forged).toBe(3);
  });

  it("a report changed in any byte, or signed with any other key, does not verify", () => {
    const key = newReportKey();
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 200 }),
        fc.nat(),
        fc.integer({ min: 1, max: 255 }),
        (text, at, flip) => {
          const data = Buffer.from(text);
          const mac = signReport(key, data);
          const bent = Buffer.from(data);
          bent[at % bent.length]! ^= flip;
          const stdout = [
            `${REPORT_PREFIX}${mac} ${bent.toString("base64")}`,
            `${REPORT_PREFIX}${signReport(newReportKey(), data)} ${data.toString("base64")}`,
          ].join("\n");
          const r = readSignedReports(stdout, key);
          return r.valid.length === 0 && r.forged === 2;
        },
      ),
      { numRuns: 300 },
    );
  });

  it("harness.py signs exactly what this side verifies", () => {
    const key = newReportKey();
    const data = ctrf(4, 6);
    const py = [
      "import sys, harness",
      "harness._key = bytes.fromhex(sys.argv[1])",
      "harness._emit(sys.argv[2].encode())",
    ].join("\n");
    const stdout = execFileSync("python3", ["-B", "-c", py, key.toString("hex"), data], {
      cwd: HARNESS_DIR,
      encoding: "utf8",
    });
    expect(readSignedReports(stdout, key)).toEqual({ valid: [Buffer.from(data)], forged: 0 });
  });
});

describe("the harness channel", () => {
  const key = newReportKey();

  it("takes passed/tests from the one signed report, whatever the files or other lines say", () => {
    const v = judgeReport(
      harness({ key, stdout: `${line(newReportKey(), ctrf(6, 6))}\n${line(key, ctrf(2, 6))}\n` }),
    );
    expect(v).toMatchObject({ quality: 2 / 6, tests: 6, passed: 2, forgedReports: 1, failure: undefined });
    expect(v.ctrfText).toBe(ctrf(2, 6));
  });

  it("a grader killed by a signal is not a score, even after a signed report", () => {
    for (const exitCode of [137, 143, 130])
      expect(judgeReport(harness({ key, exitCode, stdout: line(key, ctrf(6, 6)) }))).toMatchObject({
        quality: 0,
        failure: { class: "policy", code: "verifier_killed" },
      });
    expect(judgeReport(harness({ key, oomKilled: true }))).toMatchObject({
      failure: { code: "verifier_killed" },
    });
    // The deliverable was OOM-killed, the grader finished: the report stands.
    expect(judgeReport(harness({ key, oomKilled: true, stdout: line(key, ctrf(3, 6)) }))).toMatchObject({
      quality: 0.5,
      failure: undefined,
    });
  });

  it("no signed report, two of them, a report that is no CTRF or has no tests: infra, quality 0", () => {
    for (const stdout of [
      "",
      line(newReportKey(), ctrf(6, 6)),
      `${line(key, ctrf(1, 6))}\n${line(key, ctrf(1, 6))}`,
      line(key, "{"),
      line(key, ctrf(0, 0)),
    ])
      expect(judgeReport(harness({ key, stdout }))).toMatchObject({
        quality: 0,
        failure: { class: "infra", code: "verifier_no_result" },
      });
  });

  it("a test count other than the declared one is not a score", () => {
    expect(judgeReport(harness({ key, stdout: line(key, ctrf(5, 5)) }))).toMatchObject({
      quality: 0,
      tests: 5,
      failure: { class: "infra", code: "verifier_bad_report" },
    });
    // Nothing declared: the report's own count.
    expect(
      judgeReport(harness({ key, contract: { channel: "harness" }, stdout: line(key, ctrf(5, 5)) })),
    ).toMatchObject({ quality: 1, failure: undefined });
  });

  it("a deadline or the disk limit ends it as the deliverable's fault, before anything is read", () => {
    expect(judgeReport(harness({ key, timedOut: true, stdout: line(key, ctrf(6, 6)) }))).toMatchObject({
      quality: 0,
      failure: { class: "policy", code: "verifier_timeout" },
    });
    expect(
      judgeReport(
        harness({
          key,
          diskExceeded: { bytes: 9, limitBytes: 8, limitInodes: 5 },
          stdout: line(key, ctrf(6, 6)),
        }),
      ),
    ).toMatchObject({ quality: 0, failure: { class: "policy", code: "verifier_disk_limit" } });
    expect(
      judgeReport(
        harness({
          key,
          diskExceeded: { bytes: 0, inodes: 6, limitBytes: 8, limitInodes: 5 },
          stdout: line(key, ctrf(6, 6)),
        }),
      ).failure?.message,
    ).toContain("more than 5 files and directories");
  });
});

describe("the files channel (upstream's contract)", () => {
  const files = (over: Partial<VerifierFacts> = {}): VerifierFacts => ({
    contract: { channel: "files" },
    timeoutMs: 1000,
    timedOut: false,
    exitCode: 0,
    oomKilled: false,
    ...over,
  });

  it("scores ctrf.json, else reward.txt, as before; signed lines mean nothing there", () => {
    expect(judgeReport(files({ ctrfText: ctrf(3, 4), rewardText: "0" }))).toMatchObject({
      quality: 0.75,
      failure: undefined,
    });
    expect(judgeReport(files({ rewardText: "1" }))).toMatchObject({ quality: 1, failure: undefined });
    // A grader killed or timed out with a report in place keeps it, as upstream does.
    expect(judgeReport(files({ exitCode: 137, timedOut: true, ctrfText: ctrf(1, 4) }))).toMatchObject({
      quality: 0.25,
      failure: undefined,
    });
    expect(judgeReport(files({ timedOut: true }))).toMatchObject({ failure: { code: "verifier_timeout" } });
    expect(judgeReport(files())).toMatchObject({ failure: { class: "infra", code: "verifier_no_result" } });
  });

  it("a declared count that the report does not have is the deliverable's doing: quality 0", () => {
    expect(
      judgeReport(files({ contract: { channel: "files", tests: 4 }, ctrfText: ctrf(6, 6) })),
    ).toMatchObject({ quality: 0, failure: { class: "policy", code: "verifier_bad_report" } });
    expect(
      judgeReport(files({ contract: { channel: "files", tests: 4 }, ctrfText: ctrf(2, 4) })),
    ).toMatchObject({ quality: 0.5, failure: undefined });
  });
});
