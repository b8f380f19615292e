import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Meter } from "../../src/meter/index.js";
import {
  compilePrices,
  loadAllowlist,
  loadPriceTable,
  parseAllowlist,
  parsePriceTable,
  priceTableHash,
} from "../../src/meter/prices.js";

const SPEC25: Record<string, [number, number, number]> = {
  "deepseek-v4-flash-0731": [0.045, 0.09, 0.009],
  "deepseek-v4.1-flash": [0.04, 0.08, 0.008],
  "qwen3.6-35b-a3b": [0.045, 0.3, 0.015],
  "qwen3.8-27b": [0.045, 0.32, 0.015],
  "glm-5.3-flash": [0.135, 0.45, 0.027],
  "glm-5.2": [0.68, 1.5, 0.18],
  "glm-5.3": [0.98, 3.08, 0.18],
  "kimi-k3": [1.95, 9.75, 0.195],
};

describe("allowlist and price table", () => {
  it("the repo files hold the 8 models at SPEC 25 prices", () => {
    const allow = loadAllowlist();
    const table = loadPriceTable();
    expect(allow.models).toEqual(Object.keys(SPEC25));
    for (const [m, [p, c, r]] of Object.entries(SPEC25))
      expect(table.models[m]).toEqual({ prompt: p, completion: c, cache_read: r });
    const compiled = compilePrices(allow, table);
    expect(compiled.get("kimi-k3")).toEqual({
      prompt: 1_950_000n,
      completion: 9_750_000n,
      cacheRead: 195_000n,
    });
    expect(compiled.get("deepseek-v4.1-flash")).toEqual({
      prompt: 40_000n,
      completion: 80_000n,
      cacheRead: 8_000n,
    });
  });

  it("the table hash ignores formatting and changes with any price", () => {
    const table = loadPriceTable();
    const h = priceTableHash(table);
    expect(h).toMatch(/^[0-9a-f]{64}$/);
    const reordered = parsePriceTable(
      JSON.parse(
        JSON.stringify({
          models: table.models,
          unit: table.unit,
          currency: table.currency,
          spec: table.spec,
        }),
      ),
    );
    expect(priceTableHash(reordered)).toBe(h);
    const changed = structuredClone(table);
    changed.models["kimi-k3"]!.completion = 9.76;
    expect(priceTableHash(changed)).not.toBe(h);
  });

  it("fails closed: an allowlisted model without a price stops the meter from starting", () => {
    const allowlist = parseAllowlist({ models: ["kimi-k3", "mystery-1"] });
    expect(
      () => new Meter({ upstreamUrl: "http://127.0.0.1:9/v1", allowlist, prices: loadPriceTable() }),
    ).toThrow(
      expect.objectContaining({ code: "price_missing", message: expect.stringContaining("mystery-1") }),
    );
  });

  it("rejects malformed files with a stable code", () => {
    const dir = mkdtempSync(join(tmpdir(), "meter-prices-"));
    const bad = join(dir, "p.json");
    writeFileSync(bad, JSON.stringify({ models: { x: { prompt: -1, completion: 1, cache_read: 0 } } }));
    expect(() => loadPriceTable(bad)).toThrow(expect.objectContaining({ code: "price_table_invalid" }));
    writeFileSync(
      bad,
      JSON.stringify({ models: { x: { prompt: 0.1234567, completion: 1, cache_read: 0 } } }),
    );
    expect(() => loadPriceTable(bad)).toThrow(expect.objectContaining({ code: "price_table_invalid" }));
    writeFileSync(bad, "{not json");
    expect(() => loadPriceTable(bad)).toThrow(expect.objectContaining({ code: "price_table_invalid" }));
    expect(() => loadAllowlist(join(dir, "missing.json"))).toThrow(
      expect.objectContaining({ code: "file_not_readable" }),
    );
    expect(() => parseAllowlist({ models: ["a", "a"] })).toThrow(
      expect.objectContaining({ code: "allowlist_invalid" }),
    );
    expect(() => parseAllowlist({ models: [] })).toThrow(
      expect.objectContaining({ code: "allowlist_invalid" }),
    );
  });
});
