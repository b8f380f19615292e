/**
 * Health for /healthz, /readyz, the container HEALTHCHECK and the `status` header.
 * - unhealthy (liveness, /healthz 503): the daemon holds its start (a refusal it waits to see fixed), a
 *   loop stopped ticking, the database takes no write, or the Docker engine does not answer — the
 *   process itself is in trouble.
 * - degraded (readiness, /readyz 503; /healthz stays 200): the process works but cannot do its job,
 *   because the chain or the platform has been unreachable for longer than DEGRADED_AFTER_S, counted
 *   from the first failed request of any loop (LiveStatus outages; the `chain_unreachable` /
 *   `platform_unreachable` alarms, raised after a few failures, carry the same start).
 * - healthy: neither.
 * The decision is a pure function of the probe results and the alarms; the probes are thin and
 * cached so a scrape storm cannot hammer SQLite or the engine.
 */
import Docker from "dockerode";
import type { Db } from "../store/index.js";
import { KvRepo } from "../store/index.js";
import { duration } from "./format.js";

export interface ProbeResult {
  ok: boolean;
  /** Stable code of the failure (db_not_writable, docker_unreachable, …). */
  code?: string;
  error?: string;
  /** Unix ms of the probe that produced this result (cached results keep their time). */
  checkedAt: number;
  /** Why nothing was probed (ok without asking), e.g. Docker in weight-only mode. */
  skipped?: string;
}

export interface StaleLoop {
  name: string;
  intervalMs: number;
  lastTickAt?: number | undefined;
  /** The last failed tick; when it is the last tick, the loop is retrying with a backoff. */
  lastError?: { at: number } | undefined;
}

/**
 * How long a loop whose last tick failed may stay silent: its retries back off to minutes (5 min for
 * the daemon's loops, 10 min for weights) while the chain or the platform is down, and that is the
 * upstream's trouble, reported as degraded — not a dead loop.
 */
export const BACKOFF_GRACE_MS = 15 * 60_000;

/** Pure: the loops LiveStatus found silent, less those that are backing off after a failure within the grace. */
export function stillStale<T extends StaleLoop>(loops: readonly T[], now: number): T[] {
  return loops.filter((l) => {
    const backingOff =
      l.lastError !== undefined && l.lastTickAt !== undefined && l.lastError.at === l.lastTickAt;
    return !backingOff || now - (l.lastTickAt ?? 0) > BACKOFF_GRACE_MS;
  });
}

export interface HealthReason {
  check: "start" | "loops" | "database" | "docker" | "chain" | "platform";
  code: string;
  message: string;
}

export type HealthState = "healthy" | "degraded" | "unhealthy";

export interface HealthReport {
  /** Liveness: loops, database and Docker pass (degraded is still ok). */
  ok: boolean;
  state: HealthState;
  /** The HTTP status the report is served with: /healthz 200 while ok (readinessReport: 200 while ready). */
  status: 200 | 503;
  /** /readyz: only a healthy validator is ready. */
  ready: boolean;
  checks: {
    loops: { ok: boolean; stale: string[] };
    database: ProbeResult;
    docker: ProbeResult;
    /** Upstreams unreachable past the threshold (chain, platform). */
    upstreams: { ok: boolean; unreachable: string[]; degradedAfterMs: number };
  };
  /** Every failure and every degradation, one reason each. */
  reasons: HealthReason[];
}

/** An alarm as the health decision reads it (src/status/live.ts Alarm). */
export interface UpstreamAlarm {
  code: string;
  message: string;
  since: number;
}

/** The alarms that degrade health once they have been up long enough, and the upstream each names. */
export const DEGRADING_ALARMS: Readonly<Record<string, "chain" | "platform">> = {
  chain_unreachable: "chain",
  platform_unreachable: "platform",
};

export const DEFAULT_DEGRADED_AFTER_MS = 300_000;

/** An upstream's outage as the health decision reads it (src/status/live.ts Outage). */
export interface UpstreamOutage {
  upstream: "chain" | "platform";
  since: number;
  message: string;
}

/**
 * Each upstream's trouble from its earliest sign: its outage (the first failed request of any loop)
 * or its alarm, whichever began first; the alarm's message when there is one.
 */
function upstreamTrouble(
  alarms: readonly UpstreamAlarm[],
  outages: readonly UpstreamOutage[],
): Array<{ upstream: "chain" | "platform"; code: string; since: number; message: string }> {
  const byUpstream = new Map<"chain" | "platform", { code: string; since: number; message: string }>();
  for (const o of outages)
    byUpstream.set(o.upstream, { code: `${o.upstream}_unreachable`, since: o.since, message: o.message });
  for (const a of alarms) {
    const upstream = DEGRADING_ALARMS[a.code];
    if (upstream === undefined) continue;
    const o = byUpstream.get(upstream);
    byUpstream.set(upstream, {
      code: a.code,
      since: Math.min(a.since, o?.since ?? a.since),
      message: a.message,
    });
  }
  return (["chain", "platform"] as const).flatMap((u) => {
    const t = byUpstream.get(u);
    return t ? [{ upstream: u, ...t }] : [];
  });
}

/** The alarm of a daemon that holds its start (src/daemon hold.ts): unhealthy at once, and the first reason. */
export const START_HELD_ALARM = "start_held";

/** The health decision: every failure and every degradation becomes one reason. */
export function decideHealth(
  input: {
    staleLoops: readonly StaleLoop[];
    database: ProbeResult;
    docker: ProbeResult;
    /** Live alarms; those in DEGRADING_ALARMS count once up for `degradedAfterMs`. */
    alarms?: readonly UpstreamAlarm[];
    /** Upstream outages (from the first failed request); count like their alarms, from their start. */
    outages?: readonly UpstreamOutage[];
    degradedAfterMs?: number;
  },
  now: number,
): HealthReport {
  const reasons: HealthReason[] = (input.alarms ?? [])
    .filter((a) => a.code === START_HELD_ALARM)
    .map((a) => ({ check: "start", code: a.code, message: a.message }));
  for (const l of input.staleLoops) {
    const silent =
      l.lastTickAt === undefined
        ? "has never ticked"
        : `has not ticked for ${Math.round((now - l.lastTickAt) / 1000)}s`;
    reasons.push({
      check: "loops",
      code: "loop_stale",
      message: `loop ${l.name} ${silent} (interval ${Math.round(l.intervalMs / 1000)}s)`,
    });
  }
  if (!input.database.ok)
    reasons.push({
      check: "database",
      code: input.database.code ?? "db_not_writable",
      message: input.database.error ?? "the database does not take writes",
    });
  if (!input.docker.ok)
    reasons.push({
      check: "docker",
      code: input.docker.code ?? "docker_unreachable",
      message: input.docker.error ?? "the Docker engine does not answer",
    });
  const ok = reasons.length === 0;
  const after = input.degradedAfterMs ?? DEFAULT_DEGRADED_AFTER_MS;
  const unreachable: string[] = [];
  for (const a of upstreamTrouble(input.alarms ?? [], input.outages ?? [])) {
    if (now - a.since < after) continue;
    unreachable.push(a.upstream);
    reasons.push({
      check: a.upstream,
      code: a.code,
      message: `${a.upstream} unreachable for ${duration(now - a.since)} (threshold ${duration(after)}): ${a.message}`,
    });
  }
  const state: HealthState = !ok ? "unhealthy" : unreachable.length ? "degraded" : "healthy";
  return {
    ok,
    state,
    status: ok ? 200 : 503,
    ready: state === "healthy",
    checks: {
      loops: { ok: input.staleLoops.length === 0, stale: input.staleLoops.map((l) => l.name) },
      database: input.database,
      docker: input.docker,
      upstreams: { ok: unreachable.length === 0, unreachable, degradedAfterMs: after },
    },
    reasons,
  };
}

/** The report as /readyz serves it: its `status` is readiness' HTTP status (200 only while healthy). */
export function readinessReport(r: HealthReport): HealthReport {
  return { ...r, status: r.ready ? 200 : 503 };
}

/** Remembers a probe's last result for `ttlMs` and shares one in-flight probe among concurrent callers. */
export class CachedProbe {
  private last: ProbeResult | undefined;
  private lastAt = Number.NEGATIVE_INFINITY;
  private inflight: Promise<ProbeResult> | undefined;

  constructor(
    private readonly probe: () => Promise<ProbeResult>,
    private readonly ttlMs: number,
  ) {}

  async get(): Promise<ProbeResult> {
    // Monotonic: a wall-clock jump must not pin a stale result forever (or defeat the cache).
    if (this.last && performance.now() - this.lastAt < this.ttlMs) return this.last;
    if (!this.inflight) {
      this.inflight = this.probe()
        .then((r) => {
          this.last = r;
          this.lastAt = performance.now();
          return r;
        })
        .finally(() => {
          this.inflight = undefined;
        });
    }
    return this.inflight;
  }
}

const HEALTH_KEY = "web.healthz_probe";

/** A real write, committed: a read-only file, a full disk or a lock held elsewhere all show up here. */
export function databaseProbe(db: Db, now: () => number = Date.now): () => Promise<ProbeResult> {
  let kv: KvRepo | undefined;
  return async () => {
    const checkedAt = now();
    try {
      kv ??= new KvRepo(db);
      const repo = kv;
      db.transaction(() => repo.set(HEALTH_KEY, checkedAt))();
      return { ok: true, checkedAt };
    } catch (err) {
      return { ok: false, code: "db_not_writable", error: (err as Error).message, checkedAt };
    }
  };
}

/** Weight-only mode (EVAL_ENABLED off) runs no episodes: Docker is not part of its health. */
export function dockerNotUsed(now: () => number = Date.now): () => Promise<ProbeResult> {
  return async () => ({
    ok: true,
    checkedAt: now(),
    skipped: "weight-only mode (EVAL_ENABLED off): Docker is not used",
  });
}

/** The engine's /_ping with a deadline (a hung socket must not hang /healthz). */
export function dockerProbe(
  socketPath: string,
  timeoutMs = 3000,
  now: () => number = Date.now,
): () => Promise<ProbeResult> {
  const docker = new Docker({ socketPath });
  return async () => {
    const checkedAt = now();
    try {
      // @types/dockerode omits ping's options; dockerode passes abortSignal through to the request.
      const ping = docker.ping as unknown as (o: { abortSignal: AbortSignal }) => Promise<unknown>;
      await ping.call(docker, { abortSignal: AbortSignal.timeout(timeoutMs) });
      return { ok: true, checkedAt };
    } catch (err) {
      const e = err as Error & { code?: string };
      const why =
        e.name === "AbortError" || e.name === "TimeoutError" ? `no answer within ${timeoutMs}ms` : e.message;
      return { ok: false, code: "docker_unreachable", error: `Docker at ${socketPath}: ${why}`, checkedAt };
    }
  };
}
