import { type Db, durably } from "./db.js";
import type { NetworkId } from "./networks.js";

export type EvaluationStatus = "running" | "scored" | "rejected" | "discarded" | "aborted";
export type EpisodeRowStatus = "running" | "final" | "retry" | "unresolved" | "interrupted" | "aborted";

export interface EvaluationRow {
  id: string;
  resumeKey: string;
  packHash: string;
  spec: number;
  scenarios: string[];
  source: "local" | "epoch";
  epochId: string | null;
  status: EvaluationStatus;
  reason: string | null;
  verdict: unknown | null;
  meta: Record<string, unknown>;
  createdAt: string;
  finishedAt: string | null;
}

export interface EpisodeRow {
  id: string;
  evaluationId: string;
  scenario: string;
  attempt: number;
  status: EpisodeRowStatus;
  outcome: unknown | null;
  startedAt: string;
  finishedAt: string | null;
}

interface RawEvaluation {
  id: string;
  resume_key: string;
  pack_hash: string;
  spec: number;
  scenarios: string;
  source: "local" | "epoch";
  epoch_id: string | null;
  status: EvaluationStatus;
  reason: string | null;
  verdict: string | null;
  meta: string;
  created_at: string;
  finished_at: string | null;
}

interface RawEpisode {
  id: string;
  evaluation_id: string;
  scenario: string;
  attempt: number;
  status: EpisodeRowStatus;
  outcome: string | null;
  started_at: string;
  finished_at: string | null;
}

const evaluationOf = (r: RawEvaluation): EvaluationRow => ({
  id: r.id,
  resumeKey: r.resume_key,
  packHash: r.pack_hash,
  spec: r.spec,
  scenarios: JSON.parse(r.scenarios) as string[],
  source: r.source,
  epochId: r.epoch_id,
  status: r.status,
  reason: r.reason,
  verdict: r.verdict === null ? null : JSON.parse(r.verdict),
  meta: JSON.parse(r.meta) as Record<string, unknown>,
  createdAt: r.created_at,
  finishedAt: r.finished_at,
});

const episodeOf = (r: RawEpisode): EpisodeRow => ({
  id: r.id,
  evaluationId: r.evaluation_id,
  scenario: r.scenario,
  attempt: r.attempt,
  status: r.status,
  outcome: r.outcome === null ? null : JSON.parse(r.outcome),
  startedAt: r.started_at,
  finishedAt: r.finished_at,
});

const NOW = "strftime('%Y-%m-%dT%H:%M:%fZ','now')";
/**
 * The rows a repository opened for a network sees: its own epochs' evaluations and `eval`'s, which
 * belong to no network. One opened without a network (`eval`, tests) sees every row.
 */
const VISIBLE = "(@network IS NULL OR source = 'local' OR network = @network)";

/**
 * Evaluations and their episodes. Opened for a network (the daemon), it stamps that network on the
 * epochs' evaluations it creates and reads no other network's (migration 008).
 */
export class EvaluationRepo {
  private readonly s;
  private readonly scope: { network: NetworkId | null };

  constructor(
    private readonly db: Db,
    network?: NetworkId,
  ) {
    this.scope = { network: network ?? null };
    this.s = {
      insert: db.prepare(
        `INSERT INTO evaluations (id, resume_key, pack_hash, spec, scenarios, source, epoch_id, status, meta, network)
         VALUES (@id, @resumeKey, @packHash, @spec, @scenarios, @source, @epochId, 'running', @meta, @network)`,
      ),
      get: db.prepare<[string], RawEvaluation>("SELECT * FROM evaluations WHERE id = ?"),
      resumable: db.prepare<[{ resumeKey: string; network: string | null }], RawEvaluation>(
        `SELECT * FROM evaluations WHERE resume_key = @resumeKey AND status = 'running' AND ${VISIBLE}
         ORDER BY created_at DESC LIMIT 1`,
      ),
      running: db.prepare<[{ network: string | null }], RawEvaluation>(
        `SELECT * FROM evaluations WHERE status = 'running' AND ${VISIBLE} ORDER BY created_at`,
      ),
      recent: db.prepare<[{ network: string | null; limit: number }], RawEvaluation>(
        `SELECT * FROM evaluations WHERE ${VISIBLE} ORDER BY created_at DESC, rowid DESC LIMIT @limit`,
      ),
      finish: db.prepare(
        `UPDATE evaluations SET status = @status, reason = @reason, verdict = @verdict, finished_at = ${NOW}
         WHERE id = @id AND status = 'running'`,
      ),
      episodes: db.prepare<[string], RawEpisode>(
        "SELECT * FROM episodes WHERE evaluation_id = ? ORDER BY scenario, attempt",
      ),
      startEpisode: db.prepare(
        `INSERT INTO episodes (id, evaluation_id, scenario, attempt, status) VALUES (@id, @evaluationId, @scenario, @attempt, 'running')
         ON CONFLICT(evaluation_id, scenario, attempt) DO UPDATE SET id = excluded.id, status = 'running', outcome = NULL,
           started_at = ${NOW}, finished_at = NULL`,
      ),
      finishEpisode: db.prepare(
        `UPDATE episodes SET status = @status, outcome = @outcome, quality = @quality, failure_class = @failureClass,
           failure_code = @failureCode, cost_usd = @costUsd, finished_at = ${NOW} WHERE id = @id`,
      ),
      interrupt: db.prepare(
        "UPDATE episodes SET status = 'interrupted' WHERE evaluation_id = ? AND status = 'running'",
      ),
      durations: db.prepare<[string, number], { ms: number | null }>(
        `SELECT json_extract(outcome, '$.timings.totalMs') AS ms FROM episodes
         WHERE scenario = ? AND status = 'final' AND failure_class IS NULL
         ORDER BY finished_at DESC, rowid DESC LIMIT ?`,
      ),
    };
  }

  create(row: {
    id: string;
    resumeKey: string;
    packHash: string;
    spec: number;
    scenarios: string[];
    source: "local" | "epoch";
    epochId?: string | null;
    meta: Record<string, unknown>;
  }): EvaluationRow {
    this.s.insert.run({
      ...row,
      scenarios: JSON.stringify(row.scenarios),
      epochId: row.epochId ?? null,
      meta: JSON.stringify(row.meta),
      network: row.source === "epoch" ? this.scope.network : null,
    });
    return this.get(row.id)!;
  }

  get(id: string): EvaluationRow | undefined {
    const r = this.s.get.get(id);
    return r ? evaluationOf(r) : undefined;
  }

  findResumable(resumeKey: string): EvaluationRow | undefined {
    const r = this.s.resumable.get({ resumeKey, network: this.scope.network });
    return r ? evaluationOf(r) : undefined;
  }

  running(): EvaluationRow[] {
    return this.s.running.all(this.scope).map(evaluationOf);
  }

  recent(limit = 20): EvaluationRow[] {
    return this.s.recent.all({ ...this.scope, limit }).map(evaluationOf);
  }

  /** Ends an evaluation exactly once; false when it had already left 'running'. */
  finish(
    id: string,
    status: Exclude<EvaluationStatus, "running">,
    reason: string | null,
    verdict: unknown,
  ): boolean {
    // A finished evaluation's verdict is a vote ("never run twice"): committed to survive an OS crash.
    const run = () =>
      this.s.finish.run({ id, status, reason, verdict: verdict === null ? null : JSON.stringify(verdict) });
    return (verdict === null ? run() : durably(this.db, run)).changes === 1;
  }

  episodes(evaluationId: string): EpisodeRow[] {
    return this.s.episodes.all(evaluationId).map(episodeOf);
  }

  startEpisode(e: { id: string; evaluationId: string; scenario: string; attempt: number }): void {
    this.s.startEpisode.run(e);
  }

  finishEpisode(
    id: string,
    status: Exclude<EpisodeRowStatus, "running">,
    outcome: {
      quality?: number;
      failure?: { class: string; code: string };
      costUsd?: number;
    } | null,
  ): void {
    this.s.finishEpisode.run({
      id,
      status,
      outcome: outcome === null ? null : JSON.stringify(outcome),
      quality: outcome?.quality ?? null,
      failureClass: outcome?.failure?.class ?? null,
      failureCode: outcome?.failure?.code ?? null,
      costUsd: outcome?.costUsd ?? null,
    });
  }

  /** On restart: episodes left 'running' by a dead process are re-run. */
  interruptRunning(evaluationId: string): number {
    return this.s.interrupt.run(evaluationId).changes;
  }

  /** Wall times (ms) of each scenario's most recent clean finished episodes, newest first. */
  recentDurations(scenarios: readonly string[], perScenario = 20): Map<string, number[]> {
    const out = new Map<string, number[]>();
    for (const s of scenarios) {
      const ms = this.s.durations
        .all(s, perScenario)
        .map((r) => Number(r.ms))
        .filter((x) => Number.isFinite(x) && x >= 0);
      if (ms.length) out.set(s, ms);
    }
    return out;
  }

  transaction<T>(fn: () => T): T {
    return this.db.transaction(fn)();
  }
}
