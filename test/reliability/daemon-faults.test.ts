/**
 * The platform down for an hour, with the daemon running: the real Daemon (real SQLite, the real
 * chain client against the subtensor test node, the fake platform over HTTP; the evaluation core
 * with a scripted episode runner). The hour passes on the daemon's clock (an offset on `now`), not
 * on the wall: the winner cache, the outbox's due times and the heartbeat all read that clock.
 *
 * Asserted: weights keep going to the cached winner while the cache is younger than
 * WINNER_CACHE_TTL_S, and to the owner (burn) with the `winner_cache_stale` alarm once it is older;
 * the verdict waits in the outbox, is retried with back-off throughout, and is delivered exactly
 * once when the platform answers again; the loops never stop and the process never crashes.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { VerdictOutboxRepo, WeightsRepo } from "../../src/store/index.js";
import type { FakeRoute } from "../fakes/platform.js";
import { until } from "../helpers/daemon.js";
import {
  readPinPack,
  runCleanups,
  scoreRequests,
  seat,
  setWeightsOf,
  startDaemon,
  world,
} from "../helpers/daemon-world.js";

const ROUTES: FakeRoute[] = [
  "winner.current",
  "epoch.current",
  "epoch.score",
  "epoch.scenario_progress",
  "validators.heartbeat",
  "logs.upload",
  "logs.cycle",
];
const MIN = 60_000;

let pinBytes: Buffer;
beforeAll(async () => {
  pinBytes = await readPinPack();
});
afterEach(runCleanups);

describe("the platform down for an hour", () => {
  it("weights from the winner cache, then burn when it goes stale; the verdict delivered once when it returns", async () => {
    // The cache is trusted for 75 minutes: an hour's outage keeps the seat, a longer one does not.
    // One clock for the daemon and the platform (its ±5 min signature check), moved by `offset`.
    let offset = 0;
    const clock = () => Date.now() + offset;
    const w = await world({ WINNER_CACHE_TTL_S: String(75 * 60) }, clock);
    w.fake.winnerResponse = seat(w.subnet);
    const epoch = w.fake.openEpoch({
      packBytes: pinBytes,
      challengerHotkey: w.subnet.challenger,
      challengerUid: w.subnet.uids.challenger,
      specNumber: 900,
    });
    // Score POSTs fail from the start, so the verdict is in the outbox when the platform goes dark.
    w.fake.inject("epoch.score", { kind: "status", status: 503 }, 1_000_000);
    const r = await startDaemon(w, { scenarios: ["alpha"], script: () => ({ quality: 1 }) }, {}, clock);
    const db = r.daemon.database!;
    const outbox = new VerdictOutboxRepo(db, r.daemon.network!);
    const weights = new WeightsRepo(db, r.daemon.network!);
    const entry = () => outbox.get(epoch.challenge_epoch_id, w.wallet.ss58);
    /** Wait for `cond` while blocks keep coming, so a weight window is always ahead. */
    const withBlocks = (cond: () => boolean, label: string) => {
      let last = 0;
      return until(
        () => {
          if (performance.now() - last > 1_000) {
            last = performance.now();
            w.subnet.node.advance(6);
          }
          return cond();
        },
        30_000,
        label,
      );
    };
    await until(() => entry() !== undefined, 30_000, "the verdict in the outbox");
    await until(() => weights.lastIncluded(11)?.reason === "winner", 30_000, "weights to the seated winner");

    // Down: every route answers 503.
    for (const route of ROUTES) w.fake.inject(route, { kind: "status", status: 503 }, 1_000_000);
    const attempts0 = entry()!.attempts;
    // Newest first.
    const included = () => weights.recent(11, 500).filter((a) => a.outcome === "included");
    const n0 = included().length;
    // An hour passes on the daemon's clock in 5-minute steps; blocks pass so weight windows open.
    for (let t = 5; t <= 60; t += 5) {
      offset = t * MIN;
      w.subnet.node.advance(6);
      await new Promise((res) => setTimeout(res, 400));
    }
    await withBlocks(() => included().length > n0, "weights during the outage");
    // Still the winner: the cache (filled before the outage) is younger than its 75 minutes.
    expect(included()[0]).toMatchObject({ reason: "winner", uids: [w.subnet.uids.winner] });
    expect(r.live.alarms.has("platform_unreachable")).toBe(true);
    // The verdict kept being retried, and is still waiting: nothing delivered, nothing dropped.
    expect(entry()!.attempts).toBeGreaterThan(attempts0);
    expect(entry()!.state).not.toBe("delivered");
    expect(w.fake.scores.get(epoch.challenge_epoch_id) ?? []).toHaveLength(0);

    // Past the cache's horizon: burn to the owner, with the alarm.
    offset = 90 * MIN;
    const m = included().length;
    await withBlocks(
      () => included().length > m && included()[0]!.reason === "stale_winner_cache",
      "the burn",
    );
    expect(included()[0]).toMatchObject({ uids: [w.subnet.uids.owner] });
    expect(r.live.alarms.has("winner_cache_stale")).toBe(true);

    // Back: the verdict goes out once, the seat is read again, weights return to the winner.
    w.fake.clearFaults();
    await until(() => entry()?.state === "delivered", 30_000, "delivery after the outage");
    expect(w.fake.scores.get(epoch.challenge_epoch_id)).toHaveLength(1);
    const accepted = scoreRequests(w.fake, epoch.challenge_epoch_id).filter((q) => q.status === 200);
    expect(accepted).toHaveLength(1);
    const k = included().length;
    await withBlocks(() => included().length > k && included()[0]!.reason === "winner", "the seat again");
    await until(() => !r.live.alarms.has("winner_cache_stale"), 10_000, "the stale alarm cleared");
    // Every loop kept ticking through it, and none was ever sent twice.
    // (The heartbeat's interval is wall time, 600 s: it ticked at start.)
    for (const name of ["eval", "winner", "outbox", "weights"])
      expect(r.live.loops.get(name)?.ticks).toBeGreaterThan(1);
    expect(r.live.loops.get("heartbeat")?.ticks).toBeGreaterThanOrEqual(1);
    const hashes = setWeightsOf(w.subnet).map((x) => x.hash);
    expect(new Set(hashes).size).toBe(hashes.length);
    console.log(
      `platform down 60 min (+30 past the cache): ${entry()!.attempts} score attempts, 1 delivered; ${included().length} weights included (winner → burn → winner)`,
    );
  }, 240_000);
});
