/**
 * Where a request body is scanned (src/meter/scan-pool.ts): large bodies in a worker thread, small
 * ones on the loop, a bounded amount per turn. Same results either way.
 */
import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/log.js";
import { InvalidRequest, scanChatBody } from "../../src/meter/request.js";
import { ScanPool } from "../../src/meter/scan-pool.js";

const MiB = 1024 * 1024;

/** A body of short floats under a key repeated inside a message (the shape issue 36 priced at ~0.4 s/MiB). */
function floatsBody(bytes: number): Buffer {
  const n = Math.ceil(bytes / 4);
  return Buffer.from(
    `{"model":"kimi-k3","messages":[{"role":"user","content":"x","a":1,"a":[${new Array(n).fill("0.1").join(",")}]}]}`,
  );
}

/** Count the turns of the event loop until stopped. */
function loopTurns(): { stop: () => number } {
  let turns = 0;
  let running = true;
  const tick = () => {
    if (!running) return;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  return {
    stop: () => {
      running = false;
      return turns;
    },
  };
}

let pool: ScanPool | undefined;
afterEach(async () => {
  await pool?.close();
  pool = undefined;
});

describe("the scan pool", () => {
  it("a large body is scanned in the worker: the inline result, the same bytes back, the loop turning meanwhile", async () => {
    pool = new ScanPool(silentLogger);
    const body = floatsBody(4 * MiB);
    const inline = scanChatBody(body);
    const turns = loopTurns();
    const got = await pool.scan(Buffer.from(body));
    expect(turns.stop()).toBeGreaterThan(0);
    expect(got.scan).toEqual(inline);
    expect(got.raw.equals(body)).toBe(true);
    // A body sharing its memory with others (a slice) is copied, not taken from them.
    const shared = Buffer.concat([Buffer.from("  "), body]).subarray(2);
    expect((await pool.scan(shared)).scan).toEqual(inline);
    expect(shared.equals(body)).toBe(true);
  });

  it("a body the meter refuses is refused with the same message from the worker", async () => {
    pool = new ScanPool(silentLogger, { inlineBytes: 16 });
    const bad = Buffer.from('{"messages":[{"role":"user","content":[{"type":"video_url"}]}], "x": 1}');
    const inline = (() => {
      try {
        scanChatBody(bad);
      } catch (err) {
        return err;
      }
    })();
    expect(inline).toBeInstanceOf(InvalidRequest);
    await expect(pool.scan(Buffer.from(bad))).rejects.toThrow(new InvalidRequest((inline as Error).message));
    await expect(pool.scan(Buffer.from('{"a":'))).rejects.toBeInstanceOf(InvalidRequest);
    expect(pool.offloaded).toBe(0);
  });

  it("small bodies are scanned on the loop, no more than turnBytes of them per turn", async () => {
    pool = new ScanPool(silentLogger, { inlineBytes: MiB, turnBytes: 100 * 1024 });
    const body = floatsBody(60 * 1024);
    const turns = loopTurns();
    const scans = await Promise.all(Array.from({ length: 10 }, () => pool!.scan(body)));
    // One body fits in a turn's budget, two do not: ten bodies take at least nine turns.
    expect(turns.stop()).toBeGreaterThanOrEqual(9);
    for (const s of scans) expect(s.raw).toBe(body);
  });
});
