/**
 * A small evaluation's evidence made in memory (two graded episodes and one not graded), and the
 * tools to open an archive, change one file in it and pack it again: what the evidence tests tamper
 * with. The grading records and reports are what the episode writes (src/episode grading-record.ts).
 */
import { gunzipSync, gzipSync } from "node:zlib";
import { hotkeyFromKeyfile } from "../../src/chain/index.js";
import {
  type CollectedEpisode,
  type CollectedEvidence,
  type EvidenceSigner,
  hotkeySigner,
  readTar,
} from "../../src/evidence/index.js";
import { sha256Hex } from "../../src/hash.js";
import { packTar } from "../../src/sandbox/index.js";
import { runCli } from "./cli.js";

export async function testSigner(seedByte = 7): Promise<EvidenceSigner> {
  const seed = `0x${Buffer.alloc(32, seedByte).toString("hex")}`;
  return hotkeySigner(await hotkeyFromKeyfile(JSON.stringify({ secretSeed: seed })), "hotkey");
}

export function ctrfOf(passed: number, tests: number): string {
  const entries = Array.from({ length: tests }, (_, i) => ({
    name: `t${i}`,
    status: i < passed ? "passed" : "failed",
  }));
  return JSON.stringify({ results: { summary: { tests, passed }, tests: entries } });
}

function receipt(episode: string, seq: number, pico: bigint) {
  return {
    episode_id: episode,
    seq,
    started_at: "2026-12-01T00:00:00.000Z",
    model: "glm-5.3-flash",
    status: 200,
    upstream_status: 200,
    stream: false,
    prompt_tokens: 1000 + seq,
    cached_tokens: 0,
    completion_tokens: 50,
    usd_pico: pico.toString(),
    reserved_pico: "900000000",
    max_tokens: 8192,
    clamped: false,
    retries: 0,
    ttfb_ms: 12.5,
    duration_ms: 40.25,
    request_id: `rid-${episode}-${seq}`,
    content_sha: "ab".repeat(8),
    tool_sha: null,
    tool_calls: 1,
    finish_reason: "tool_calls",
    truncated: false,
    usage_estimated: false,
    error_code: null,
  };
}

function graded(
  scenario: string,
  passed: number,
  tests: number,
  deliverable: Buffer,
  picos: bigint[],
): CollectedEpisode {
  const episodeId = `ev_test.${scenario}.1`;
  const quality = passed / tests;
  const receipts = picos.map((p, i) => receipt(episodeId, i + 1, p));
  return {
    scenario,
    episodeId,
    attempts: 1,
    status: "scored",
    failure: null,
    quality,
    costUsd: Number(picos.reduce((a, b) => a + b, 0n)) / 1e12,
    grading: {
      schema: 1,
      graded: true,
      grader: "harness",
      image: { ref: `trajrl/scenario-${scenario}:abc`, id: `sha256:${"1".repeat(64)}`, repo_digest: null },
      tests: { kind: "scenario", digest: sha256Hex(scenario) },
      agent_output_path: "/app/out.sh",
      timeout_ms: 60_000,
      declared_tests: tests,
      network: "none",
      deliverable: { kind: "file", bytes: deliverable.length, sha256: sha256Hex(deliverable) },
      report: { reward_text: null },
      grade: { quality, tests, passed, reward: quality, failure: null },
    },
    files: {
      deliverable,
      "ctrf.json": Buffer.from(ctrfOf(passed, tests)),
      "turns.jsonl": Buffer.from(`{"type":"turn","scenario":"${scenario}"}\n`),
      "transcript.txt": Buffer.from(`transcript of ${scenario}\n`),
    },
    receipts,
    dropped: 0,
  };
}

/** pin over three scenarios: 0.5 + 1.0 + a missing deliverable (0, not graded). */
export function sampleEvidence(): CollectedEvidence {
  const a = graded("binary-flag-hunt", 3, 6, Buffer.from("#!/bin/sh\necho flag\n"), [559_000_000n, 1_000n]);
  const b = graded("access-log-regex", 7, 7, Buffer.from("#!/bin/sh\ngrep -E x\n"), [798_000_000n]);
  const c: CollectedEpisode = {
    ...graded("git-lost-commit-recovery", 0, 6, Buffer.alloc(0), [510_000_000n]),
    quality: 0,
    failure: { class: "policy", code: "agent_output_missing" },
    files: { "turns.jsonl": Buffer.from("{}\n") },
  };
  c.grading = {
    ...c.grading!,
    graded: false,
    grade: null,
    deliverable: { kind: "missing", bytes: null, sha256: null },
  };
  const episodes = [a, b, c];
  const round4 = (x: number) => Math.round(x * 1e4) / 1e4;
  const usd6 = (x: number) => Math.round(x * 1e6) / 1e6;
  const scenario_results = Object.fromEntries(
    episodes.map((e) => [
      e.scenario,
      { score: round4(e.quality), weight: 1, qualified: e.quality > 0, judge: { cost_usd: usd6(e.costUsd) } },
    ]),
  );
  return {
    evaluation: {
      id: "ev_test",
      source: "local",
      epoch_id: null,
      label: "pin",
      started_at: "2026-12-01T00:00:00.000Z",
      finished_at: "2026-12-01T00:05:00.000Z",
    },
    packHash: "45b497743c194718c9e8673c5202561430c0f2ddbe81ed0ffde94220872e5403",
    spec: 0,
    suite: "quick",
    bench: { source: "builtin", harnessImageHash: "x" },
    priceTableHash: "6e".repeat(32),
    payload: {
      spec_number: 0,
      challenger: { score: 1.5, qualified: true, scenario_results },
      llm_model: "policy:auto",
    },
    episodes,
  };
}

/** Every file of a .tar.gz, by name. */
export async function unpack(gz: Buffer): Promise<Map<string, Buffer>> {
  return readTar(gunzipSync(gz));
}

/** The same archive with `edit` applied to its files. */
export async function repack(gz: Buffer, edit: (files: Map<string, Buffer>) => void): Promise<Buffer> {
  const files = await unpack(gz);
  edit(files);
  return gzipSync(await packTar([...files].map(([name, data]) => ({ name, data }))));
}

/** `trajrl-validator verify ARGS…` as a process (real Docker for the re-grades). */
export async function runVerifyCli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const { code, stdout, stderr } = await runCli(["verify", ...args], { env });
  return { code, stdout, stderr };
}
