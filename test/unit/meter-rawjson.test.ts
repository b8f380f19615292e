import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { countBilledChars, UNBILLED_KEYS } from "../../src/meter/estimate.js";
import { scanRequest, spliceMembers } from "../../src/meter/rawjson.js";

const billed = (k: string) => !UNBILLED_KEYS.has(k);

/** A JSON serialiser with the freedoms real clients take: whitespace, \u escapes, \/, exponents. */
function looseJson(v: unknown, r: () => number): string {
  const ws = () => [" ", "", "\n  ", "\t", ""][Math.floor(r() * 5)]!;
  if (typeof v === "string") {
    let out = '"';
    for (const ch of v) {
      const cp = ch.codePointAt(0)!;
      const roll = r();
      if (ch === '"' || ch === "\\") out += `\\${ch}`;
      else if (cp < 0x20)
        out +=
          roll < 0.5
            ? JSON.stringify(ch).slice(1, -1)
            : `\\u${cp.toString(16).padStart(4, "0").toUpperCase()}`;
      else if (ch === "/" && roll < 0.5) out += "\\/";
      else if (roll < 0.3)
        out += [...ch]
          .flatMap((c) => Array.from({ length: c.length }, (_, k) => c.charCodeAt(k)))
          .map((u) => `\\u${u.toString(16).padStart(4, "0")}`)
          .join("");
      else out += ch;
    }
    return `${out}"`;
  }
  if (typeof v === "number") {
    if (Number.isInteger(v) && v !== 0 && Math.abs(v) < 1e15 && r() < 0.3) return v.toExponential();
    return JSON.stringify(v);
  }
  if (v === null || typeof v === "boolean") return JSON.stringify(v);
  if (Array.isArray(v)) return `[${ws()}${v.map((x) => looseJson(x, r)).join(`${ws()},${ws()}`)}${ws()}]`;
  const o = v as Record<string, unknown>;
  return `{${ws()}${Object.keys(o)
    .map((k) => `${looseJson(k, r)}${ws()}:${ws()}${looseJson(o[k], r)}`)
    .join(`${ws()},${ws()}`)}${ws()}}`;
}

function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

const keyArb = fc.oneof(
  fc.constantFrom(...UNBILLED_KEYS, "messages", "tools", "mod\u00e9l"),
  fc.string({ unit: "binary", maxLength: 5 }),
);
const bodyArb = fc.dictionary(keyArb, fc.jsonValue({ stringUnit: "binary", maxDepth: 3 }));

describe("raw request scan", () => {
  it("property: counts the billed members as JSON.stringify prints them, from any client's formatting", () => {
    fc.assert(
      fc.property(bodyArb, fc.integer(), (body, seed) => {
        const text = looseJson(body, rng(seed));
        const parsed = JSON.parse(text) as Record<string, unknown>;
        const scan = scanRequest(text, billed);
        expect(scan).not.toBeNull();
        expect(scan!.billed).toEqual(countBilledChars(parsed));
        expect(scan!.members.map((m) => m.key)).toEqual(Object.keys(parsed));
      }),
      { numRuns: 1500 },
    );
  });

  it("property: splicing drops exactly the named members and keeps the rest byte for byte", () => {
    fc.assert(
      fc.property(bodyArb, fc.integer(), (body, seed) => {
        const text = looseJson(body, rng(seed));
        const parsed = JSON.parse(text) as Record<string, unknown>;
        const drop = new Set(["max_tokens", "stream_options", "max_completion_tokens"]);
        const out = spliceMembers(text, scanRequest(text, billed)!.members, drop, '"max_tokens":77');
        const expected: Record<string, unknown> = { max_tokens: 77 };
        for (const [k, v] of Object.entries(parsed)) if (!drop.has(k)) expected[k] = v;
        expect(JSON.parse(out)).toEqual(expected);
      }),
      { numRuns: 1000 },
    );
  });

  it("declines a body with a repeated top-level key (the provider might read the other copy)", () => {
    expect(scanRequest('{"model":"cheap","messages":[],"model":"kimi-k3"}', billed)).toBeNull();
    expect(scanRequest('{"model":"a","x":{"k":1,"k":2}}', billed)).not.toBeNull();
    expect(scanRequest(" { } ", billed)).toEqual({ members: [], billed: { ascii: 2, nonAscii: 0 } });
  });

  it("escaped quotes and backslash runs inside strings do not end them early", () => {
    const text = '{"messages":["a\\\\","b\\"c\\\\\\"d"],"n":1}';
    const scan = scanRequest(text, billed)!;
    expect(scan.members.map((m) => text.slice(m.start, m.end))).toEqual([
      '"messages":["a\\\\","b\\"c\\\\\\"d"]',
      '"n":1',
    ]);
    expect(scan.billed).toEqual(countBilledChars(JSON.parse(text)));
  });
});
