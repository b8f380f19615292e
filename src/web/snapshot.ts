/**
 * The status snapshot: one JSON document with everything the status page, `status` and /metrics show.
 * Read from the live in-memory state (when this is the daemon) and from SQLite (always). Rows coming
 * out of the database carry `unknown` JSON (verdicts, outcomes); they are parsed here with zod, once,
 * leniently: a row this version cannot read is shown as "unreadable", never crashes the page.
 */
import { z } from "zod";
import type { Config } from "../config.js";
import { safeUrl } from "../log.js";
import type {
  Alarm,
  EngineView,
  EpochView,
  EvaluationView,
  ImageProgressView,
  LiveStatus,
  LoopState,
  ScenarioProgressView,
  WeightsEvent,
} from "../status/index.js";
import type { Db, EvaluationRow, NetworkId, WeightAttempt } from "../store/index.js";
import {
  EvaluationRepo,
  EvidenceIndex,
  NO_NETWORK,
  VerdictOutboxRepo,
  WeightsRepo,
  WinnerCacheRepo,
} from "../store/index.js";
import { UPSTREAM_RELEASE } from "../subnet.js";
import { VERSION } from "../version.js";
import { type HealthReport, stillStale } from "./health.js";
import type { TallySnapshot } from "./tally.js";

export interface LoopView extends LoopState {
  stale: boolean;
}

export interface AlarmView extends Alarm {
  /** live: raised by a loop of the daemon; derived: concluded here from stored state. */
  source: "live" | "derived";
}

/**
 * One scenario's row: its latest progress event (src/status), without the agent-ending flag. Its
 * phase and failure are plain text: the page also renders a snapshot read back as JSON (`status`),
 * whose phase may be one this version does not know.
 */
export type ScenarioProgress = { scenario: string } & Omit<
  ScenarioProgressView,
  "timedOut" | "phase" | "failure"
> & {
    phase: string;
    failure?: Record<keyof NonNullable<ScenarioProgressView["failure"]>, string>;
  };

export interface RunningEvaluation {
  evaluationId: string;
  label: string;
  packHash: string;
  epochId: number | null;
  spec: number;
  /** The built-in suite's set (then `spec` is 0); null on the subnet's benchmark. */
  suite: string | null;
  startedAt: number;
  capUsd: number;
  spentUsd: number;
  scenarios: ScenarioProgress[];
}

export interface VerdictSummary {
  evaluationId: string;
  status: string;
  reason: string | null;
  source: "local" | "epoch";
  epochId: string | null;
  packHash: string;
  spec: number;
  /** The built-in suite's set the verdict was scored on (then `spec` is 0); null on the subnet's benchmark. */
  suite: string | null;
  label: string | null;
  score: number | null;
  qualified: boolean | null;
  rejected: boolean | null;
  rejection: { code: string; message: string } | null;
  /** The session's cost: the pack over the whole spec or suite. */
  costUsd: number | null;
  /** The mean cost of one episode (one scenario run) of the session. */
  costPerEpisodeUsd: number | null;
  /** USD by model, from verdict.byModel. */
  costByModel: Record<string, number>;
  scenarios: { scenario: string; quality: number; status: string; costUsd: number }[];
  createdAt: string;
  finishedAt: string | null;
  /** The verdict's evidence archive (src/evidence; `trajrl-validator verify PATH`), when written. */
  evidence: { id: string; path: string; bytes: number } | null;
}

export interface WinnerView {
  hotkey: string | null;
  uid: number | null;
  packHash: string | null;
  score: number | null;
  sinceEpochId: number | null;
  specNumber: number | null;
  finalizedEpochId: number | null;
  finalizedOutcome: string | null;
  fetchedAt: number;
  ageMs: number;
  fresh: boolean;
}

export interface WeightAttemptView {
  id: number;
  at: string;
  mode: string;
  reason: string | null;
  uids: number[];
  weights: number[];
  outcome: string;
  errorName: string | null;
  message: string | null;
  txHash: string | null;
  includedBlock: number | null;
  finishedAt: string | null;
}

export interface OutboxView {
  epochId: number;
  state: string;
  outcome: string | null;
  attempts: number;
  score: number;
  qualified: boolean;
  lastStatus: number | null;
  lastError: string | null;
  createdAt: number;
  deliveredAt: number | null;
}

export interface StatusSnapshot {
  schema: 1;
  /** This build (package.json). */
  version: string;
  /** The upstream release it sends as `version` (subnet.ts UPSTREAM_RELEASE); absent from older daemons. */
  votesAs?: string;
  /** daemon: served by the running validator; database: read from the SQLite file (no live data). */
  source: "daemon" | "database";
  now: number;
  startedAt: number | null;
  node: { network: string; netuid: number; simulated: boolean; llmBaseUrl: string; concurrency: number };
  health: HealthReport | null;
  loops: LoopView[];
  alarms: AlarmView[];
  epoch: EpochView | null;
  evaluation: RunningEvaluation | null;
  /** Images being built or pulled for the evaluation starting or running (the bench's progress). */
  images: ImageProgressView[];
  /** The engines episodes run on (the pool): state, slots, running episodes, failures, image cache. */
  engines: EngineView[];
  verdicts: VerdictSummary[];
  winner: WinnerView | null;
  weights: { last: WeightAttemptView | null; recent: WeightAttemptView[]; live: WeightsEvent | null };
  outbox: { counts: Record<string, number>; recent: OutboxView[] };
  /** Since this process started (empty when read from the database). */
  counters: TallySnapshot;
}

// ---------------------------------------------------------------------------------------------
// Pure shaping
// ---------------------------------------------------------------------------------------------

const num = z.number().finite();
const storedVerdict = z.object({
  score: num.optional(),
  qualified: z.boolean().optional(),
  rejected: z.boolean().optional(),
  rejection: z.object({ code: z.string(), message: z.string() }).optional(),
  costUsd: num.optional(),
  provenance: z
    .object({ suite: z.string().optional().catch(undefined) })
    .passthrough()
    .optional()
    .catch(undefined),
  byModel: z.record(z.string(), z.object({ costUsd: num }).passthrough()).optional(),
  scenarios: z
    .array(
      z
        .object({
          scenario: z.string(),
          quality: num.catch(0),
          status: z.string().catch("unknown"),
          costUsd: num.catch(0),
        })
        .passthrough(),
    )
    .optional(),
});

export function summarizeEvaluation(row: EvaluationRow): VerdictSummary {
  const parsed = row.verdict === null ? undefined : storedVerdict.safeParse(row.verdict);
  const v = parsed?.success ? parsed.data : undefined;
  const label = typeof row.meta.label === "string" ? row.meta.label : null;
  const costByModel: Record<string, number> = {};
  for (const [model, u] of Object.entries(v?.byModel ?? {})) costByModel[model] = u.costUsd;
  return {
    evaluationId: row.id,
    status: parsed && !parsed.success ? `${row.status} (unreadable verdict)` : row.status,
    reason: row.reason,
    source: row.source,
    epochId: row.epochId,
    packHash: row.packHash,
    spec: row.spec,
    suite: v?.provenance?.suite ?? null,
    label,
    score: v?.score ?? null,
    qualified: v?.qualified ?? null,
    rejected: v?.rejected ?? null,
    rejection: v?.rejection ?? null,
    costUsd: v?.costUsd ?? null,
    costPerEpisodeUsd: v?.costUsd === undefined ? null : v.costUsd / Math.max(1, v.scenarios?.length ?? 0),
    costByModel,
    scenarios: (v?.scenarios ?? []).map((s) => ({
      scenario: s.scenario,
      quality: s.quality,
      status: s.status,
      costUsd: s.costUsd,
    })),
    createdAt: row.createdAt,
    finishedAt: row.finishedAt,
    evidence: null,
  };
}

const ACTIVE_PHASES = new Set(["starting", "running", "verifying", "retrying"]);

/**
 * The running evaluation as shown. An event carries the elapsed time at the moment it was sent; a
 * scenario that is still active has been running since, so `seenAt` (when its last event arrived)
 * lets the elapsed time keep counting between events.
 */
export function runningEvaluation(
  v: EvaluationView | null,
  now: number = Date.now(),
  seenAt?: (scenario: string) => number | undefined,
): RunningEvaluation | null {
  if (!v) return null;
  const scenarios: ScenarioProgress[] = Object.entries(v.scenarios).map(([scenario, p]) => ({
    scenario,
    phase: p.phase,
    attempt: p.attempt,
    spentUsd: p.spentUsd,
    capUsd: p.capUsd,
    elapsedMs:
      p.elapsedMs + (ACTIVE_PHASES.has(p.phase) ? Math.max(0, now - (seenAt?.(scenario) ?? now)) : 0),
    ...(p.quality === undefined ? {} : { quality: p.quality }),
    ...(p.failure === undefined ? {} : { failure: p.failure }),
  }));
  return {
    evaluationId: v.evaluationId,
    label: v.label,
    packHash: v.packHash,
    epochId: v.epochId,
    spec: v.spec,
    suite: v.suite ?? null,
    startedAt: v.startedAt,
    capUsd: v.capUsd,
    spentUsd: scenarios.reduce((s, x) => s + x.spentUsd, 0),
    scenarios,
  };
}

export function weightAttemptView(a: WeightAttempt): WeightAttemptView {
  return {
    id: a.id,
    at: a.at,
    mode: a.mode,
    reason: a.reason,
    uids: a.uids,
    weights: a.weights,
    outcome: a.outcome,
    errorName: a.errorName,
    message: a.message,
    txHash: a.txHash,
    includedBlock: a.includedBlock,
    finishedAt: a.finishedAt,
  };
}

const FAILED_WEIGHTS = new Set(["failed", "rejected", "timeout"]);

/**
 * Alarms concluded from state rather than raised by a loop: stale loops, a stale winner cache (weights
 * then go to the burn uid), and a latest set_weights attempt that failed. A live alarm with the same
 * code wins (its producer knows more).
 */
export function deriveAlarms(args: {
  live: readonly Alarm[];
  staleLoops: readonly LoopState[];
  winner: WinnerView | null;
  lastWeights: WeightAttemptView | null;
  now: number;
}): AlarmView[] {
  const out: AlarmView[] = args.live.map((a) => ({ ...a, source: "live" }));
  const have = new Set(out.map((a) => a.code));
  const add = (a: Omit<AlarmView, "source" | "count" | "lastSeen"> & { lastSeen?: number }) => {
    if (have.has(a.code)) return;
    have.add(a.code);
    out.push({ ...a, lastSeen: a.lastSeen ?? args.now, count: 1, source: "derived" });
  };
  for (const l of args.staleLoops) {
    const since = l.lastTickAt ?? args.now;
    add({
      code: `loop_stale:${l.name}`,
      severity: "error",
      message:
        l.lastTickAt === undefined
          ? `loop ${l.name} has never ticked`
          : `loop ${l.name} has not ticked for ${Math.round((args.now - l.lastTickAt) / 1000)}s (interval ${Math.round(l.intervalMs / 1000)}s)`,
      since,
    });
  }
  if (args.winner && !args.winner.fresh) {
    add({
      code: "winner_cache_stale",
      severity: "warn",
      message: `the cached winner is ${Math.round(args.winner.ageMs / 3_600_000)}h old: weights go to the burn uid until the platform answers`,
      since: args.winner.fetchedAt,
    });
  }
  const w = args.lastWeights;
  if (w && FAILED_WEIGHTS.has(w.outcome)) {
    const at = Date.parse(w.finishedAt ?? w.at);
    add({
      code: "set_weights_failed",
      severity: "error",
      message: `the last set_weights attempt ${w.outcome}${w.errorName ? ` (${w.errorName})` : ""}${w.message ? `: ${w.message}` : ""}`,
      since: Number.isFinite(at) ? at : args.now,
    });
  }
  const rank = (a: AlarmView) => (a.severity === "error" ? 0 : 1);
  return out.sort((a, b) => rank(a) - rank(b) || a.since - b.since);
}

// ---------------------------------------------------------------------------------------------
// Collection (reads the live state and the database)
// ---------------------------------------------------------------------------------------------

export interface SnapshotSources {
  db: Db;
  config: Config;
  /** null when read from the database only (`status` without a daemon). */
  live: LiveStatus | null;
  counters?: TallySnapshot;
  health?: HealthReport | null;
  /** When the last progress event of a scenario of the running evaluation arrived (unix ms). */
  progressSeenAt?: (scenario: string) => number | undefined;
  now?: number;
  verdictLimit?: number;
}

const EMPTY_COUNTERS: TallySnapshot = { meter: {}, episodes: [], weights: { attempts: 0, results: {} } };

/**
 * Repositories over one connection, prepared once and reused by every request: the rows of one
 * network (its genesis hash; null when it is not known yet: then no network's rows are shown).
 */
export class StatusReader {
  private readonly evaluations: EvaluationRepo;
  private readonly weights: WeightsRepo;
  private readonly outbox: VerdictOutboxRepo;
  private readonly winnerCache: WinnerCacheRepo;
  private readonly evidence: EvidenceIndex;

  constructor(db: Db, network: NetworkId | null) {
    const scope = network ?? NO_NETWORK;
    this.evidence = new EvidenceIndex(db);
    this.evaluations = new EvaluationRepo(db, scope);
    this.weights = new WeightsRepo(db, scope);
    this.outbox = new VerdictOutboxRepo(db, scope);
    this.winnerCache = new WinnerCacheRepo(db, scope);
  }

  recentEvaluations(limit: number): VerdictSummary[] {
    return this.evaluations.recent(limit).map((row) => this.summarize(row));
  }

  /** A verdict with its evidence listing (EvidenceIndex). */
  private summarize(row: EvaluationRow): VerdictSummary {
    const e = this.evidence.get(row.id);
    return { ...summarizeEvaluation(row), evidence: e ? { id: e.id, path: e.path, bytes: e.bytes } : null };
  }

  evaluation(id: string): { summary: VerdictSummary; verdict: unknown; episodes: unknown[] } | undefined {
    const row = this.evaluations.get(id);
    if (!row) return undefined;
    return {
      summary: this.summarize(row),
      verdict: row.verdict,
      episodes: this.evaluations.episodes(id),
    };
  }

  winner(now: number, ttlMs: number): WinnerView | null {
    const c = this.winnerCache.read(now, ttlMs);
    if (!c) return null;
    // Only the fields an operator needs: pack_url is left out (it can be a pre-signed URL).
    const w = c.winner.winner;
    const f = c.winner.finalized_epoch;
    return {
      hotkey: w?.hotkey ?? null,
      uid: w?.uid ?? null,
      packHash: w?.pack_hash ?? null,
      score: w?.score ?? null,
      sinceEpochId: w?.since_epoch_id ?? null,
      specNumber: w?.spec_number ?? null,
      finalizedEpochId: f?.challenge_epoch_id ?? null,
      finalizedOutcome: f?.outcome ?? null,
      fetchedAt: c.fetchedAt,
      ageMs: c.ageMs,
      fresh: c.fresh,
    };
  }

  weightAttempts(netuid: number, limit: number): WeightAttemptView[] {
    return this.weights.recent(netuid, limit).map(weightAttemptView);
  }

  outboxState(limit: number): StatusSnapshot["outbox"] {
    return {
      counts: this.outbox.counts(),
      recent: this.outbox.recent(limit).map((e) => ({
        epochId: e.epochId,
        state: e.state,
        outcome: e.outcome,
        attempts: e.attempts,
        score: e.verdict.challenger.score,
        qualified: e.verdict.challenger.qualified,
        lastStatus: e.lastStatus,
        lastError: e.lastError,
        createdAt: e.createdAt,
        deliveredAt: e.deliveredAt,
      })),
    };
  }

  snapshot(src: Omit<SnapshotSources, "db">): StatusSnapshot {
    const now = src.now ?? Date.now();
    const { config, live } = src;
    const liveSnap = live?.snapshot();
    const staleNames = new Set(stillStale(live?.staleLoops() ?? [], liveSnap?.now ?? now).map((l) => l.name));
    const loops: LoopView[] = (liveSnap?.loops ?? []).map((l) => ({ ...l, stale: staleNames.has(l.name) }));
    const winner = this.winner(now, config.platform.winnerCacheTtlMs);
    const recentWeights = this.weightAttempts(config.chain.netuid, 5);
    const lastWeights = recentWeights[0] ?? null;
    return {
      schema: 1,
      version: VERSION,
      votesAs: UPSTREAM_RELEASE,
      source: live ? "daemon" : "database",
      now,
      startedAt: liveSnap?.startedAt ?? null,
      node: {
        network: config.chain.network,
        netuid: config.chain.netuid,
        simulated: config.llm.simulated,
        llmBaseUrl: safeUrl(config.llm.baseUrl),
        concurrency: config.evaluation.concurrency,
      },
      health: src.health ?? null,
      loops,
      alarms: deriveAlarms({
        live: liveSnap?.alarms ?? [],
        staleLoops: loops.filter((l) => l.stale),
        winner,
        lastWeights,
        now,
      }),
      epoch: liveSnap?.epoch ?? null,
      evaluation: runningEvaluation(liveSnap?.evaluation ?? null, now, src.progressSeenAt),
      images: liveSnap?.images ?? [],
      engines: liveSnap?.engines ?? [],
      verdicts: this.recentEvaluations(src.verdictLimit ?? 12),
      winner,
      weights: { last: lastWeights, recent: recentWeights, live: liveSnap?.lastWeights ?? null },
      outbox: this.outboxState(5),
      counters: src.counters ?? EMPTY_COUNTERS,
    };
  }
}
