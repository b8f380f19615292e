import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  countBilledChars,
  countJsonChars,
  estimatePromptTokens,
  UNBILLED_KEYS,
} from "../../src/meter/estimate.js";
import { formatUsd6, pricePerMillionToPico, usdToPico } from "../../src/meter/money.js";

/** Reference: build the compact JSON and count code points. */
function reference(v: unknown): { ascii: number; nonAscii: number } {
  let ascii = 0;
  let nonAscii = 0;
  for (const ch of JSON.stringify(v)) {
    if (ch.codePointAt(0)! < 128) ascii++;
    else nonAscii++;
  }
  return { ascii, nonAscii };
}

describe("prompt estimate", () => {
  it("counts the ASCII characters and non-ASCII code points of compact JSON (no ASCII escaping)", () => {
    fc.assert(
      fc.property(fc.jsonValue({ stringUnit: "binary" }), (v) => {
        expect(countJsonChars(v)).toEqual(reference(v));
      }),
      { numRuns: 1000 },
    );
  });

  it("matches Python's rule on a real request: billed fields only, ⌈(ascii/3 + non-ascii)·1.25⌉", () => {
    // Computed with CPython: json.dumps(billed, ensure_ascii=False, separators=(",", ":")) → 288 ASCII, 8 non-ASCII.
    const body = {
      model: "kimi-k3",
      messages: [
        { role: "system", content: "You are an agent. Use tools." },
        { role: "user", content: 'Fix the bug in /app/main.py — ünïcödé 日本語 "quoted"\n\ttab' },
      ],
      tools: [
        {
          type: "function",
          function: {
            name: "terminal",
            parameters: { type: "object", properties: { command: { type: "string" } } },
          },
        },
      ],
      max_tokens: 500,
      temperature: 0.2,
      stream: true,
    };
    expect(estimatePromptTokens(body)).toBe(130);
  });

  it("ignores every generation knob", () => {
    const base = { messages: [{ role: "user", content: "hi" }] };
    const knobs: Record<string, unknown> = {};
    for (const k of UNBILLED_KEYS) knobs[k] = "x".repeat(1000);
    expect(estimatePromptTokens({ ...base, ...knobs })).toBe(estimatePromptTokens(base));
  });

  it("a non-ASCII character is a whole token, astral characters once", () => {
    const a = estimatePromptTokens({ messages: ["a".repeat(300)] });
    const b = estimatePromptTokens({ messages: ["日".repeat(300)] });
    const c = estimatePromptTokens({ messages: ["😀".repeat(300)] });
    expect(b - a).toBe(Math.ceil(((300 * 3 + 17) * 5) / 12) - Math.ceil(((300 + 17) * 5) / 12));
    expect(c).toBe(b);
  });
});

describe("money", () => {
  it("prices become exact pico-dollars per token; finer prices are refused", () => {
    expect(pricePerMillionToPico(0.045)).toBe(45_000n);
    expect(pricePerMillionToPico(9.75)).toBe(9_750_000n);
    expect(pricePerMillionToPico(0.000001)).toBe(1n);
    expect(pricePerMillionToPico(0)).toBe(0n);
    expect(() => pricePerMillionToPico(0.0000001)).toThrow();
    expect(() => pricePerMillionToPico(0.1234567)).toThrow();
  });

  it("caps convert without float drift and remaining is floored to 6 decimals", () => {
    expect(usdToPico(0.3)).toBe(300_000_000_000n);
    expect(usdToPico(1000)).toBe(1_000_000_000_000_000n);
    expect(usdToPico(0.1 + 0.2)).toBe(300_000_000_000n);
    expect(formatUsd6(299_999_999_999n)).toBe("0.299999");
    expect(formatUsd6(-5n)).toBe("0.000000");
    expect(formatUsd6(12_345_678_000_000n)).toBe("12.345678");
  });
});

describe("billed part", () => {
  it("property: equals the count of the body serialised without its unbilled keys", () => {
    const keyArb = fc.oneof(fc.constantFrom(...UNBILLED_KEYS), fc.string({ unit: "binary", maxLength: 6 }));
    fc.assert(
      fc.property(fc.dictionary(keyArb, fc.jsonValue({ stringUnit: "binary", maxDepth: 2 })), (body) => {
        const billed: Record<string, unknown> = {};
        for (const [k, v] of Object.entries(body)) if (!UNBILLED_KEYS.has(k)) billed[k] = v;
        expect(countBilledChars(body)).toEqual(reference(billed));
      }),
      { numRuns: 1000 },
    );
  });
});
