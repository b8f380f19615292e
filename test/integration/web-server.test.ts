/**
 * The status server on loopback with real parts: a real socket, the real SQLite store, a real
 * LiveStatus, and the real Docker engine for /healthz.
 */
import { get, request } from "node:http";
import { createServer } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { loadConfig } from "../../src/config.js";
import { ValidatorError } from "../../src/errors.js";
import { silentLogger } from "../../src/log.js";
import { LiveStatus } from "../../src/status/index.js";
import { type Db, openDb } from "../../src/store/index.js";
import { UPSTREAM_RELEASE } from "../../src/subnet.js";
import { type StatusServer, startStatusServer } from "../../src/web/index.js";
import { requireDocker } from "../helpers/docker.js";
import { NETWORK, parsePromText, promValue, seedLive, seedStore } from "../helpers/web.js";

const config = loadConfig({ STATUS_PORT: "0", STATUS_HOST: "127.0.0.1" });

interface HealthBody {
  state: string;
  ready: boolean;
  reasons: { check: string; code: string; message: string }[];
  checks: { loops: { stale: string[] }; upstreams: { unreachable: string[] } };
}

/** The /api/status document, as a client would check it. */
const statusShape = z
  .object({
    schema: z.literal(1),
    version: z.string(),
    votesAs: z.literal(UPSTREAM_RELEASE),
    source: z.literal("daemon"),
    now: z.number(),
    startedAt: z.number(),
    node: z.object({
      network: z.string(),
      netuid: z.number(),
      simulated: z.boolean(),
      llmBaseUrl: z.string(),
      concurrency: z.number(),
    }),
    health: z.object({
      ok: z.boolean(),
      status: z.number(),
      reasons: z.array(z.object({ check: z.string(), code: z.string(), message: z.string() })),
    }),
    loops: z.array(
      z.object({
        name: z.string(),
        intervalMs: z.number(),
        ticks: z.number(),
        failures: z.number(),
        stale: z.boolean(),
      }),
    ),
    alarms: z.array(
      z.object({
        code: z.string(),
        message: z.string(),
        severity: z.enum(["warn", "error"]),
        source: z.enum(["live", "derived"]),
      }),
    ),
    epoch: z.object({ epochId: z.number(), challengerHotkey: z.string(), packHash: z.string() }).nullable(),
    evaluation: z
      .object({
        evaluationId: z.string(),
        label: z.string(),
        spentUsd: z.number(),
        scenarios: z.array(
          z.object({
            scenario: z.string(),
            phase: z.string(),
            attempt: z.number(),
            spentUsd: z.number(),
            capUsd: z.number(),
            elapsedMs: z.number(),
          }),
        ),
      })
      .nullable(),
    images: z.array(
      z.object({
        image: z.string(),
        ref: z.string(),
        phase: z.enum(["pulling", "building", "ready", "cached", "fallback"]),
        at: z.number(),
      }),
    ),
    engines: z.array(
      z
        .object({
          name: z.string(),
          url: z.string(),
          primary: z.boolean(),
          state: z.enum(["starting", "ready", "down"]),
          draining: z.boolean(),
          slots: z.number().nullable(),
          running: z.number(),
          episodes: z.object({ scored: z.number(), failed: z.number() }),
          failures: z.record(z.string(), z.number()),
          images: z.object({
            present: z.number(),
            wanted: z.number(),
            copies: z.number(),
            copiedBytes: z.number(),
            pulls: z.number(),
          }),
          version: z.string().nullable(),
          lastError: z.object({ code: z.string(), message: z.string(), at: z.number() }).nullable(),
          since: z.number(),
        })
        .strict(),
    ),
    verdicts: z.array(
      z.object({
        evaluationId: z.string(),
        status: z.string(),
        score: z.number().nullable(),
        costUsd: z.number().nullable(),
        costByModel: z.record(z.string(), z.number()),
      }),
    ),
    winner: z
      .object({
        hotkey: z.string().nullable(),
        uid: z.number().nullable(),
        ageMs: z.number(),
        fresh: z.boolean(),
      })
      .passthrough()
      .nullable(),
    weights: z
      .object({
        last: z
          .object({ outcome: z.string(), uids: z.array(z.number()) })
          .passthrough()
          .nullable(),
      })
      .passthrough(),
    outbox: z.object({ counts: z.record(z.string(), z.number()), recent: z.array(z.unknown()) }),
    counters: z
      .object({ meter: z.record(z.string(), z.object({ calls: z.number(), usd: z.number() }).passthrough()) })
      .passthrough(),
  })
  .strict();

async function fetchText(
  url: string,
  init?: RequestInit,
): Promise<{ status: number; headers: Headers; body: string }> {
  const res = await fetch(url, init);
  return { status: res.status, headers: res.headers, body: await res.text() };
}

/** Reads SSE frames from a raw HTTP response until `until` matches one. */
function openEvents(url: string): {
  frames: { event: string; data: string }[];
  next: (
    pred: (f: { event: string; data: string }) => boolean,
    ms?: number,
  ) => Promise<{ event: string; data: string }>;
  raw: () => string;
  close: () => void;
  ended: Promise<void>;
} {
  const frames: { event: string; data: string }[] = [];
  let buf = "";
  let all = "";
  const waiters: {
    pred: (f: { event: string; data: string }) => boolean;
    resolve: (f: { event: string; data: string }) => void;
  }[] = [];
  let endResolve: () => void = () => {};
  const ended = new Promise<void>((r) => {
    endResolve = r;
  });
  const req = get(url, (res) => {
    res.setEncoding("utf8");
    res.on("data", (chunk: string) => {
      buf += chunk;
      all += chunk;
      let k = buf.indexOf("\n\n");
      while (k >= 0) {
        const block = buf.slice(0, k);
        buf = buf.slice(k + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (event && data !== undefined) {
          const f = { event, data };
          frames.push(f);
          for (const w of [...waiters])
            if (w.pred(f)) {
              waiters.splice(waiters.indexOf(w), 1);
              w.resolve(f);
            }
        }
        k = buf.indexOf("\n\n");
      }
    });
    res.on("end", () => endResolve());
    res.on("close", () => endResolve());
  });
  req.on("error", () => endResolve());
  return {
    frames,
    raw: () => all,
    close: () => req.destroy(),
    ended,
    next: (pred, ms = 5000) =>
      new Promise((resolve, reject) => {
        const hit = frames.find(pred);
        if (hit) return resolve(hit);
        const timer = setTimeout(
          () =>
            reject(
              new Error(`no matching event within ${ms}ms; got ${frames.map((f) => f.event).join(",")}`),
            ),
          ms,
        );
        waiters.push({
          pred,
          resolve: (f) => {
            clearTimeout(timer);
            resolve(f);
          },
        });
      }),
  };
}

describe("status server on loopback", () => {
  let db: Db;
  let live: LiveStatus;
  let server: StatusServer;

  beforeAll(async () => {
    await requireDocker();
    db = openDb(":memory:");
    seedStore(db, Date.now());
    live = new LiveStatus();
    server = await startStatusServer({
      live,
      network: NETWORK,
      db,
      config,
      log: silentLogger,
      heartbeatMs: 200,
    });
    seedLive(live); // after start: the server counts what it sees
  });
  afterAll(async () => {
    await server?.close();
    db?.close();
  });

  it("listens on loopback on the ephemeral port it reports", () => {
    expect(server.url).toBe(`http://127.0.0.1:${server.port}`);
    expect(server.port).toBeGreaterThan(0);
  });

  it("/metrics parses as Prometheus text and carries the live counters", async () => {
    const r = await fetchText(`${server.url}/metrics`);
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    const f = parsePromText(r.body);
    expect(f.get("process_resident_memory_bytes")?.type).toBe("gauge");
    expect(promValue(f, "trajrl_meter_calls_total", { model: "qwen3.8-27b" })).toBe(2);
    expect(promValue(f, "trajrl_episodes_total", { outcome: "retry", failure_class: "upstream" })).toBe(1);
    expect(promValue(f, "trajrl_set_weights_results_total", { outcome: "failed" })).toBe(1);
    expect(promValue(f, "trajrl_current_epoch_id")).toBe(42);
    expect(promValue(f, "trajrl_health_check_ok", { check: "docker" })).toBe(1);

    live.meterCall({
      episodeId: "e",
      model: "qwen3.8-27b",
      status: 200,
      usd: 0.5,
      clamped: false,
      promptTokens: 1,
      completionTokens: 1,
    });
    const again = parsePromText((await fetchText(`${server.url}/metrics`)).body);
    expect(promValue(again, "trajrl_meter_calls_total", { model: "qwen3.8-27b" })).toBe(3);
    expect(promValue(again, "trajrl_meter_spend_usd_total", { model: "qwen3.8-27b" })).toBeCloseTo(0.51, 12);
  });

  it("/api/status has the documented shape, and no secret", async () => {
    const r = await fetchText(`${server.url}/api/status`);
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toBe("application/json; charset=utf-8");
    const s = statusShape.parse(JSON.parse(r.body));
    expect(s.evaluation?.scenarios.map((x) => x.scenario)).toEqual([
      "access-log-regex",
      "binary-flag-hunt",
      "eight-puzzle-optimal",
    ]);
    expect(s.verdicts.map((v) => v.evaluationId)).toEqual(["ev_c", "ev_b", "ev_a"]);
    expect(s.health.ok).toBe(true);
    expect(r.body).not.toContain("X-Amz-Signature");
    expect(r.body).not.toContain("pack_url");
  });

  it("/api/evaluations lists with a bounded limit; /api/evaluations/:id has the verdict and the episodes", async () => {
    const one = JSON.parse((await fetchText(`${server.url}/api/evaluations?limit=1`)).body);
    expect(one.evaluations.map((e: { evaluationId: string }) => e.evaluationId)).toEqual(["ev_c"]);
    const bad = JSON.parse((await fetchText(`${server.url}/api/evaluations?limit=-4`)).body);
    expect(bad.evaluations).toHaveLength(3); // an unusable limit falls back to the default

    const ev = JSON.parse((await fetchText(`${server.url}/api/evaluations/ev_a`)).body);
    expect(ev.summary.score).toBe(2.25);
    expect(ev.verdict.scenarios).toHaveLength(3);
    expect(ev.episodes).toEqual([expect.objectContaining({ id: "ev_a.scenario-1.1", status: "final" })]);

    const missing = await fetchText(`${server.url}/api/evaluations/ev_nope`);
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.body).error.code).toBe("evaluation_not_found");
    const hostile = await fetchText(
      `${server.url}/api/evaluations/${encodeURIComponent("../../etc/passwd")}`,
    );
    expect(hostile.status).toBe(400);
  });

  it("serves the page with a strict CSP, its static files, and the live fragment", async () => {
    const page = await fetchText(`${server.url}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-security-policy")).toContain("script-src 'self'");
    expect(page.headers.get("x-content-type-options")).toBe("nosniff");
    expect(page.body).toContain('data-scenario="binary-flag-hunt"');
    expect(page.body).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    const js = await fetchText(`${server.url}/static/app.js`);
    expect(js.status).toBe(200);
    expect(js.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(js.body).toContain("EventSource");
    for (const sheet of ["style.css", "components.css"]) {
      expect(page.body).toContain(`<link rel="stylesheet" href="/static/${sheet}">`);
      const css = await fetchText(`${server.url}/static/${sheet}`);
      expect(css.status).toBe(200);
      expect(css.headers.get("content-type")).toBe("text/css; charset=utf-8");
    }
    const frag = JSON.parse((await fetchText(`${server.url}/fragment`)).body);
    expect(frag.main).toContain('id="progress"');
    expect(frag.header).toContain('id="health"');
  });

  it("answers unknown routes and methods with JSON errors", async () => {
    const nf = await fetchText(`${server.url}/nope`);
    expect(nf.status).toBe(404);
    expect(JSON.parse(nf.body).error.code).toBe("not_found");
    const post = await fetchText(`${server.url}/api/status`, { method: "POST", body: "{}" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD");
    const head = await fetch(`${server.url}/healthz`, { method: "HEAD" });
    expect(head.status).toBe(200);
  });

  it("streams progress over server-sent events as it happens", async () => {
    const es = openEvents(`${server.url}/api/events`);
    try {
      await es.next((f) => f.event === "hello");
      live.onProgress({
        evaluationId: "ev_live",
        scenario: "eight-puzzle-optimal",
        phase: "running",
        attempt: 1,
        spentUsd: 0.02,
        capUsd: 0.3,
        elapsedMs: 1500,
      });
      const p = await es.next((f) => f.event === "progress");
      expect(JSON.parse(p.data)).toMatchObject({
        scenario: "eight-puzzle-optimal",
        phase: "running",
        spentUsd: 0.02,
      });
      live.raise("stale_winner_cache", "the cached winner is 30h old", "warn");
      const a = await es.next((f) => f.event === "alarm");
      expect(JSON.parse(a.data)).toMatchObject({ code: "stale_winner_cache" });
      live.clear("stale_winner_cache");
      // Heartbeat comments keep idle streams open (interval set to 200 ms for the test).
      await new Promise((r) => setTimeout(r, 450));
      expect(es.raw()).toContain(": ping\n\n");
      // The status snapshot reflects the event too.
      const s = JSON.parse((await fetchText(`${server.url}/api/status`)).body);
      const row = s.evaluation.scenarios.find(
        (x: { scenario: string }) => x.scenario === "eight-puzzle-optimal",
      );
      expect(row).toMatchObject({ phase: "running", spentUsd: 0.02 });
    } finally {
      es.close();
    }
  });
});

describe("/healthz decisions on a live server", () => {
  const opened: { server: StatusServer; db: Db }[] = [];
  afterEach(async () => {
    for (const o of opened.splice(0)) {
      await o.server.close();
      o.db.close();
    }
  });

  async function start(live: LiveStatus, dockerOk: boolean) {
    const db = openDb(":memory:");
    const server = await startStatusServer({
      live,
      network: NETWORK,
      db,
      config,
      log: silentLogger,
      dockerPing: async () =>
        dockerOk
          ? { ok: true, checkedAt: Date.now() }
          : {
              ok: false,
              code: "docker_unreachable",
              error: "Docker at /x.sock: connect ENOENT",
              checkedAt: Date.now(),
            },
    });
    opened.push({ server, db });
    return server;
  }

  it("turns 503 when a loop stops ticking, and names it", async () => {
    let t = Date.now();
    const live = new LiveStatus(() => t);
    live.registerLoop("eval", 10_000);
    live.tick("eval");
    const server = await start(live, true);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    t += 31_000; // > 3 intervals
    const r = await fetch(`${server.url}/healthz`);
    expect(r.status).toBe(503);
    const body = (await r.json()) as HealthBody;
    expect(body.reasons).toEqual([
      { check: "loops", code: "loop_stale", message: "loop eval has not ticked for 31s (interval 10s)" },
    ]);
    expect(body.checks.loops.stale).toEqual(["eval"]);
    live.tick("eval");
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });

  it("/readyz fails (and /healthz says degraded) once the platform has been unreachable past the threshold", async () => {
    let t = Date.now();
    const live = new LiveStatus(() => t);
    const server = await start(live, true);
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    live.raise("platform_unreachable", "winner/current: connect ECONNREFUSED");
    t += config.status.degradedAfterMs - 1000;
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    t += 2000;
    const r = await fetch(`${server.url}/readyz`);
    expect(r.status).toBe(503);
    const body = (await r.json()) as HealthBody;
    expect(body).toMatchObject({ state: "degraded", ready: false });
    expect(body.checks.upstreams.unreachable).toEqual(["platform"]);
    expect(body.reasons[0]).toMatchObject({ check: "platform", code: "platform_unreachable" });
    const live200 = await fetch(`${server.url}/healthz`);
    expect(live200.status).toBe(200);
    expect(((await live200.json()) as HealthBody).state).toBe("degraded");
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toMatch(/^trajrl_ready 0$/m);
    expect(metrics).toMatch(/^trajrl_health_check_ok\{check="upstreams"\} 0$/m);
    live.clear("platform_unreachable");
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
  });

  it("asks Docker only when evaluating: weight-only mode (the default) is healthy without an engine", async () => {
    const noEngine = {
      STATUS_PORT: "0",
      STATUS_HOST: "127.0.0.1",
      DOCKER_SOCKET: "/nonexistent/docker.sock",
    };
    for (const [evalEnabled, want] of [
      ["", 200],
      ["1", 503],
    ] as const) {
      const db = openDb(":memory:");
      const server = await startStatusServer({
        live: new LiveStatus(),
        network: NETWORK,
        db,
        config: loadConfig({ ...noEngine, EVAL_ENABLED: evalEnabled }),
        log: silentLogger,
      });
      opened.push({ server, db });
      const r = await fetch(`${server.url}/healthz`);
      expect([evalEnabled, r.status]).toEqual([evalEnabled, want]);
      const body = (await r.json()) as { checks: { docker: { ok: boolean; skipped?: string } } };
      if (want === 200) expect(body.checks.docker.skipped).toContain("weight-only");
      else expect(body.checks.docker).toMatchObject({ ok: false, code: "docker_unreachable" });
    }
  });

  it("turns 503 when Docker does not answer", async () => {
    const server = await start(new LiveStatus(), false);
    const r = await fetch(`${server.url}/healthz`);
    expect(r.status).toBe(503);
    expect(((await r.json()) as HealthBody).reasons).toEqual([
      { check: "docker", code: "docker_unreachable", message: "Docker at /x.sock: connect ENOENT" },
    ]);
  });

  it("turns 503 when the database stops taking writes", async () => {
    const server = await start(new LiveStatus(), true);
    const db = opened.at(-1)!.db;
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    // The daemon's connection goes away under the server (any failing write takes the same path).
    db.close();
    await new Promise((r) => setTimeout(r, 2100)); // past the database probe's cache
    const r = await fetch(`${server.url}/healthz`);
    expect(r.status).toBe(503);
    const body = (await r.json()) as HealthBody;
    expect(body.reasons[0]).toMatchObject({ check: "database", code: "db_not_writable" });
    opened.at(-1)!.db = openDb(":memory:"); // so afterEach can close something
  });
});

describe("lifecycle", () => {
  it("fails with status_port_in_use when the port is taken", async () => {
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, "127.0.0.1", r));
    const port = (blocker.address() as { port: number }).port;
    const db = openDb(":memory:");
    const live = new LiveStatus();
    try {
      const err = await startStatusServer({
        live,
        network: NETWORK,
        db,
        config: loadConfig({ STATUS_PORT: String(port) }),
        log: silentLogger,
      }).catch((e) => e);
      expect(err).toBeInstanceOf(ValidatorError);
      expect(err.code).toBe("status_port_in_use");
      // Nothing left subscribed by the failed start.
      expect(live.listenerCount("progress")).toBe(0);
    } finally {
      await new Promise((r) => blocker.close(r));
      db.close();
    }
  });

  it("close() ends open event streams, unsubscribes from LiveStatus and frees the port", async () => {
    const db = openDb(":memory:");
    const live = new LiveStatus();
    const server = await startStatusServer({ live, network: NETWORK, db, config, log: silentLogger });
    const es = openEvents(`${server.url}/api/events`);
    await es.next((f) => f.event === "hello");
    expect(live.listenerCount("progress")).toBeGreaterThan(0);
    await server.close();
    await es.ended;
    expect(live.listenerCount("progress")).toBe(0);
    expect(live.listenerCount("meterCall")).toBe(0);
    const refused = await new Promise<string>((resolve) => {
      // A fresh socket (agent: false): a pooled keep-alive socket would test the pool, not the port.
      const req = request(`${server.url}/healthz`, { agent: false }, () => resolve("answered"));
      req.on("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? "error"));
      req.end();
    });
    expect(refused).toBe("ECONNREFUSED");
    db.close();
  });
});
