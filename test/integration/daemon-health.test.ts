/**
 * Health's timeline against the fakes (README, "Health"): the first failed request of ANY loop
 * starts the chain's or the platform's outage clock, and `degraded` comes DEGRADED_AFTER_S later —
 * not when a slower loop (the winner refresh every minute, the weight loop after three failures)
 * gets round to its alarm. /readyz's body says the status it is served with.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createLogger } from "../../src/log.js";
import { startStatusServer } from "../../src/web/index.js";
import { until } from "../helpers/daemon.js";
import { runCleanups, seat, setWeightsOf, startDaemon, world } from "../helpers/daemon-world.js";

afterEach(runCleanups);

interface Ready {
  status: number;
  body: { state: string; status: number; ready: boolean; checks: { upstreams: { unreachable: string[] } } };
}

async function readyz(url: string): Promise<Ready> {
  const r = await fetch(`${url}/readyz`);
  return { status: r.status, body: (await r.json()) as Ready["body"] };
}

/** /readyz once it answers 503 (the clock's threshold is 1 s here: within 20 s, or it started late). */
async function unready(url: string): Promise<Ready> {
  let last: Ready | undefined;
  await until(
    async () => {
      last = await readyz(url);
      return last.status === 503;
    },
    20_000,
    "/readyz 503",
  );
  return last!;
}

async function running(env: Record<string, string>) {
  // Weights every 5 s: a tick hung on the lost chain is not a stale loop within the test's seconds.
  const w = await world({ DEGRADED_AFTER_S: "1", STATUS_PORT: "0", WEIGHTS_INTERVAL_S: "5", ...env });
  w.fake.winnerResponse = seat(w.subnet);
  // The winner refresh once a minute (upstream's pace): its alarm alone would come a minute late.
  const r = await startDaemon(w, { scenarios: ["alpha"] }, { winnerPollMs: 60_000 });
  const server = await startStatusServer({
    live: r.live,
    db: r.daemon.database!,
    network: r.daemon.network ?? null,
    config: w.config,
    log: createLogger({ level: "silent" }),
  });
  return { w, r, server };
}

describe("health: the outage clock starts at the first failed request", () => {
  it("the platform gone: the eval loop's first failure starts it; degraded a second later, before the winner loop looked", async () => {
    const { w, r, server } = await running({});
    try {
      await until(async () => (await readyz(server.url)).status === 200, 20_000, "healthy");
      const ok = await readyz(server.url);
      expect(ok).toMatchObject({ status: 200, body: { state: "healthy", status: 200, ready: true } });
      const winnerTicks = r.live.loops.get("winner")?.ticks ?? 0;
      const before = Date.now();
      await w.fake.close();
      const degraded = await unready(server.url);
      // The body says what the answer is.
      expect(degraded.body).toMatchObject({ state: "degraded", status: 503, ready: false });
      expect(degraded.body.checks.upstreams.unreachable).toEqual(["platform"]);
      // Counted from the eval loop's first failure (every 0.2 s here), not the winner loop's.
      expect(r.live.loops.get("winner")?.ticks ?? 0).toBe(winnerTicks);
      expect(r.live.loops.get("eval")!.failures).toBeGreaterThan(0);
      const since = r.live.outageSince("platform")!;
      expect(since).toBeGreaterThanOrEqual(before);
      expect(since).toBeLessThanOrEqual(r.live.loops.get("eval")!.lastError!.at);
    } finally {
      await server.close();
    }
  }, 60_000);

  it("the chain gone: the lost socket starts it, while the weight loop waits for its window", async () => {
    const { w, r, server } = await running({ EVAL_ENABLED: "0" });
    try {
      await until(() => setWeightsOf(w.subnet).some((x) => x.outcome === "success"), 20_000, "weights");
      await until(async () => (await readyz(server.url)).status === 200, 20_000, "healthy");
      const before = Date.now();
      await w.subnet.node.stop();
      const degraded = await unready(server.url);
      expect(degraded.body).toMatchObject({ state: "degraded", status: 503 });
      expect(degraded.body.checks.upstreams.unreachable).toEqual(["chain"]);
      expect(r.live.outageSince("chain")!).toBeGreaterThanOrEqual(before);
    } finally {
      await server.close();
    }
  }, 60_000);
});
