/**
 * The validator daemon end to end with the REAL pipeline: Docker sandboxes, the meter, the
 * in-process Engy simulator, real scenarios (the built-in suite's quick ones, whatever spec number the
 * platform names: the built-in suite has none, its verdicts are spec 0); the FakePlatform opening an
 * epoch with a real pack URL it serves (examples/packs/pin.json), the subtensor test node, a btcli
 * wallet file. The second test drives `trajrl-validator run` as a process and stops it with SIGTERM.
 * The third runs one epoch of upstream's default weight-only mode as a process.
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import pino from "pino";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { loadHotkey, PolkadotChainClient } from "../../src/chain/index.js";
import { Daemon, LogTap } from "../../src/daemon/index.js";
import { openEvidence, verifyOpened } from "../../src/evidence/index.js";
import { createLogger } from "../../src/log.js";
import { LiveStatus } from "../../src/status/index.js";
import {
  EvaluationRepo,
  EvidenceIndex,
  openDb,
  VerdictOutboxRepo,
  WeightsRepo,
} from "../../src/store/index.js";
import { StatusReader } from "../../src/web/index.js";
import type { FakePlatform } from "../fakes/platform.js";
import { leftoversOf, startCli } from "../helpers/cli.js";
import { type TestSubnet, testConfig, until } from "../helpers/daemon.js";
import { onCleanup, type ProcessWorld, processWorld, runCleanups, SIM_ENV } from "../helpers/daemon-world.js";
import { requireDocker } from "../helpers/docker.js";

const ROOT = join(import.meta.dirname, "../..");
const QUICK = ["binary-flag-hunt", "access-log-regex"];
let pinBytes: Buffer;

afterEach(runCleanups);

beforeAll(async () => {
  await requireDocker();
  pinBytes = await readFile(join(ROOT, "examples/packs/pin.json"));
});

type World = ProcessWorld;
const world = processWorld;

/** Containers and networks this process (pid) made on this host: the sandbox labels everything. */
const leftovers = (pid: number) => leftoversOf([pid], { thisHost: true });

async function inProcessDaemon(w: World) {
  const config = testConfig({
    dataDir: w.env.DATA_DIR!,
    wallet: w.wallet,
    platformUrl: w.fake.url,
    chainUrl: w.subnet.node.url,
    env: SIM_ENV,
  });
  const live = new LiveStatus();
  const tap = new LogTap();
  const log = createLogger({
    level: "debug",
    destination: pino.multistream([
      { stream: tap, level: "trace" },
      ...(process.env.DAEMON_TEST_LOG
        ? [
            {
              stream: pino.destination({ dest: process.env.DAEMON_TEST_LOG, sync: true, append: true }),
              level: "trace" as const,
            },
          ]
        : []),
    ]),
  });
  const hotkey = await loadHotkey(config.chain);
  const chain = new PolkadotChainClient({
    endpoint: config.chain.endpoint,
    network: "finney",
    hotkey,
    log,
    reconnectDelayMs: 150,
    pollIntervalMs: 100,
  });
  const daemon = new Daemon({
    config,
    log,
    live,
    logTap: tap,
    chain,
    scenarios: QUICK,
    timing: {
      outboxPollMs: 200,
      outboxBackoff: { initialMs: 500, factor: 2, maxMs: 5_000, jitter: 0, maxAgeMs: 24 * 3_600_000 },
      weightsBackoff: { transientBaseMs: 200, permanentMaxMs: 2_000 },
      setWeightsTimeoutMs: 30_000,
      // The test empties the seat mid-run: the winner is polled faster than upstream's 60 s.
      winnerPollMs: 200,
    },
  });
  onCleanup(() => daemon.stop());
  await daemon.start();
  return { daemon, live, config };
}

const setWeightsOf = (s: TestSubnet) => s.node.received.filter((r) => r.call?.method === "setWeights");
const accepted = (fake: FakePlatform, epochId: number) =>
  fake.requests("epoch.score").filter((r) => r.path === `/api/v2/epoch/${epochId}/score` && r.status === 200);

describe("daemon e2e, weight-only (upstream's default mode)", () => {
  it("`run` without EVAL_ENABLED: one epoch opens, nothing is evaluated or fetched, weights follow the platform's winner, the heartbeat is upstream's, stdout stays JSON lines through a dropped chain socket (@polkadot/api's lines routed through pino)", async () => {
    const w = await world({ EVAL_ENABLED: "", HEARTBEAT_INTERVAL_S: "1" });
    // A seat whose uid comes from the platform (the chain puts this hotkey at the winner's uid too).
    w.fake.winnerResponse = {
      success: true,
      winner: { hotkey: w.subnet.winner, uid: w.subnet.uids.winner, pack_hash: "cd".repeat(32), score: 1.2 },
      finalized_epoch: null,
      submissions: [],
    };
    const epoch = w.fake.openEpoch({
      packBytes: pinBytes,
      challengerHotkey: w.subnet.challenger,
      challengerUid: w.subnet.uids.challenger,
      specNumber: 27,
    });
    const included = () => setWeightsOf(w.subnet).filter((x) => x.outcome === "success");
    const run = startRun(w.env);
    onCleanup(async () => run.child.kill("SIGKILL"));

    await until(() => included().length >= 1, 60_000, "weights for the platform's winner");
    expect(included()[0]!.call!.args).toMatchObject({ dests: [w.subnet.uids.winner], weights: [65535] });
    await until(
      () => w.fake.heartbeats.some((h) => "last_set_weights_at" in h),
      30_000,
      "a heartbeat after the weights",
    );
    // The chain drops every socket; the daemon reconnects and sets weights in the next window.
    w.subnet.node.dropConnections();
    w.subnet.node.advance(5);
    await until(() => included().length >= 2, 60_000, "weights after the reconnect");

    run.child.kill("SIGTERM");
    expect(await run.exited, run.stderr()).toBe(0);
    // No evaluation: the epoch was never asked for, its pack never fetched, nothing posted or archived.
    expect(w.fake.requests("epoch.current")).toHaveLength(0);
    expect(w.fake.requests("pack")).toHaveLength(0);
    expect(w.fake.scores.get(epoch.challenge_epoch_id)).toBeUndefined();
    expect(w.fake.logs).toHaveLength(0);
    expect(await leftovers(run.child.pid!)).toBe(0);
    // Upstream's weight-only heartbeat: the signed envelope and last_set_weights_at only.
    const allowed = ["hotkey", "last_set_weights_at", "signature", "timestamp", "version"];
    for (const h of w.fake.heartbeats) for (const k of Object.keys(h)) expect(allowed).toContain(k);
    // Every stdout line is a JSON log line, the chain's reconnect included.
    const lines = run.stdout().trimEnd().split("\n");
    const parsed = lines.map((l) => {
      try {
        return JSON.parse(l) as { msg?: string; mode?: string; loops?: string[]; origin?: string };
      } catch {
        throw new Error(`a stdout line is not JSON: ${l}`);
      }
    });
    expect(parsed.find((l) => l.msg === "daemon.started")).toMatchObject({
      mode: "weight-only",
      loops: ["winner", "weights", "heartbeat"],
    });
    expect(parsed.some((l) => l.msg === "chain.disconnected")).toBe(true);
    // @polkadot/api's own "API-WS: disconnected …" came through pino, not as a bare console line.
    expect(parsed.some((l) => l.msg === "chain.polkadot" && l.origin === "API-WS")).toBe(true);
    expect(run.stderr()).not.toMatch(/API-WS|RPC-CORE|API\/INIT|REGISTRY/);
  }, 300_000);
});

describe("daemon e2e (real pipeline, simulator, Docker)", () => {
  it("evaluates the epoch, survives a 503, posts one signed verdict, sets and burns weights, and does not re-evaluate after a restart", async () => {
    const w = await world();
    w.fake.winnerResponse = {
      success: true,
      winner: {
        hotkey: w.subnet.winner,
        uid: w.subnet.uids.winner,
        pack_hash: "cd".repeat(32),
        score: 1.2,
        since_epoch_id: 3,
      },
      finalized_epoch: null,
      submissions: [],
    };
    w.fake.inject("epoch.score", { kind: "status", status: 503 });
    const epoch = w.fake.openEpoch({
      packBytes: pinBytes,
      challengerHotkey: w.subnet.challenger,
      challengerUid: w.subnet.uids.challenger,
      specNumber: 27,
    });
    const first = await inProcessDaemon(w);
    const phases = new Set<string>();
    first.live.on("progress", (e) => phases.add(`${e.scenario}:${e.phase}`));

    await until(() => accepted(w.fake, epoch.challenge_epoch_id).length === 1, 480_000, "the verdict");
    const posts = w.fake
      .requests("epoch.score")
      .filter((r) => r.path.includes(`/${epoch.challenge_epoch_id}/`));
    expect(posts.map((p) => p.status)).toEqual([503, 200]);
    // The injected 503 answers before any check; the retry is verified against the documented message.
    expect(posts[1]!.signature?.valid).toBe(true);
    const body = w.fake.scores.get(epoch.challenge_epoch_id)![0]! as {
      challenger: { score: number; qualified: boolean; scenario_results: Record<string, unknown> };
      spec_number: number;
    };
    // The platform named spec 27; the built-in suite claims no subnet spec.
    expect(body.spec_number).toBe(0);
    expect(Object.keys(body.challenger.scenario_results)).toEqual(QUICK);
    // What was posted is the evaluation stored in SQLite.
    const db = first.daemon.database!;
    const row = new EvaluationRepo(db, first.daemon.network!)
      .recent(10)
      .find((r) => r.source === "epoch" && r.epochId === String(epoch.challenge_epoch_id))!;
    expect(row.status).toBe("scored");
    expect((row.verdict as { score: number }).score).toBe(body.challenger.score);
    await until(
      () =>
        new VerdictOutboxRepo(db, first.daemon.network!).get(epoch.challenge_epoch_id, w.wallet.ss58)
          ?.state === "delivered",
      10_000,
    );
    // The pipeline fed the status page; progress reached the platform.
    expect([...phases]).toEqual(expect.arrayContaining(QUICK.map((s) => `${s}:running`)));
    expect(
      w.fake.progress
        .filter((p) => p.state === "complete")
        .map((p) => p.scenario_name)
        .sort(),
    ).toEqual([...QUICK].sort());
    // The log archive carries the episodes' artifacts and the daemon's lines.
    await until(() => w.fake.logs.length === 1, 60_000, "the log upload");
    const tarText = gunzipSync(w.fake.logs[0]!.archive).toString("latin1");
    expect(tarText).toContain("artifacts/");
    expect(tarText).toContain('"msg":"episode.finished"');
    // Each episode's policy.log and meter.json as upstream uploads them: the sidecar's log under
    // upstream's marker, and meter.json with the summary's counters, the rows and the provenance report.
    expect(tarText).toContain("--- stdout/stderr ---\n");
    expect(tarText).toMatch(/"rows": \[/);
    expect(tarText).toMatch(/"provenance": \{\s*"total": \d+/);
    // The verdict's evidence: kept under DATA_DIR/evidence, listed on the status page, whole in the
    // upload, signed by the hotkey; its checks hold (the re-grades: test/e2e/evidence.test.ts).
    const listed = new EvidenceIndex(db).get(row.id)!;
    expect(existsSync(listed.path)).toBe(true);
    expect(
      new StatusReader(db, first.daemon.network!).recentEvaluations(5).find((v) => v.evaluationId === row.id)
        ?.evidence?.id,
    ).toBe(listed.id);
    const [uploaded] = await openEvidence(w.fake.logs[0]!.archive, "upload");
    const checked = await verifyOpened("upload", uploaded!.evidence, { expectSigner: w.wallet.ss58 });
    expect(checked.checks.filter((c) => c.status !== "ok")).toEqual([]);
    expect(checked.evaluation).toMatchObject({
      id: row.id,
      source: "epoch",
      epoch_id: String(epoch.challenge_epoch_id),
    });
    expect(checked.scenarios.map((x) => [x.scenario, x.posted])).toEqual(
      QUICK.map((n) => [n, (body.challenger.scenario_results[n] as { score: number }).score]),
    );

    // Weights for the seated winner; then the seat empties and the next window burns to the owner.
    const repo = new WeightsRepo(db, first.daemon.network!);
    await until(() => repo.lastIncluded(11)?.reason === "winner", 30_000, "weights for the winner");
    expect(repo.lastIncluded(11)).toMatchObject({
      uids: [w.subnet.uids.winner],
      weights: [65535],
      versionKey: 3,
    });
    w.fake.winnerResponse = { success: true, winner: null, finalized_epoch: null, submissions: [] };
    w.subnet.node.dropConnections();
    w.subnet.node.advance(5);
    await until(() => repo.lastIncluded(11)?.reason === "no_seat", 30_000, "the burn after a dropped socket");
    expect(repo.lastIncluded(11)).toMatchObject({ uids: [w.subnet.uids.owner] });
    // SettingWeightsTooFast: someone else set weights with our hotkey meanwhile; we wait for the window.
    const node = w.subnet.node;
    node.holdInclusion = true;
    const n0 = setWeightsOf(w.subnet).length;
    node.advance(5);
    await until(() => setWeightsOf(w.subnet).length > n0, 15_000, "the held submission");
    node.subnet(11).neurons[w.subnet.uids.me]!.lastUpdate = node.head.number;
    node.release();
    await until(() => repo.recent(11, 1)[0]?.errorName === "SettingWeightsTooFast", 15_000, "the rejection");
    const n1 = setWeightsOf(w.subnet).length;
    await new Promise((r) => setTimeout(r, 2_500));
    expect(setWeightsOf(w.subnet).length).toBe(n1);
    node.advance(5);
    await until(
      () => repo.recent(11, 1)[0]?.outcome === "included" && setWeightsOf(w.subnet).length > n1,
      20_000,
    );
    for (const x of node.received) expect(x.signatureValid && x.verifyError === undefined).toBe(true);

    await first.daemon.stop();
    expect(await leftovers(process.pid)).toBe(0);

    // A restart on the same SQLite file: the epoch is scored, nothing is evaluated or posted again.
    const evaluations = new EvaluationRepo(openDb(first.config.dbPath)).recent(50).length;
    const second = await inProcessDaemon(w);
    await until(() => (second.live.loops.get("eval")?.ticks ?? 0) >= 10, 30_000, "eval ticks");
    expect(second.live.epoch).toMatchObject({
      epochId: epoch.challenge_epoch_id,
      decision: "already_scored",
    });
    expect(new EvaluationRepo(second.daemon.database!).recent(50)).toHaveLength(evaluations);
    expect(accepted(w.fake, epoch.challenge_epoch_id)).toHaveLength(1);
    await second.daemon.stop();
  }, 600_000);

  it("SIGTERM mid-evaluation leaves it resumable; the restarted process finishes it and posts one verdict once", async () => {
    const w = await world({ EVAL_CONCURRENCY: "1" });
    const epoch = w.fake.openEpoch({
      packBytes: pinBytes,
      challengerHotkey: w.subnet.challenger,
      specNumber: 27,
    });
    const dbPath = join(w.env.DATA_DIR!, "validator.sqlite");
    const epochEvaluation = () => {
      if (!existsSync(dbPath)) return undefined;
      const db = openDb(dbPath, { readonly: true });
      try {
        const repo = new EvaluationRepo(db);
        const row = repo.recent(10).find((r) => r.epochId === String(epoch.challenge_epoch_id));
        return row ? { row, episodes: repo.episodes(row.id) } : undefined;
      } catch {
        return undefined; // the child has not migrated the fresh database yet
      } finally {
        db.close();
      }
    };

    const a = startRun(w.env);
    onCleanup(async () => a.child.kill("SIGKILL"));
    await until(
      () => (epochEvaluation()?.episodes ?? []).some((e) => e.status === "final"),
      480_000,
      "the first finished episode",
    );
    a.child.kill("SIGTERM");
    const code = await a.exited;
    expect(code, a.stderr()).toBe(0);
    expect(a.stdout()).toContain('"msg":"daemon.stopped"');
    expect(a.stdout()).toContain('"msg":"eval.interrupted_resumes_at_next_start"');
    const after = epochEvaluation()!;
    expect(after.row.status).toBe("running");
    const finals = after.episodes.filter((e) => e.status === "final").map((e) => e.scenario);
    expect(finals.length).toBeGreaterThanOrEqual(1);
    expect(after.episodes.some((e) => e.status === "interrupted")).toBe(true);
    expect(w.fake.scores.get(epoch.challenge_epoch_id)).toBeUndefined();
    expect(await leftovers(a.child.pid!)).toBe(0);

    const b = startRun(w.env);
    onCleanup(async () => b.child.kill("SIGKILL"));
    await until(
      () => accepted(w.fake, epoch.challenge_epoch_id).length === 1,
      480_000,
      "the resumed verdict",
    );
    const done = epochEvaluation()!;
    expect(done.row.id).toBe(after.row.id);
    expect(done.row.status).toBe("scored");
    // Episodes finished before the SIGTERM were kept, not run again.
    for (const s of finals) expect(done.episodes.filter((e) => e.scenario === s)).toHaveLength(1);
    b.child.kill("SIGTERM");
    expect(await b.exited).toBe(0);
    expect(
      w.fake.requests("epoch.score").filter((r) => r.path.includes(`/${epoch.challenge_epoch_id}/`)),
    ).toHaveLength(1);
    expect(await leftovers(b.child.pid!)).toBe(0);
  }, 900_000);
});

const startRun = (env: Record<string, string>) => startCli(["run", "--no-status"], { env });
