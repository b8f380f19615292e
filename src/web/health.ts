/**
 * Liveness for /healthz and the container HEALTHCHECK: the loops tick, the database takes a write,
 * and the Docker engine answers. The decision is a pure function of three probe results; the probes
 * are thin and cached so a scrape storm cannot hammer SQLite or the engine.
 */
import Docker from "dockerode";
import type { Db } from "../store/index.js";
import { KvRepo } from "../store/index.js";

export interface ProbeResult {
  ok: boolean;
  /** Stable code of the failure (db_not_writable, docker_unreachable, …). */
  code?: string;
  error?: string;
  /** Unix ms of the probe that produced this result (cached results keep their time). */
  checkedAt: number;
}

export interface StaleLoop {
  name: string;
  intervalMs: number;
  lastTickAt?: number | undefined;
}

export interface HealthReason {
  check: "loops" | "database" | "docker";
  code: string;
  message: string;
}

export interface HealthReport {
  ok: boolean;
  status: 200 | 503;
  checks: {
    loops: { ok: boolean; stale: string[] };
    database: ProbeResult;
    docker: ProbeResult;
  };
  reasons: HealthReason[];
}

/** The /healthz decision: healthy only when every check passes; each failure becomes one reason. */
export function decideHealth(
  input: { staleLoops: readonly StaleLoop[]; database: ProbeResult; docker: ProbeResult },
  now: number,
): HealthReport {
  const reasons: HealthReason[] = [];
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
  return {
    ok,
    status: ok ? 200 : 503,
    checks: {
      loops: { ok: input.staleLoops.length === 0, stale: input.staleLoops.map((l) => l.name) },
      database: input.database,
      docker: input.docker,
    },
    reasons,
  };
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
