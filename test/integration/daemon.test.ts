/**
 * The daemon's loops end to end against the fakes: the FakePlatform (real HTTP on loopback, every
 * signature verified), the subtensor test node (real metadata, every extrinsic decoded and its
 * signature verified), a btcli wallet file, a real SQLite file, the real chain client; the
 * evaluation is the real evaluation core with a scripted episode runner (no Docker here; the
 * e2e test runs the real pipeline). The world is test/helpers/daemon-world.ts.
 */
import { gunzipSync } from "node:zlib";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { GENESIS_HASHES } from "../../src/chain/index.js";
import {
  EvaluationRepo,
  openDb,
  ScoredEpochRepo,
  VerdictOutboxRepo,
  WeightsRepo,
} from "../../src/store/index.js";
import { type CorePipelineOptions, until } from "../helpers/daemon.js";
import {
  expectEveryExtrinsicVerifies,
  readPinPack,
  runCleanups,
  scoreRequests,
  seat,
  setWeightsOf,
  startDaemon,
  world,
} from "../helpers/daemon-world.js";

/** The test node serves finney's genesis: the network these daemons' rows belong to. */
const FINNEY = GENESIS_HASHES.finney!;
let pinBytes: Buffer;
beforeAll(async () => {
  pinBytes = await readPinPack();
});
afterEach(runCleanups);

describe("daemon against the fake platform and the subtensor test node", () => {
  it("evaluates the epoch, survives a 503 on the first POST, posts one signed verdict, heartbeats, reports progress, uploads logs, and sets weights for the seated winner", async () => {
    const w = await world();
    w.fake.winnerResponse = seat(w.subnet);
    w.fake.inject("epoch.score", { kind: "status", status: 503 });
    const epoch = w.fake.openEpoch({
      packBytes: pinBytes,
      challengerHotkey: w.subnet.challenger,
      challengerUid: w.subnet.uids.challenger,
      specNumber: 900,
    });
    const r = await startDaemon(w, {
      scenarios: ["alpha", "beta"],
      script: (s) => ({ quality: s === "alpha" ? 1 : 0.5 }),
    });

    await until(
      () => (w.fake.scores.get(epoch.challenge_epoch_id)?.length ?? 0) === 1,
      30_000,
      "the verdict",
    );
    const posts = scoreRequests(w.fake, epoch.challenge_epoch_id);
    expect(posts.map((p) => p.status)).toEqual([503, 200]);
    // The fake verifies every signature against `trajectoryrl-challenge-score:{hotkey}:{ts}:{epoch}`.
    expect(posts[1]!.signature).toMatchObject({ valid: true });
    expect(posts[1]!.signature!.message).toMatch(
      new RegExp(`^trajectoryrl-challenge-score:${w.wallet.ss58}:\\d+:${epoch.challenge_epoch_id}$`),
    );
    const body = w.fake.scores.get(epoch.challenge_epoch_id)![0]!;
    expect(body).toMatchObject({
      validator_hotkey: w.wallet.ss58,
      spec_number: 900,
      challenger: { score: 1.5, qualified: true },
      harness_name: "trajrl-validator-ts",
    });
    expect(Object.keys((body.challenger as { scenario_results: object }).scenario_results)).toEqual([
      "alpha",
      "beta",
    ]);

    const db = r.daemon.database!;
    const outbox = new VerdictOutboxRepo(db, r.daemon.network!);
    await until(() => outbox.get(epoch.challenge_epoch_id, w.wallet.ss58)?.state === "delivered", 5_000);
    const entry = outbox.get(epoch.challenge_epoch_id, w.wallet.ss58)!;
    expect(entry).toMatchObject({ state: "delivered", outcome: "delivered", attempts: 2, lastStatus: 200 });
    expect(
      new ScoredEpochRepo(db, r.daemon.network!).get(epoch.challenge_epoch_id, w.wallet.ss58),
    ).toMatchObject({
      score: 1.5,
      qualified: true,
      packHash: epoch.challenger_pack_hash,
    });

    // Heartbeat at start, signed.
    expect(w.fake.heartbeats.length).toBeGreaterThanOrEqual(1);
    expect(w.fake.requests("validators.heartbeat")[0]!.signature).toMatchObject({ valid: true });

    // Progress: running / verifying / complete per scenario, each signed with the scenario in the message.
    await until(() => w.fake.progress.length >= 6, 5_000, "progress events");
    const states = w.fake.progress.map((p) => `${p.scenario_name}:${p.state}`);
    expect(states).toEqual(
      expect.arrayContaining(["alpha:running", "alpha:verifying", "alpha:complete", "beta:complete"]),
    );
    expect(w.fake.requests("epoch.scenario_progress").every((q) => q.signature?.valid)).toBe(true);
    expect(w.fake.progress.find((p) => p.scenario_name === "alpha" && p.state === "complete")).toMatchObject({
      quality: 1,
      miner_hotkey: w.subnet.challenger,
      miner_uid: w.subnet.uids.challenger,
      scenario_index: 0,
      total_scenarios: 2,
      // the meter's spend on the episode, upstream's timed_out and model label
      cost_usd: 0.01,
      timed_out: false,
      llm_model: "policy:auto (default qwen3.8-27b)",
    });

    // The evaluation's log archive: multipart, signed, with the daemon's lines of that evaluation.
    await until(() => w.fake.logs.length === 1, 10_000, "the log upload");
    const up = w.fake.logs[0]!;
    expect(up.fields).toMatchObject({
      miner_hotkey: w.subnet.challenger,
      miner_uid: String(w.subnet.uids.challenger),
      pack_hash: epoch.challenger_pack_hash,
      epoch_number: String(epoch.challenge_epoch_id),
      spec_number: "900",
    });
    expect(up.fields.eval_id).toMatch(new RegExp(`^\\d{8}_\\d{6}_e${epoch.challenge_epoch_id}$`));
    const tarText = gunzipSync(up.archive).toString("latin1");
    expect(tarText).toContain("verdict.json");
    expect(tarText).toContain("validator.log");
    expect(tarText).toContain('"msg":"episode.finished"');

    // Weights: 100 % to the winner's uid, the chain's version key, included with WeightsSet.
    await until(() => setWeightsOf(w.subnet).some((x) => x.outcome === "success"), 20_000, "set_weights");
    const tx = setWeightsOf(w.subnet).find((x) => x.outcome === "success")!;
    expect(tx.signer).toBe(w.wallet.ss58);
    expect(tx.call!.args).toMatchObject({
      netuid: 11,
      dests: [w.subnet.uids.winner],
      weights: [65535],
      version_key: 3,
    });
    // The node marks the extrinsic before the daemon has read the block back and recorded it.
    await until(
      () =>
        new WeightsRepo(db, r.daemon.network!).lastIncluded(11)?.txHash === tx.hash &&
        r.live.lastWeights?.outcome === "included",
      5_000,
      "the attempt row",
    );
    const attempt = new WeightsRepo(db, r.daemon.network!).lastIncluded(11)!;
    expect(attempt).toMatchObject({
      reason: "winner",
      uids: [2],
      weights: [65535],
      versionKey: 3,
      outcome: "included",
    });
    expect(attempt.txHash).toBe(tx.hash);
    expect(r.live.lastWeights).toMatchObject({ outcome: "included", uids: [2], reason: "winner" });

    // Never skips a window: once the rate limit (5 blocks) has passed, it sets them again.
    const before = setWeightsOf(w.subnet).length;
    await new Promise((res) => setTimeout(res, 1_500));
    expect(setWeightsOf(w.subnet).length).toBe(before);
    w.subnet.node.advance(5);
    await until(() => setWeightsOf(w.subnet).length > before, 10_000, "the next window");
    expectEveryExtrinsicVerifies(w.subnet);
    // The evaluation made exactly one pipeline call, and the loops all ticked.
    expect(r.seen.calls).toHaveLength(1);
    for (const name of ["eval", "winner", "outbox", "weights", "heartbeat"])
      expect(r.live.loops.get(name)?.ticks).toBeGreaterThan(0);

    // The first heartbeat came before any evaluation: the bench is "unknown" (as upstream's harness
    // before its first pull); after a restart the heartbeat reports the time of the last score the
    // platform accepted and the image digests its verdict carried (kept in the database).
    expect(w.fake.heartbeats[0]).toMatchObject({
      harness_image_hash: "unknown",
      llm_model: "policy:auto (default qwen3.8-27b)",
      llm_base_url: "https://api.engy.ai/v1",
    });
    expect(w.fake.heartbeats[0]).not.toHaveProperty("last_eval_at");
    expect(w.fake.heartbeats[0]).not.toHaveProperty("health_issue");
    await r.daemon.stop();
    const beats = w.fake.heartbeats.length;
    await startDaemon(w, { scenarios: ["alpha", "beta"] });
    await until(() => w.fake.heartbeats.length > beats, 10_000, "the heartbeat after the restart");
    expect(w.fake.heartbeats.at(-1)).toMatchObject({
      harness_image_hash: body.harness_image_hash,
      last_eval_at: expect.any(Number),
      last_set_weights_at: expect.any(Number),
    });
    expect(body.harness_image_hash).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it("weight-only (the default): no evaluation environment, no epoch or pack request; copies the owner's stored row with no seat, then weighs the platform's uid; heartbeats only last_set_weights_at", async () => {
    const w = await world({ EVAL_ENABLED: "0", HEARTBEAT_INTERVAL_S: "1" });
    const node = w.subnet.node;
    // The owner's own weights, as the chain stores them (SubtensorModule.Weights[11][0]).
    node.setWeightsRow(11, w.subnet.uids.owner, [
      [w.subnet.uids.challenger, 65535],
      [w.subnet.uids.winner, 21845],
    ]);
    node.advance(1);
    w.fake.openEpoch({ packBytes: pinBytes, challengerHotkey: w.subnet.challenger, specNumber: 900 });
    const r = await startDaemon(w, { scenarios: ["alpha"] });
    const repo = new WeightsRepo(r.daemon.database!, r.daemon.network!);

    await until(() => repo.lastIncluded(11)?.reason === "owner_row", 20_000, "the owner's row copied");
    expect(setWeightsOf(w.subnet).at(-1)!.call!.args).toMatchObject({
      dests: [w.subnet.uids.challenger, w.subnet.uids.winner],
      weights: [65535, 21845],
    });

    // Seated: the uid the platform gives, even where the chain puts the hotkey elsewhere (as upstream).
    w.fake.winnerResponse = {
      ...seat(w.subnet),
      winner: { ...seat(w.subnet).winner, uid: w.subnet.uids.challenger },
    };
    await until(() => (r.live.loops.get("winner")?.ticks ?? 0) >= 2, 10_000, "a winner refresh");
    node.advance(5);
    await until(() => repo.lastIncluded(11)?.reason === "winner", 20_000, "weights for the winner");
    expect(setWeightsOf(w.subnet).at(-1)!.call!.args).toMatchObject({
      dests: [w.subnet.uids.challenger],
      weights: [65535],
    });
    await until(
      () => w.fake.heartbeats.some((h) => "last_set_weights_at" in h),
      10_000,
      "a heartbeat after weights",
    );

    expect(r.seen.opened).toBe(0);
    expect(r.seen.calls).toHaveLength(0);
    expect(w.fake.requests("epoch.current")).toHaveLength(0);
    expect(w.fake.requests("pack")).toHaveLength(0);
    expect([...r.live.loops.keys()].sort()).toEqual(["heartbeat", "weights", "winner"]);
    // Upstream's weight-only heartbeat: the signed envelope and last_set_weights_at, nothing else.
    const allowed = ["hotkey", "last_set_weights_at", "signature", "timestamp", "version"];
    for (const h of w.fake.heartbeats) for (const k of Object.keys(h)) expect(allowed).toContain(k);
    const last = w.fake.heartbeats.findLast((h) => "last_set_weights_at" in h)!;
    expect(Object.keys(last).sort()).toEqual([
      "hotkey",
      "last_set_weights_at",
      "signature",
      "timestamp",
      "version",
    ]);
    expect(w.fake.heartbeats[0]).not.toHaveProperty("last_eval_at");
    expectEveryExtrinsicVerifies(w.subnet);
  });

  it("primes the winner once before the loops start (the first weights pay the winner); a platform down at start does not block it; eval ticks never ask for the winner", async () => {
    const w = await world();
    w.fake.winnerResponse = seat(w.subnet);
    const r = await startDaemon(w, { scenarios: ["alpha"] }, { winnerPollMs: 60_000 });
    // start() returned with the seat cached: the very first weights go to the winner.
    expect(w.fake.requests("winner.current")).toHaveLength(1);
    const repo = new WeightsRepo(r.daemon.database!, r.daemon.network!);
    await until(() => repo.lastIncluded(11) !== undefined, 20_000, "the first weights");
    expect(repo.recent(11, 10).at(-1)).toMatchObject({ reason: "winner", uids: [w.subnet.uids.winner] });
    // The eval loop polls the epoch every 0.2 s; the winner is the winner loop's (every 60 s here).
    await until(() => w.fake.requests("epoch.current").length >= 5, 10_000, "eval ticks");
    expect(w.fake.requests("winner.current")).toHaveLength(1);
    await r.daemon.stop();

    // The platform down at start: start() does not wait for it; the winner loop catches up.
    const down = await world();
    down.fake.winnerResponse = seat(down.subnet);
    down.fake.inject("winner.current", { kind: "status", status: 503 });
    const d = await startDaemon(down, { scenarios: ["alpha"] });
    expect(d.logs.some((l) => l.includes('"msg":"daemon.winner_prime_failed"'))).toBe(true);
    expect(JSON.parse(d.logs.find((l) => l.includes('"msg":"daemon.started"'))!)).toMatchObject({
      mode: "eval",
      winnerPrimed: "failed",
    });
    await until(
      () => down.fake.requests("winner.current").some((q) => q.status === 200),
      10_000,
      "a refresh",
    );
  });

  it("burns to the owner with no seat, backs off on SettingWeightsTooFast, and survives a dropped websocket", async () => {
    const w = await world();
    const r = await startDaemon(w, { scenarios: ["alpha"] });
    const node = w.subnet.node;
    await until(() => setWeightsOf(w.subnet).some((x) => x.outcome === "success"), 20_000, "the burn");
    expect(setWeightsOf(w.subnet)[0]!.call!.args).toMatchObject({
      dests: [w.subnet.uids.owner],
      weights: [65535],
    });
    const weightsRepo = new WeightsRepo(r.daemon.database!, r.daemon.network!);
    await until(() => weightsRepo.lastIncluded(11) !== undefined, 5_000, "the attempt row");
    expect(weightsRepo.lastIncluded(11)).toMatchObject({ reason: "no_seat", uids: [0] });

    // Another writer with our hotkey sets weights between our snapshot and our inclusion.
    node.holdInclusion = true;
    const n0 = setWeightsOf(w.subnet).length;
    node.advance(5);
    await until(() => setWeightsOf(w.subnet).length > n0, 10_000, "the held submission");
    node.subnet(11).neurons[w.subnet.uids.me]!.lastUpdate = node.head.number;
    node.release();
    await until(
      () => setWeightsOf(w.subnet).at(-1)!.outcome === "SettingWeightsTooFast",
      10_000,
      "the rejection",
    );
    const repo = new WeightsRepo(r.daemon.database!, r.daemon.network!);
    await until(() => repo.recent(11, 1)[0]?.outcome === "failed", 10_000, "the failed attempt row");
    expect(repo.recent(11, 1)[0]).toMatchObject({
      errorName: "SettingWeightsTooFast",
      errorKind: "rate_limited",
    });
    // It waits for the window instead of hammering the chain.
    const n1 = setWeightsOf(w.subnet).length;
    await new Promise((res) => setTimeout(res, 2_500));
    expect(setWeightsOf(w.subnet).length).toBe(n1);
    node.advance(5);
    await until(
      () => setWeightsOf(w.subnet).length > n1 && setWeightsOf(w.subnet).at(-1)!.outcome === "success",
      15_000,
      "weights after the window",
    );

    // The websocket drops while the daemon waits for the next window: it reconnects and does not miss it.
    const included = () => repo.recent(11, 50).filter((a) => a.outcome === "included").length;
    await until(() => included() === 2, 10_000, "the second inclusion recorded");
    node.dropConnections();
    node.advance(5);
    await until(() => included() === 3, 20_000, "weights after the reconnect");
    // And while a submission is in flight: the node accepts it and drops the socket before answering more.
    node.dropOnNextSubmit = "after-accept";
    node.advance(5);
    await until(() => included() === 4, 20_000, "weights sent across a dropped socket");
    expect(repo.recent(11, 1)[0]!.txHash).toBe(setWeightsOf(w.subnet).at(-1)!.hash);
    // Every attempt is on record; none was sent twice.
    const hashes = setWeightsOf(w.subnet).map((x) => x.hash);
    expect(new Set(hashes).size).toBe(hashes.length);
    expect(node.connections).toBeGreaterThan(1);
    expectEveryExtrinsicVerifies(w.subnet);
    // No seat: the cached (cold-start) answer says so; nothing is stale.
    expect(r.live.alarms.has("winner_cache_stale")).toBe(false);
  });

  it("a stop mid-evaluation leaves it resumable; the restart finishes it and posts one verdict once; a further restart does not re-evaluate", async () => {
    const w = await world();
    const epoch = w.fake.openEpoch({
      packBytes: pinBytes,
      challengerHotkey: w.subnet.challenger,
      specNumber: 900,
    });
    const opts: CorePipelineOptions = {
      scenarios: ["a", "b", "c"],
      script: () => ({ quality: 0.75, ms: 700 }),
    };
    const first = await startDaemon(w, opts);
    const firstRepo = () => new EvaluationRepo(first.daemon.database!, first.daemon.network!);
    await until(
      () =>
        firstRepo()
          .running()
          .some((e) =>
            firstRepo()
              .episodes(e.id)
              .some((x) => x.status === "final"),
          ),
      20_000,
      "one finished episode",
    );
    await first.daemon.stop();
    // At least the running episode was aborted (on a loaded machine the next may have been dispatched too).
    expect(first.seen.episodes.filter((e) => e.outcome === "aborted").length).toBeGreaterThanOrEqual(1);
    expect(scoreRequests(w.fake, epoch.challenge_epoch_id)).toHaveLength(0);
    const dbPath = w.config.dbPath;
    {
      const db = openDb(dbPath);
      const evals = new EvaluationRepo(db, FINNEY).running();
      expect(evals).toHaveLength(1);
      expect(evals[0]).toMatchObject({
        source: "epoch",
        epochId: String(epoch.challenge_epoch_id),
        status: "running",
      });
      const eps = new EvaluationRepo(db).episodes(evals[0]!.id);
      // Finished work is kept, unfinished work is marked for a re-run; nothing else.
      const statuses = eps.map((e) => e.status);
      expect(statuses).toContain("final");
      expect(statuses).toContain("interrupted");
      expect(statuses.every((x) => x === "final" || x === "interrupted")).toBe(true);
      expect(new ScoredEpochRepo(db, FINNEY).has(epoch.challenge_epoch_id, w.wallet.ss58)).toBe(false);
      db.close();
    }
    const interruptedId = first.seen.episodes[0]!.evaluationId;

    const second = await startDaemon(w, opts);
    await until(
      () => (w.fake.scores.get(epoch.challenge_epoch_id)?.length ?? 0) === 1,
      30_000,
      "the resumed verdict",
    );
    // Same evaluation, the finished scenario not run again.
    expect(new Set(second.seen.episodes.map((e) => e.evaluationId))).toEqual(new Set([interruptedId]));
    const doneFirst = first.seen.episodes.filter((e) => e.outcome === "done").map((e) => e.scenario);
    expect(second.seen.episodes.map((e) => e.scenario)).not.toContain(doneFirst[0]);
    expect(w.fake.scores.get(epoch.challenge_epoch_id)![0]).toMatchObject({ challenger: { score: 2.25 } });
    await second.daemon.stop();

    const third = await startDaemon(w, opts);
    await until(() => (third.live.loops.get("eval")?.ticks ?? 0) >= 5, 10_000, "eval ticks");
    expect(third.seen.calls).toHaveLength(0);
    expect(scoreRequests(w.fake, epoch.challenge_epoch_id).filter((q) => q.status === 200)).toHaveLength(1);
    expect(third.live.epoch).toMatchObject({ epochId: epoch.challenge_epoch_id, decision: "already_scored" });
  });

  it("a pack that cannot be fetched or does not match its hash is a pack_verify_failed rejection, posted", async () => {
    const w = await world();
    // On a real network a spec is the subnet's: 26 is one this validator knows.
    const missing = w.fake.openEpoch({ packUrl: `${w.fake.url}/packs/0000.json`, specNumber: 26 });
    const r = await startDaemon(w, { scenarios: ["a"] });
    await until(
      () => (w.fake.scores.get(missing.challenge_epoch_id)?.length ?? 0) === 1,
      15_000,
      "the rejection",
    );
    expect(w.fake.scores.get(missing.challenge_epoch_id)![0]).toMatchObject({
      spec_number: 26,
      challenger: { score: 0, qualified: false, rejected: true },
    });
    // Every rejection the daemon posts is upstream's bare code, whichever layer made it.
    const detail = (id: number) =>
      (w.fake.scores.get(id)![0]!.challenger as { rejection_detail: string }).rejection_detail;
    expect(detail(missing.challenge_epoch_id)).toBe("pack_verify_failed");
    expect(r.seen.calls).toHaveLength(0);

    const wrong = w.fake.openEpoch({ packBytes: pinBytes, packHash: "ef".repeat(32), specNumber: 900 });
    await until(
      () => (w.fake.scores.get(wrong.challenge_epoch_id)?.length ?? 0) === 1,
      15_000,
      "the second rejection",
    );
    expect(w.fake.scores.get(wrong.challenge_epoch_id)![0]).toMatchObject({
      challenger: { score: 0, rejected: true },
    });
    expect(detail(wrong.challenge_epoch_id)).toBe("pack_verify_failed");
    // Both verdicts end delivered, nothing left pending. (The fake records a POST before the daemon
    // has read its answer and marked the row, so wait for the outbox rather than sample it once.)
    const outbox = new VerdictOutboxRepo(r.daemon.database!, r.daemon.network!);
    await until(() => outbox.counts().delivered === 2, 10_000, "both rejections delivered");
    expect(outbox.counts()).toMatchObject({ pending: 0, delivered: 2 });
  });

  it("a discarded run is not posted and raises an alarm and the heartbeat's health_issue, which a posted score clears; an epoch that moves on mid-evaluation is not posted", async () => {
    const w = await world({ HEARTBEAT_INTERVAL_S: "1" });
    const bad = w.fake.openEpoch({ packBytes: pinBytes, specNumber: 900 });
    let infra = true;
    const r = await startDaemon(w, {
      scenarios: ["a", "b"],
      script: () => ({ quality: 0.5, infra, ms: 300 }),
    });
    await until(() => r.live.alarms.has("evaluation_discarded"), 20_000, "the discard alarm");
    expect(r.live.alarms.get("evaluation_discarded")).toMatchObject({ severity: "error" });
    expect(scoreRequests(w.fake, bad.challenge_epoch_id)).toHaveLength(0);
    expect(
      new ScoredEpochRepo(r.daemon.database!, r.daemon.network!).has(bad.challenge_epoch_id, w.wallet.ss58),
    ).toBe(false);
    await until(() => r.live.epoch?.decision === "retry_backoff", 5_000, "the retry back-off");
    // Every episode failed for our own infrastructure (no model call): upstream's PR #331 discard.
    await until(
      () => w.fake.heartbeats.some((h) => typeof h.health_issue === "string"),
      10_000,
      "a heartbeat with the health issue",
    );
    const sick = w.fake.heartbeats.find((h) => typeof h.health_issue === "string")!;
    expect(sick.health_issue).toMatch(
      new RegExp(`^infra: evaluation discarded \\(validator_infra, epoch ${bad.challenge_epoch_id}\\): `),
    );
    expect([...String(sick.health_issue)].length).toBeLessThanOrEqual(256);

    // The next epoch: healthy episodes, but the platform moves on after the first one.
    infra = false;
    const moving = w.fake.openEpoch({ packBytes: pinBytes, specNumber: 900 });
    await until(
      () => r.seen.calls.some((c) => c.epochId === moving.challenge_epoch_id),
      10_000,
      "the next evaluation",
    );
    const before = r.seen.episodes.length;
    await until(() => r.seen.episodes.slice(before).some((e) => e.outcome === "done"), 10_000, "an episode");
    const next = w.fake.openEpoch({ packBytes: pinBytes, specNumber: 900 });
    await until(
      () => (w.fake.scores.get(next.challenge_epoch_id)?.length ?? 0) === 1,
      30_000,
      "the new epoch's verdict",
    );
    expect(scoreRequests(w.fake, moving.challenge_epoch_id)).toHaveLength(0);
    expect(r.logs.some((l) => l.includes('"eval.epoch_moved_on"'))).toBe(true);
    expect(r.logs.some((l) => l.includes('"eval.aborted_not_posted"'))).toBe(true);
    expect(r.live.alarms.has("evaluation_discarded")).toBe(false);
    // The posted score cleared the health issue: the next heartbeat carries none, and last_eval_at.
    const beats = w.fake.heartbeats.length;
    await until(() => w.fake.heartbeats.length > beats + 1, 10_000, "heartbeats after the score");
    expect(w.fake.heartbeats.at(-1)).not.toHaveProperty("health_issue");
    expect(w.fake.heartbeats.at(-1)).toMatchObject({ last_eval_at: expect.any(Number) });
  });

  it("raises the consensus divergence alarm and clears it when the server and the local aggregate agree again", async () => {
    const w = await world({ STAKE_WEIGHTED_CONSENSUS: "false" });
    const votes = (scores: number[]) =>
      scores.map((s, i) => ({
        validator_hotkey: `5V${i}`,
        validator_stake: "100",
        challenger_pack_hash: "cd".repeat(32),
        challenger_score: s,
        challenger_qualified: true,
        challenger_rejected: false,
      }));
    const response = (score: number) => ({
      ...seat(w.subnet),
      winner: { ...seat(w.subnet).winner, score },
      finalized_epoch: {
        challenge_epoch_id: 7,
        challenger_hotkey: w.subnet.winner,
        challenger_pack_hash: "cd".repeat(32),
        outcome: "winner_replaced",
        finalized_at: "2026-01-01T00:00:00Z",
        spec_number: 27,
      },
      submissions: votes([3, 8, 8, 8, 8, 9]),
    });
    w.fake.winnerResponse = response(22 / 3);
    const r = await startDaemon(w, { scenarios: ["a"] });
    await until(() => r.live.alarms.has("consensus_divergence"), 10_000, "the divergence alarm");
    expect(r.live.alarms.get("consensus_divergence")!.message).toContain("epoch 7");
    w.fake.winnerResponse = response(8);
    await until(() => !r.live.alarms.has("consensus_divergence"), 10_000, "the alarm to clear");
  });
});
