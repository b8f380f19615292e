/**
 * `trajrl-validator status` and the container HEALTHCHECK script as an operator runs them: child
 * processes against a status server on loopback, and against a database with no daemon.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { silentLogger } from "../../src/log.js";
import { LiveStatus } from "../../src/status/index.js";
import { type Db, openDb } from "../../src/store/index.js";
import { type StatusServer, startStatusServer } from "../../src/web/index.js";
import { runCli } from "../helpers/cli.js";
import { freePort as deadPort } from "../helpers/ports.js";
import { NETWORK, seedLive, seedStore } from "../helpers/web.js";

const root = new URL("../..", import.meta.url).pathname;

/** Async on purpose: the server under test lives in this process and must keep answering. */
const options = (env: Record<string, string>) => ({
  base: "clean" as const,
  env: { HOME: process.env.HOME ?? "/root", ...env },
  timeoutMs: 30_000,
});
const cli = (env: Record<string, string>, ...args: string[]) => runCli(args, options(env));
/** The container HEALTHCHECK script (src/web/healthcheck.ts) with its arguments. */
const healthcheck = (args: string[], env: Record<string, string>) =>
  runCli(args, { ...options(env), entry: join(root, "src/web/healthcheck.ts") });

/** A loopback port nothing listens on (bound, read, released). */
describe("trajrl-validator status", () => {
  let dir: string;
  let db: Db;
  let server: StatusServer;
  let dead: number;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "web-status-cli-"));
    db = openDb(join(dir, "validator.sqlite"));
    seedStore(db, Date.now());
    const live = new LiveStatus();
    server = await startStatusServer({
      live,
      network: NETWORK,
      db,
      config: loadConfig({ STATUS_PORT: "0" }),
      log: silentLogger,
      dockerPing: async () => ({ ok: true, checkedAt: Date.now() }),
    });
    seedLive(live);
    dead = await deadPort();
  });
  afterAll(async () => {
    await server?.close();
    db?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("prints the daemon's summary and exits 0 when it is healthy", async () => {
    const r = await cli({ DATA_DIR: dir }, "status", "--url", server.url);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`(live, from the daemon at ${server.url})`);
    expect(r.stdout).toMatch(/EPOCH\s+42/);
    expect(r.stdout).toMatch(/RUNNING\s+epoch 42/);
    expect(r.stdout).toMatch(/binary-flag-hunt\s+running/);
    expect(r.stdout).toContain("consensus_divergence");
  });

  it("--json prints the /api/status document; STATUS_PORT finds the daemon without --url", async () => {
    const r = await cli({ DATA_DIR: dir, STATUS_PORT: String(server.port) }, "status", "--json");
    expect(r.code).toBe(0);
    const s = JSON.parse(r.stdout);
    expect(s.schema).toBe(1);
    expect(s.source).toBe("daemon");
    expect(s.evaluation.scenarios).toHaveLength(3);
  });

  it("falls back to the database when no daemon answers, says so, and exits 2", async () => {
    const r = await cli({ DATA_DIR: dir, STATUS_PORT: String(dead) }, "status");
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`note: the daemon is not answering at http://127.0.0.1:${dead}`);
    expect(r.stderr).toContain("ECONNREFUSED");
    expect(r.stdout).toContain("RECENT VERDICTS");
    expect(r.stdout).toMatch(/rejected missing_skill_md/);
    expect(r.stdout).toMatch(/WEIGHTS\s+included · uid 7: 100%/);
    expect(r.stdout).toMatch(/OUTBOX\s+pending 1/);
    expect(r.stdout).toContain("EPOCH        unknown (needs the daemon)");

    const j = await cli({ DATA_DIR: dir, STATUS_PORT: String(dead) }, "status", "--json");
    expect(j.code).toBe(2);
    const s = JSON.parse(j.stdout);
    expect(s.source).toBe("database");
    expect(s.note).toContain("not answering");
    expect(s.verdicts.map((v: { evaluationId: string }) => v.evaluationId)).toEqual(["ev_c", "ev_b", "ev_a"]);
  });

  it("does not print something else listening on that port as our status", async () => {
    const r = await cli({ DATA_DIR: dir }, "status", "--url", `${server.url}/static/app.js?`, "--json");
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stdout).note).toContain("(the answer is not a trajrl-validator status document)");
  });

  it("with neither a daemon nor a database: one clear line, exit 1", async () => {
    const empty = mkdtempSync(join(tmpdir(), "web-status-empty-"));
    try {
      const r = await cli({ DATA_DIR: empty, STATUS_PORT: String(dead) }, "status");
      expect(r.code).toBe(1);
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
      expect(r.stderr).toContain("no database at");
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});

describe("a degraded daemon (the chain unreachable past DEGRADED_AFTER_S)", () => {
  it("status exits 1 with DEGRADED and the worst alarm in its header; the HEALTHCHECK fails and says why", async () => {
    const db = openDb(":memory:");
    let t = Date.now();
    const live = new LiveStatus(() => t);
    const server = await startStatusServer({
      live,
      network: NETWORK,
      db,
      config: loadConfig({ STATUS_PORT: "0", DEGRADED_AFTER_S: "60" }),
      log: silentLogger,
      dockerPing: async () => ({ ok: true, checkedAt: 0 }),
    });
    try {
      live.raise("consensus_divergence", "epoch 9: local 0.5 vs server 0.6", "warn");
      live.raise("chain_unreachable", "chain: chain_unreachable: connect ECONNREFUSED", "error");
      // Within the threshold: still healthy (a blip must not page anyone).
      t += 30_000;
      const early = await cli({}, "status", "--url", server.url);
      expect(early.code).toBe(0);
      expect(early.stdout.split("\n")[0]).toMatch(/ · healthy · ALARM chain_unreachable \(\S+ ago\) \+1$/);
      expect((await healthcheck([`${server.url}/readyz`], {})).code).toBe(0);

      t += 31_000;
      const r = await cli({}, "status", "--url", server.url);
      expect(r.code).toBe(1);
      const [head, ...rest] = r.stdout.split("\n");
      expect(head).toMatch(/ · DEGRADED \(chain\) · ALARM chain_unreachable \(\S+ ago\) \+1$/);
      expect(rest.join("\n")).toContain(
        "! chain: chain unreachable for 1m01s (threshold 1m00s): chain: chain_unreachable",
      );
      const hc = await healthcheck([`${server.url}/readyz`], {});
      expect(hc.code).toBe(1);
      expect(hc.stdout).toMatch(/^degraded \(503\): chain unreachable for 1m01s \(threshold 1m00s\)/);
      // Liveness still holds: restarting the process would not bring the chain back.
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);

      live.clear("chain_unreachable");
      expect((await cli({}, "status", "--url", server.url)).code).toBe(0);
      expect((await healthcheck([`${server.url}/readyz`], {})).code).toBe(0);
    } finally {
      await server.close();
      db.close();
    }
  }, 60_000);
});

describe("the container HEALTHCHECK script", () => {
  it("exits 0 on a healthy daemon and 1 with the reasons on an unhealthy one", async () => {
    const db = openDb(":memory:");
    let dockerOk = true;
    const server = await startStatusServer({
      live: new LiveStatus(),
      network: NETWORK,
      db,
      config: loadConfig({ STATUS_PORT: "0" }),
      log: silentLogger,
      dockerPing: async () =>
        dockerOk
          ? { ok: true, checkedAt: 0 }
          : { ok: false, error: "Docker at /var/run/docker.sock: EACCES", checkedAt: 0 },
    });
    try {
      const ok = await healthcheck([], { STATUS_HOST: "0.0.0.0", STATUS_PORT: String(server.port) });
      expect(ok).toMatchObject({ code: 0, stdout: "healthy\n" });
      dockerOk = false;
      await new Promise((r) => setTimeout(r, 5100)); // past the Docker probe's cache
      const bad = await healthcheck([], { STATUS_PORT: String(server.port) });
      expect(bad.code).toBe(1);
      expect(bad.stdout).toBe("unhealthy (503): Docker at /var/run/docker.sock: EACCES\n");
    } finally {
      await server.close();
      db.close();
    }
  });

  it("exits 1 when nothing answers", async () => {
    const r = await healthcheck([], { STATUS_PORT: String(await deadPort()) });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^no answer from http:\/\/127\.0\.0\.1:\d+\/readyz: ECONNREFUSED/);
  });
});
