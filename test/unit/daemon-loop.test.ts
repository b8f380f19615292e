import { describe, expect, it } from "vitest";
import { Loop, loopBackoffMs } from "../../src/daemon/index.js";
import { InfraError } from "../../src/errors.js";
import { silentLogger } from "../../src/log.js";
import { LiveStatus } from "../../src/status/index.js";
import { poller } from "../helpers/wait.js";

const until = poller({ ms: 3_000, everyMs: 5 });

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("Loop", () => {
  it("ticks at once, then every interval, and reports each tick to LiveStatus", async () => {
    const live = new LiveStatus();
    let n = 0;
    const loop = new Loop({ name: "t", intervalMs: 20, tick: async () => void n++ }, live, silentLogger);
    expect(live.loops.get("t")).toMatchObject({ ticks: 0, intervalMs: 20 });
    loop.start();
    await until(() => n >= 3);
    await loop.stop("stop");
    expect(live.loops.get("t")!.ticks).toBeGreaterThanOrEqual(3);
    expect(live.loops.get("t")!.failures).toBe(0);
  });

  it("survives a throwing tick: logs it, counts it, backs off, and carries on", async () => {
    const live = new LiveStatus();
    const delays: Array<[number, unknown]> = [];
    let n = 0;
    const loop = new Loop(
      {
        name: "flaky",
        intervalMs: 10,
        tick: async () => {
          n++;
          if (n <= 2) throw new InfraError("platform_unreachable", "down");
          if (n === 3) throw new TypeError("a bug");
          return undefined;
        },
        backoffMs: (failures, err) => {
          delays.push([failures, err]);
          return 5;
        },
      },
      live,
      silentLogger,
    );
    loop.start();
    await until(() => n >= 5);
    await loop.stop("stop");
    expect(delays.map(([f]) => f)).toEqual([1, 2, 3]);
    expect((delays[0]![1] as InfraError).code).toBe("platform_unreachable");
    const state = live.loops.get("flaky")!;
    expect(state.failures).toBe(3);
    expect(state.lastError).toMatchObject({ code: "loop_tick_failed", message: "a bug" });
    expect(state.lastOkAt).toBeDefined();
  });

  it("uses the delay the tick asks for, and wake() cuts a pause short", async () => {
    const live = new LiveStatus();
    const at: number[] = [];
    const loop = new Loop(
      {
        name: "w",
        intervalMs: 10,
        tick: async () => {
          at.push(performance.now());
          return 60_000;
        },
      },
      live,
      silentLogger,
    );
    loop.start();
    await until(() => at.length === 1);
    await wait(50);
    expect(at).toHaveLength(1);
    loop.wake();
    await until(() => at.length === 2);
    // A wake while a tick runs is not lost: the next pause is skipped.
    await loop.stop("stop");
  });

  it("stop() aborts with the given reason and waits for the tick in progress", async () => {
    const live = new LiveStatus();
    let seen: unknown;
    let finished = false;
    const loop = new Loop(
      {
        name: "long",
        intervalMs: 10,
        tick: async (signal) => {
          await new Promise<void>((resolve) =>
            signal.addEventListener("abort", () => resolve(), { once: true }),
          );
          seen = signal.reason;
          await wait(30); // cleaning up after the abort
          finished = true;
          return undefined;
        },
      },
      live,
      silentLogger,
    );
    loop.start();
    await wait(20);
    const reason = { code: "shutdown" };
    expect(await loop.stop(reason)).toBe("stopped");
    expect(seen).toBe(reason);
    expect(finished).toBe(true);
  });

  it("stop() gives up waiting after its grace period", async () => {
    const loop = new Loop(
      { name: "stuck", intervalMs: 10, tick: () => new Promise<undefined>(() => {}) },
      new LiveStatus(),
      silentLogger,
    );
    loop.start();
    await wait(10);
    expect(await loop.stop("stop", 30)).toBe("timeout");
  });

  it("backs off from the interval, doubling, within [1 s, max(interval, 5 min)]", () => {
    expect([1, 2, 3, 10].map((n) => loopBackoffMs(n, 10_000))).toEqual([10_000, 20_000, 40_000, 300_000]);
    expect(loopBackoffMs(1, 100)).toBe(1_000);
    expect(loopBackoffMs(5, 600_000)).toBe(600_000);
  });
});
