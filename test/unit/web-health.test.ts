import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openDb } from "../../src/store/index.js";
import {
  CachedProbe,
  databaseProbe,
  decideHealth,
  dockerProbe,
  type ProbeResult,
  readinessReport,
  stillStale,
} from "../../src/web/health.js";

const OK: ProbeResult = { ok: true, checkedAt: 1 };
const NOW = 1_000_000;

describe("decideHealth", () => {
  it("is 200 only when loops tick, the database writes and Docker answers", () => {
    const r = decideHealth({ staleLoops: [], database: OK, docker: OK }, NOW);
    expect(r).toMatchObject({ ok: true, state: "healthy", status: 200, ready: true, reasons: [] });
    expect(r.checks.loops).toEqual({ ok: true, stale: [] });
  });

  it("names each stale loop, with how long it has been silent", () => {
    const r = decideHealth(
      {
        staleLoops: [
          { name: "eval", intervalMs: 10_000, lastTickAt: NOW - 45_000 },
          { name: "weights", intervalMs: 60_000 },
        ],
        database: OK,
        docker: OK,
      },
      NOW,
    );
    expect(r.status).toBe(503);
    expect(r.checks.loops).toEqual({ ok: false, stale: ["eval", "weights"] });
    expect(r.reasons.map((x) => [x.check, x.code])).toEqual([
      ["loops", "loop_stale"],
      ["loops", "loop_stale"],
    ]);
    expect(r.reasons[0]!.message).toBe("loop eval has not ticked for 45s (interval 10s)");
    expect(r.reasons[1]!.message).toContain("has never ticked");
  });

  it("reports a database and a Docker failure together, with their codes and messages", () => {
    const r = decideHealth(
      {
        staleLoops: [],
        database: {
          ok: false,
          code: "db_not_writable",
          error: "attempt to write a readonly database",
          checkedAt: 1,
        },
        docker: { ok: false, error: "Docker at /x.sock: connect ENOENT", checkedAt: 1 },
      },
      NOW,
    );
    expect(r.ok).toBe(false);
    expect(r.status).toBe(503);
    expect(r.reasons).toEqual([
      { check: "database", code: "db_not_writable", message: "attempt to write a readonly database" },
      { check: "docker", code: "docker_unreachable", message: "Docker at /x.sock: connect ENOENT" },
    ]);
  });
});

describe("decideHealth: degraded", () => {
  const chain = { code: "chain_unreachable", message: "chain: connect ECONNREFUSED", since: NOW - 301_000 };
  const platform = { code: "platform_unreachable", message: "winner/current: 502", since: NOW - 10_000 };

  it("is degraded (not ready, still live) once the chain or the platform is unreachable past the threshold", () => {
    const r = decideHealth({ staleLoops: [], database: OK, docker: OK, alarms: [chain, platform] }, NOW);
    expect(r).toMatchObject({ ok: true, state: "degraded", status: 200, ready: false });
    expect(r.checks.upstreams).toEqual({ ok: false, unreachable: ["chain"], degradedAfterMs: 300_000 });
    // The platform alarm is 10 s old: a blip, not yet a reason.
    expect(r.reasons).toEqual([
      {
        check: "chain",
        code: "chain_unreachable",
        message: "chain unreachable for 5m01s (threshold 5m00s): chain: connect ECONNREFUSED",
      },
    ]);
    const later = decideHealth(
      { staleLoops: [], database: OK, docker: OK, alarms: [chain, platform], degradedAfterMs: 5_000 },
      NOW,
    );
    expect(later.checks.upstreams.unreachable).toEqual(["chain", "platform"]);
    expect(later.reasons[0]!.message).toMatch(/^chain unreachable for 5m01s \(threshold 5\.0s\)/);
  });

  it("counts from the first failed request (an outage) when that came before the alarm, or without one", () => {
    const outage = {
      upstream: "chain" as const,
      since: NOW - 301_000,
      message: "disconnected from ws://h:9",
    };
    const lateAlarm = { code: "chain_unreachable", message: "chain: 3 failures", since: NOW - 200_000 };
    const r = decideHealth(
      { staleLoops: [], database: OK, docker: OK, alarms: [lateAlarm], outages: [outage] },
      NOW,
    );
    expect(r.checks.upstreams.unreachable).toEqual(["chain"]);
    expect(r.reasons[0]!.message).toBe("chain unreachable for 5m01s (threshold 5m00s): chain: 3 failures");
    const alone = decideHealth({ staleLoops: [], database: OK, docker: OK, outages: [outage] }, NOW);
    expect(alone.reasons).toEqual([
      {
        check: "chain",
        code: "chain_unreachable",
        message: "chain unreachable for 5m01s (threshold 5m00s): disconnected from ws://h:9",
      },
    ]);
    const young = { ...outage, since: NOW - 10_000 };
    expect(decideHealth({ staleLoops: [], database: OK, docker: OK, outages: [young] }, NOW).state).toBe(
      "healthy",
    );
  });

  it("/readyz's report carries readiness' status: 503 in the body of a 503", () => {
    const degraded = decideHealth({ staleLoops: [], database: OK, docker: OK, alarms: [chain] }, NOW);
    expect(degraded.status).toBe(200); // liveness: /healthz answers 200
    expect(readinessReport(degraded)).toMatchObject({ state: "degraded", status: 503, ready: false });
    const healthy = decideHealth({ staleLoops: [], database: OK, docker: OK }, NOW);
    expect(readinessReport(healthy).status).toBe(200);
  });

  it("other alarms do not degrade; a liveness failure outranks degraded", () => {
    const other = { code: "consensus_divergence", message: "x", since: 0 };
    expect(decideHealth({ staleLoops: [], database: OK, docker: OK, alarms: [other] }, NOW)).toMatchObject({
      state: "healthy",
      ready: true,
    });
    const down: ProbeResult = { ok: false, error: "Docker gone", checkedAt: 1 };
    const r = decideHealth({ staleLoops: [], database: OK, docker: down, alarms: [chain] }, NOW);
    expect(r).toMatchObject({ ok: false, state: "unhealthy", status: 503, ready: false });
    expect(r.reasons.map((x) => x.check)).toEqual(["docker", "chain"]);
  });
});

describe("stillStale", () => {
  it("a loop retrying after a failure may back off for minutes; a silent loop that last succeeded may not", () => {
    const backingOff = {
      name: "winner",
      intervalMs: 10_000,
      lastTickAt: NOW - 200_000,
      lastError: { at: NOW - 200_000 },
    };
    const quiet = {
      name: "eval",
      intervalMs: 10_000,
      lastTickAt: NOW - 200_000,
      lastError: { at: NOW - 900_000 },
    };
    const never = { name: "heartbeat", intervalMs: 10_000 };
    expect(stillStale([backingOff, quiet, never], NOW).map((l) => l.name)).toEqual(["eval", "heartbeat"]);
    // Past the grace even a backing-off loop is reported: no backoff is that long.
    const long = { ...backingOff, lastTickAt: NOW - 16 * 60_000, lastError: { at: NOW - 16 * 60_000 } };
    expect(stillStale([long], NOW)).toEqual([long]);
  });
});

describe("CachedProbe", () => {
  it("answers from the cache within the TTL and shares one in-flight probe", async () => {
    let calls = 0;
    const probe = new CachedProbe(async () => {
      calls++;
      await new Promise((r) => setTimeout(r, 20));
      return { ok: true, checkedAt: calls };
    }, 60_000);
    const [a, b, c] = await Promise.all([probe.get(), probe.get(), probe.get()]);
    expect(calls).toBe(1);
    expect(a).toBe(b);
    expect(b).toBe(c);
    await probe.get();
    expect(calls).toBe(1);
  });

  it("probes again once the TTL has passed, and a failure is cached like a success", async () => {
    let calls = 0;
    const probe = new CachedProbe(async () => ({ ok: ++calls > 1, checkedAt: calls }), 30);
    expect((await probe.get()).ok).toBe(false);
    expect((await probe.get()).ok).toBe(false);
    expect(calls).toBe(1);
    await new Promise((r) => setTimeout(r, 40));
    expect((await probe.get()).ok).toBe(true);
    expect(calls).toBe(2);
  });
});

describe("databaseProbe", () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it("commits a small write on a writable database", async () => {
    const db = openDb(":memory:");
    const r = await databaseProbe(db, () => 42)();
    expect(r).toEqual({ ok: true, checkedAt: 42 });
    const row = db.prepare("SELECT value FROM kv WHERE key = 'web.healthz_probe'").get() as { value: string };
    expect(JSON.parse(row.value)).toBe(42);
    db.close();
  });

  it("fails with db_not_writable on a read-only database", async () => {
    const dir = mkdtempSync(join(tmpdir(), "web-health-"));
    dirs.push(dir);
    const path = join(dir, "v.sqlite");
    openDb(path).close();
    const ro = openDb(path, { readonly: true });
    const r = await databaseProbe(ro)();
    expect(r.ok).toBe(false);
    expect(r.code).toBe("db_not_writable");
    expect(r.error).toMatch(/readonly/i);
    ro.close();
  });
});

describe("dockerProbe", () => {
  const servers: Server[] = [];
  const dirs: string[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it("fails fast when no socket exists", async () => {
    const r = await dockerProbe("/nonexistent/docker.sock", 2000)();
    expect(r.ok).toBe(false);
    expect(r.code).toBe("docker_unreachable");
    expect(r.error).toContain("/nonexistent/docker.sock");
  });

  it("gives up after its deadline when the engine accepts but never answers", async () => {
    const dir = mkdtempSync(join(tmpdir(), "web-docker-"));
    dirs.push(dir);
    const sock = join(dir, "hung.sock");
    const held: import("node:net").Socket[] = [];
    const server = createServer((c) => {
      held.push(c); // accepts, never answers
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(sock, r));
    const t0 = performance.now();
    const r = await dockerProbe(sock, 200)();
    const ms = performance.now() - t0;
    for (const c of held) c.destroy();
    expect(r.ok).toBe(false);
    expect(r.error).toContain("no answer within 200ms");
    expect(ms).toBeLessThan(2000);
  });
});
