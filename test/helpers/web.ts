/**
 * Realistic stored and live state for the status page tests: finished evaluations with verdicts,
 * weight attempts, an outbox, a cached winner; loops, alarms, an epoch and a running evaluation.
 */
import type { Verdict } from "../../src/evaluation/types.js";
import type { LiveStatus } from "../../src/status/index.js";
import {
  type Db,
  EvaluationRepo,
  recordLastNetwork,
  VerdictOutboxRepo,
  WeightsRepo,
  WinnerCacheRepo,
} from "../../src/store/index.js";

/** The network the seeded rows belong to (a genesis hash), as a daemon on it would have written them. */
export const NETWORK = `0x${"5e".repeat(32)}`;

export const HOTKEY = "5F3sa2TJAWMqDhXG6jhV4N8ko9SxwGy8TpaNS1repo5EYjQX";
export const CHALLENGER = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY";
export const WINNER = "5FHneW46xGXgs5mUiveU4sbTyGBzmstUspZC92UhjJM694ty";

const usage = (calls: number, costUsd: number) => ({
  calls,
  costUsd,
  promptTokens: calls * 1200,
  cachedTokens: calls * 300,
  completionTokens: calls * 150,
});

export function verdictOf(
  id: string,
  packHash: string,
  scores: number[],
  byModel: Record<string, number>,
): Verdict {
  const scenarios = scores.map((q, k) => ({
    scenario: `scenario-${k + 1}`,
    quality: q,
    tests: 4,
    passed: Math.round(q * 4),
    status: "scored" as const,
    costUsd: 0.01 * (k + 1),
    byModel: {},
    attempts: 1,
    episodeId: `${id}.scenario-${k + 1}.1`,
    timings: { setupMs: 1000, agentMs: 20_000, verifyMs: 2000, totalMs: 23_000 },
  }));
  const modelUsage = Object.fromEntries(Object.entries(byModel).map(([m, c]) => [m, usage(3, c)]));
  return {
    evaluationId: id,
    packHash,
    spec: 3,
    score: Math.round(scores.reduce((s, q) => s + q, 0) * 1e4) / 1e4,
    qualified: scores.some((q) => q > 0),
    rejected: false,
    scenarios,
    costUsd: Object.values(byModel).reduce((s, c) => s + c, 0),
    byModel: modelUsage,
    provenance: {
      priceTableHash: "ab".repeat(32),
      imageDigests: {},
      validatorVersion: "0.1.0",
      harness: { name: "trajrl-validator-ts", version: "0.1.0" },
      llm: { baseUrl: "http://127.0.0.1:1/v1", simulated: true, defaultModel: "qwen3.8-27b" },
      capUsd: 0.3,
      concurrency: 3,
    },
    startedAt: "2026-01-01T00:00:00.000Z",
    finishedAt: "2026-01-01T00:05:00.000Z",
  };
}

/** Stored state: three finished evaluations (one rejected, one with a hostile label), weights, outbox, winner. */
export function seedStore(db: Db, now: number, opts: { weightsOutcome?: "included" | "failed" } = {}): void {
  recordLastNetwork(db, { network: NETWORK, name: "finney", at: now });
  const evals = new EvaluationRepo(db, NETWORK);
  const rows: {
    id: string;
    hash: string;
    scores: number[];
    byModel: Record<string, number>;
    label: string;
  }[] = [
    {
      id: "ev_a",
      hash: "a1".repeat(32),
      scores: [1, 0.5, 0.75],
      byModel: { "qwen3.8-27b": 0.031, "glm-5.1": 0.012 },
      label: "epoch 40 / 5Grwva…",
    },
    {
      id: "ev_b",
      hash: "b2".repeat(32),
      scores: [1, 1, 0.25],
      byModel: { "qwen3.8-27b": 0.02, "deepseek-v4": 0.044 },
      label: "<script>alert(1)</script>",
    },
  ];
  for (const r of rows) {
    evals.create({
      id: r.id,
      resumeKey: `rk_${r.id}`,
      packHash: r.hash,
      spec: 3,
      scenarios: ["scenario-1", "scenario-2", "scenario-3"],
      source: "epoch",
      epochId: r.id === "ev_a" ? "40" : "41",
      meta: { capUsd: 0.3, concurrency: 3, label: r.label },
    });
    evals.startEpisode({
      id: `${r.id}.scenario-1.1`,
      evaluationId: r.id,
      scenario: "scenario-1",
      attempt: 1,
    });
    evals.finishEpisode(`${r.id}.scenario-1.1`, "final", { quality: r.scores[0]!, costUsd: 0.01 });
    evals.finish(r.id, "scored", null, verdictOf(r.id, r.hash, r.scores, r.byModel));
  }
  evals.create({
    id: "ev_c",
    resumeKey: "rk_ev_c",
    packHash: "c3".repeat(32),
    spec: 3,
    scenarios: ["scenario-1"],
    source: "local",
    meta: { capUsd: 0.3, concurrency: 3 },
  });
  evals.finish("ev_c", "rejected", "missing_skill_md", {
    ...verdictOf("ev_c", "c3".repeat(32), [0], {}),
    score: 0,
    qualified: false,
    rejected: true,
    rejection: { code: "missing_skill_md", message: "the pack has no SKILL.md" },
    scenarios: [],
  });

  const weights = new WeightsRepo(db, NETWORK);
  const id = weights.start({
    netuid: 11,
    mode: "direct",
    reason: "winner",
    uids: [7],
    weights: [65535],
    versionKey: 1,
  });
  if ((opts.weightsOutcome ?? "included") === "included")
    weights.finish(id, { outcome: "included", txHash: `0x${"ef".repeat(32)}`, includedBlock: 5_123_456 });
  else
    weights.finish(id, {
      outcome: "failed",
      errorName: "NotEnoughStakeToSetWeights",
      message: "stake too low",
    });

  const outbox = new VerdictOutboxRepo(db, NETWORK);
  outbox.enqueue({
    epochId: 41,
    validatorHotkey: HOTKEY,
    verdict: { spec_number: 3, challenger: { score: 2.25, qualified: true } },
    nowMs: now - 60_000,
    challengerHotkey: CHALLENGER,
    packHash: "b2".repeat(32),
  });

  new WinnerCacheRepo(db, NETWORK).put(
    {
      winner: {
        hotkey: WINNER,
        uid: 7,
        pack_hash: "a1".repeat(32),
        pack_url: "https://example.invalid/pack.json?X-Amz-Signature=secret",
        score: 2.25,
        since_epoch_id: 38,
        spec_number: 3,
      },
      finalized_epoch: null,
      submissions: [],
    },
    now - 120_000,
  );
}

/** Live state: two loops (one failing), an alarm, an epoch, a running evaluation mid-way, meter calls. */
export function seedLive(live: LiveStatus): void {
  live.registerLoop("eval", 10_000);
  live.registerLoop("weights", 60_000);
  live.tick("eval");
  live.tick("weights", { code: "chain_unreachable", message: "ws closed" });
  live.raise("consensus_divergence", "our score 2.25 vs consensus 1.10 on epoch 41", "warn");
  live.setEpoch({
    epochId: 42,
    challengerHotkey: CHALLENGER,
    packHash: "d4".repeat(32),
    specNumber: 3,
    decision: "evaluate",
    seenAt: Date.now() - 30_000,
  });
  live.startEvaluation({
    evaluationId: "ev_live",
    packHash: "d4".repeat(32),
    label: "epoch 42 / 5Grwva…",
    epochId: 42,
    spec: 3,
    capUsd: 0.3,
    scenarios: ["access-log-regex", "binary-flag-hunt", "eight-puzzle-optimal"],
  });
  const base = { evaluationId: "ev_live", capUsd: 0.3 };
  live.onProgress({
    ...base,
    scenario: "access-log-regex",
    phase: "done",
    attempt: 1,
    spentUsd: 0.041,
    elapsedMs: 61_000,
    quality: 1,
  });
  live.onProgress({
    ...base,
    scenario: "binary-flag-hunt",
    phase: "running",
    attempt: 1,
    spentUsd: 0.27,
    elapsedMs: 35_000,
  });
  live.onProgress({
    ...base,
    scenario: "eight-puzzle-optimal",
    phase: "queued",
    attempt: 0,
    spentUsd: 0,
    elapsedMs: 0,
  });
  for (const [model, usd, extra] of [
    ["qwen3.8-27b", 0.004, {}],
    ["qwen3.8-27b", 0.006, { clamped: true }],
    ["glm-5.1", 0, { status: 402, refused: "cap" as const }],
    ["not-a-model", 0, { status: 400, refused: "allowlist" as const }],
  ] as const)
    live.meterCall({
      episodeId: "ev_live.binary-flag-hunt.1",
      model,
      status: 200,
      usd,
      clamped: false,
      promptTokens: 1000,
      completionTokens: 100,
      ...extra,
    });
  live.episodeEnd({ scenario: "access-log-regex", outcome: "scored" });
  live.episodeEnd({ scenario: "x", outcome: "retry", failureClass: "upstream", failureCode: "upstream_5xx" });
  live.weights({ at: Date.now(), outcome: "included", uids: [7], weights: [65535], reason: "winner" });
  live.weights({ at: Date.now(), outcome: "failed", uids: [7], weights: [65535], reason: "winner" });
}

// ---------------------------------------------------------------------------------------------
// A strict reader of the Prometheus text exposition format 0.0.4
// ---------------------------------------------------------------------------------------------

export interface PromFamily {
  name: string;
  type: "counter" | "gauge" | "histogram" | "summary" | "untyped";
  help: string | undefined;
  samples: { name: string; labels: Record<string, string>; value: number }[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** As Go's strconv.ParseFloat reads it (the format's definition): NaN and Inf in any letter case. */
function parseValue(s: string, line: number): number {
  if (/^nan$/i.test(s)) return Number.NaN;
  if (/^\+?inf(inity)?$/i.test(s)) return Number.POSITIVE_INFINITY;
  if (/^-inf(inity)?$/i.test(s)) return Number.NEGATIVE_INFINITY;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(s))
    throw new Error(`line ${line}: bad value ${JSON.stringify(s)}`);
  return Number(s);
}

/** The family a sample belongs to: histogram/summary samples carry suffixes. */
function familyOf(sample: string, families: Map<string, PromFamily>): PromFamily | undefined {
  if (families.has(sample)) return families.get(sample);
  for (const suffix of ["_bucket", "_sum", "_count"]) {
    if (!sample.endsWith(suffix)) continue;
    const f = families.get(sample.slice(0, -suffix.length));
    if (f && (f.type === "histogram" || (f.type === "summary" && suffix !== "_bucket"))) return f;
  }
  return undefined;
}

/**
 * Parses the whole text or throws naming the line: names and label names by the grammar, label
 * values with only the three escapes, every sample typed by a preceding TYPE line of its family,
 * one TYPE per family, no duplicate series, histogram buckets with `le`, the text ends with "\n".
 */
export function parsePromText(text: string): Map<string, PromFamily> {
  if (!text.endsWith("\n")) throw new Error("exposition does not end with a newline");
  const families = new Map<string, PromFamily>();
  const series = new Set<string>();
  const typed = new Set<string>();
  const lines = text.split("\n");
  lines.pop();
  lines.forEach((raw, k) => {
    const n = k + 1;
    if (raw === "") return;
    if (raw.startsWith("#")) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(raw);
      if (!m) return; // other comments are allowed
      const [, kind, name, rest] = m as unknown as [string, string, string, string];
      if (!METRIC_NAME.test(name)) throw new Error(`line ${n}: bad metric name ${name}`);
      const f = families.get(name) ?? { name, type: "untyped" as const, help: undefined, samples: [] };
      if (kind === "TYPE") {
        if (!["counter", "gauge", "histogram", "summary", "untyped"].includes(rest))
          throw new Error(`line ${n}: bad type ${rest}`);
        if (families.get(name)?.samples.length) throw new Error(`line ${n}: TYPE after samples of ${name}`);
        if (typed.has(name)) throw new Error(`line ${n}: second TYPE for ${name}`);
        f.type = rest as PromFamily["type"];
        typed.add(name);
      } else {
        if (f.help !== undefined) throw new Error(`line ${n}: second HELP for ${name}`);
        f.help = rest;
      }
      families.set(name, f);
      return;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)( -?\d+)?$/.exec(raw);
    if (!m) throw new Error(`line ${n}: not a sample: ${raw}`);
    const [, name, , body, value] = m as unknown as [
      string,
      string,
      string | undefined,
      string | undefined,
      string,
    ];
    const labels: Record<string, string> = {};
    if (body !== undefined && body !== "") {
      let rest = body;
      while (rest.length) {
        const lm = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/.exec(rest);
        if (!lm) throw new Error(`line ${n}: bad labels {${body}}`);
        const [all, lname, lval] = lm as unknown as [string, string, string];
        if (!LABEL_NAME.test(lname) || lname.startsWith("__"))
          throw new Error(`line ${n}: bad label name ${lname}`);
        if (lname in labels) throw new Error(`line ${n}: duplicate label ${lname}`);
        labels[lname] = lval.replace(/\\(["\\n])/g, (_, c: string) => (c === "n" ? "\n" : c));
        rest = rest.slice(all.length);
      }
    }
    const fam = familyOf(name, families);
    if (!fam || !typed.has(fam.name)) throw new Error(`line ${n}: sample ${name} without a TYPE line`);
    if (fam.type === "histogram" && name.endsWith("_bucket") && !("le" in labels))
      throw new Error(`line ${n}: bucket without le`);
    const key = `${name}{${Object.entries(labels)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([a, b]) => `${a}=${JSON.stringify(b)}`)
      .join(",")}}`;
    if (series.has(key)) throw new Error(`line ${n}: duplicate series ${key}`);
    series.add(key);
    fam.samples.push({ name, labels, value: parseValue(value, n) });
  });
  return families;
}

/** The value of one series, or undefined. */
export function promValue(
  families: Map<string, PromFamily>,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  for (const f of families.values())
    for (const s of f.samples)
      if (
        s.name === name &&
        Object.entries(labels).every(([k, v]) => s.labels[k] === v) &&
        Object.keys(s.labels).length === Object.keys(labels).length
      )
        return s.value;
  return undefined;
}
