import { describe, expect, it } from "vitest";
import { type Receipt, ReceiptQueue, type ReceiptSink } from "../../src/meter/receipt.js";
import { openDb, ReceiptRepo } from "../../src/store/index.js";

const receipt = (seq: number, over: Partial<Receipt> = {}): Receipt => ({
  episode_id: "ep-q",
  seq,
  started_at: "2026-01-01T00:00:00.000Z",
  model: "kimi-k3",
  status: 200,
  upstream_status: 200,
  stream: true,
  prompt_tokens: 10,
  cached_tokens: 2,
  completion_tokens: 3,
  usd: 0.00004,
  usd_pico: "40000000",
  reserved_usd: 0.001,
  reserved_pico: "1000000000",
  max_tokens: 100,
  clamped: false,
  retries: 0,
  ttfb_ms: 1.5,
  duration_ms: 3.25,
  request_id: "req-1",
  content_sha: "0123456789abcdef",
  tool_sha: null,
  tool_calls: 0,
  finish_reason: "stop",
  truncated: false,
  usage_estimated: false,
  error_code: null,
  ...over,
});

describe("receipt queue", () => {
  it("never writes inline: flushes on a short timer, at the batch size (next tick), and on demand", async () => {
    const batches: number[] = [];
    const sink: ReceiptSink = { insertMany: (rows) => void batches.push(rows.length) };
    const q = new ReceiptQueue(sink, { flushMs: 20, maxBatch: 3 });
    q.push(receipt(1));
    q.push(receipt(2));
    expect(batches).toEqual([]);
    await new Promise((r) => setTimeout(r, 40));
    expect(batches).toEqual([2]);
    for (let k = 3; k <= 5; k++) q.push(receipt(k));
    expect(batches).toEqual([2]);
    await new Promise((r) => setImmediate(r));
    expect(batches).toEqual([2, 3]);
    q.push(receipt(6));
    q.flush();
    expect(batches).toEqual([2, 3, 1]);
    expect(q.written).toBe(6);
  });

  it("a failing sink is counted and does not throw into the hot path", () => {
    const q = new ReceiptQueue({
      insertMany: () => {
        throw new Error("disk full");
      },
    });
    q.push(receipt(1));
    expect(() => q.flush()).not.toThrow();
    expect(q.failures).toBe(1);
    expect(q.pending).toBe(0);
  });

  it("the SQLite repository stores receipts exactly, pico-dollars beyond 2^53 included", () => {
    const repo = new ReceiptRepo(openDb(":memory:"));
    const big = receipt(2, {
      usd_pico: "9007199254740993",
      usd: 9007.2,
      error_code: "upstream_cut",
      ttfb_ms: null,
    });
    repo.insertMany([receipt(1), big]);
    const back = repo.listByEpisode("ep-q");
    expect(back[0]).toEqual(receipt(1));
    expect(back[1]!.usd_pico).toBe("9007199254740993");
    expect(back[1]).toMatchObject({ error_code: "upstream_cut", ttfb_ms: null, stream: true });
    expect(repo.countByEpisode("ep-q")).toBe(2);
    expect(repo.listByEpisode("other")).toEqual([]);
  });
});
