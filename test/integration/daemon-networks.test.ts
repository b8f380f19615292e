/**
 * A rehearsal and then the real network, on one database (issue 35 item 1): a daemon on a local
 * network (the localnet's own genesis hash) evaluates epoch 1000, posts its verdict and sets weights;
 * then a daemon on the same data directory and wallet, on another network (finney's genesis, a
 * platform of its own that also numbers its epoch 1000), must evaluate its epoch 1000 as new, post to
 * its own platform, heartbeat none of the rehearsal's instants, and show none of the rehearsal's rows
 * on its status page. The world is test/helpers/daemon-world.ts (real chain client, real SQLite,
 * signed HTTP against the fakes).
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { GENESIS_HASHES } from "../../src/chain/index.js";
import { LOCALNET_GENESIS_HASH } from "../../src/localnet/index.js";
import { silentLogger } from "../../src/log.js";
import {
  EvaluationRepo,
  MARK,
  PlatformMarksRepo,
  ScoredEpochRepo,
  VerdictOutboxRepo,
  WeightsRepo,
} from "../../src/store/index.js";
import { type StatusSnapshot, startStatusServer } from "../../src/web/index.js";
import { until } from "../helpers/daemon.js";
import { readPinPack, runCleanups, seat, startDaemon, world } from "../helpers/daemon-world.js";

let pinBytes: Buffer;
beforeAll(async () => {
  pinBytes = await readPinPack();
});
afterEach(runCleanups);

describe("a rehearsal, then another network on the same database", () => {
  it("the second network evaluates its own epoch 1000, posts it to its platform, and sees none of the rehearsal's rows", async () => {
    // 1. The rehearsal: NETWORK=local against a chain with the localnet's genesis.
    const rehearsal = await world({ NETWORK: "local", LLM_API_KEY: "" }, undefined, {
      genesisHash: LOCALNET_GENESIS_HASH,
    });
    rehearsal.fake.winnerResponse = seat(rehearsal.subnet);
    rehearsal.fake.openEpoch({
      epochId: 1000,
      packBytes: pinBytes,
      challengerHotkey: rehearsal.subnet.challenger,
      challengerUid: rehearsal.subnet.uids.challenger,
      specNumber: 27,
    });
    const a = await startDaemon(rehearsal, { scenarios: ["alpha"], script: () => ({ quality: 1 }) });
    expect(a.daemon.network).toBe(LOCALNET_GENESIS_HASH);
    const dbA = a.daemon.database!;
    await until(
      () => (rehearsal.fake.scores.get(1000)?.length ?? 0) === 1,
      30_000,
      "the rehearsal's verdict",
    );
    const outboxA = new VerdictOutboxRepo(dbA, LOCALNET_GENESIS_HASH);
    await until(() => outboxA.get(1000, rehearsal.wallet.ss58)?.state === "delivered", 10_000, "delivered");
    const weightsA = new WeightsRepo(dbA, LOCALNET_GENESIS_HASH);
    await until(() => weightsA.lastIncluded(11) !== undefined, 30_000, "the rehearsal's weights");
    // The instants the heartbeat reports were marked (on the rehearsal's network).
    const marksA = new PlatformMarksRepo(dbA, LOCALNET_GENESIS_HASH);
    await until(() => marksA.get(MARK.lastEvalAt) !== undefined, 10_000, "the rehearsal's last_eval_at");
    expect(marksA.get(MARK.lastSetWeightsAt)).toBeDefined();
    const rehearsalEvaluations = new EvaluationRepo(dbA).recent(50).map((e) => e.id);
    const rehearsalAttempts = weightsA.recent(11, 50).map((x) => x.id);
    expect(rehearsalEvaluations.length).toBeGreaterThan(0);
    await a.daemon.stop();

    // 2. The real network: the same data directory and hotkey, finney's genesis, its own platform,
    // whose epoch ids are small sequential integers too: its epoch 1000 is another epoch.
    const real = await world({ HEARTBEAT_INTERVAL_S: "600" }, undefined, {
      dir: rehearsal.dir,
      wallet: rehearsal.wallet,
    });
    expect(real.config.dbPath).toBe(rehearsal.config.dbPath);
    real.fake.openEpoch({
      epochId: 1000,
      packBytes: pinBytes,
      challengerHotkey: real.subnet.challenger,
      challengerUid: real.subnet.uids.challenger,
      specNumber: 27,
    });
    const startedAt = Date.now();
    const b = await startDaemon(real, { scenarios: ["alpha"], script: () => ({ quality: 0.5 }) });
    expect(b.daemon.network).toBe(GENESIS_HASHES.finney);

    // Its epoch 1000 is evaluated (not `already_scored`) and posted to its own platform.
    await until(() => (real.fake.scores.get(1000)?.length ?? 0) === 1, 30_000, "the real network's verdict");
    expect(real.fake.scores.get(1000)![0]).toMatchObject({
      validator_hotkey: real.wallet.ss58,
      challenger: { score: 0.5 },
    });
    expect(b.live.epoch).toMatchObject({ epochId: 1000 });
    expect(b.seen.calls.map((c) => c.epochId)).toEqual([1000]);

    // The first heartbeat reports none of the rehearsal's instants.
    await until(() => real.fake.heartbeats.length >= 1, 10_000, "the first heartbeat");
    const hb = real.fake.heartbeats[0]!;
    const since = Math.floor(startedAt / 1000);
    for (const k of ["last_set_weights_at", "last_eval_at"] as const)
      if (k in hb) expect(hb[k] as number).toBeGreaterThanOrEqual(since);

    // Its status page: only its own rows.
    const dbB = b.daemon.database!;
    await until(
      () => new VerdictOutboxRepo(dbB, b.daemon.network!).get(1000, real.wallet.ss58)?.state === "delivered",
      10_000,
      "the real verdict delivered",
    );
    const server = await startStatusServer({
      live: b.live,
      db: dbB,
      network: b.daemon.network!,
      config: { ...real.config, status: { ...real.config.status, host: "127.0.0.1", port: 0 } },
      log: silentLogger,
      dockerPing: async () => ({ ok: true, checkedAt: Date.now() }),
    });
    try {
      const s = (await (await fetch(`${server.url}/api/status`)).json()) as StatusSnapshot;
      expect(s.verdicts.map((v) => v.evaluationId).filter((id) => rehearsalEvaluations.includes(id))).toEqual(
        [],
      );
      expect(s.verdicts.map((v) => v.score)).toEqual([0.5]);
      expect(s.outbox.counts).toMatchObject({ delivered: 1, pending: 0, abandoned: 0 });
      expect(s.outbox.recent.map((e) => e.score)).toEqual([0.5]);
      expect(s.weights.recent.map((x) => x.id).filter((id) => rehearsalAttempts.includes(id))).toEqual([]);
      expect(s.winner?.fetchedAt ?? startedAt).toBeGreaterThanOrEqual(startedAt);
      expect(s.winner?.hotkey ?? null).toBeNull();
    } finally {
      await server.close();
    }

    // The rehearsal's rows are still there, under its own network.
    expect(new ScoredEpochRepo(dbB, LOCALNET_GENESIS_HASH).get(1000, rehearsal.wallet.ss58)).toMatchObject({
      score: 1,
    });
    expect(new ScoredEpochRepo(dbB, GENESIS_HASHES.finney!).get(1000, real.wallet.ss58)).toMatchObject({
      score: 0.5,
    });
  }, 180_000);
});
