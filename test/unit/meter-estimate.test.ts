/**
 * The prompt estimate and the admission rule against upstream's own numbers: the vectors in
 * test/fixtures/meter/upstream-vectors.json were computed by CPython with upstream's rules
 * (estimate_prompt_tokens, reserve_for, the budget header's formatting); the first six estimate
 * bodies are upstream's tests/test_policy.py cases.
 */
import { readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { floatPrices, pyFixed6, pyRound6, reserveFor } from "../../src/meter/admission.js";
import {
  billedClassesOf,
  estimatePromptTokens,
  tokensFromClasses,
  UNBILLED_KEYS,
} from "../../src/meter/estimate.js";
import { loadPriceTable } from "../../src/meter/index.js";
import { formatUsd6, pricePerMillionToPico, usdToPico } from "../../src/meter/money.js";
import { parseChatRequest, pyInt } from "../../src/meter/request.js";

interface Vectors {
  estimate: { body: string; tokens: number }[];
  reserve: {
    model: string;
    ch: string;
    n: number;
    want_key: string | null;
    want: unknown;
    room: number;
    estimate: number;
    reserved: number;
    max_tokens: number | null;
    clamped: boolean;
  }[];
  fixed6: { x: number; header: string; round6: number }[];
}
const V = JSON.parse(
  readFileSync(new URL("../fixtures/meter/upstream-vectors.json", import.meta.url), "utf8"),
) as Vectors;

describe("prompt estimate: upstream's formula", () => {
  it("upstream's vectors: the one-pass scan and the definition both give CPython's number", () => {
    expect(V.estimate).toHaveLength(19);
    for (const { body, tokens } of V.estimate) {
      expect(estimatePromptTokens(body), body.slice(0, 80)).toBe(tokens);
      expect(parseChatRequest(Buffer.from(body)).promptEstimate, body.slice(0, 80)).toBe(tokens);
    }
  });

  it("upstream's test_policy cases hold: ~1000 tokens for 3000 letters, tools and symbols billed, knobs not", () => {
    const [x3000, base, withTools, cjk, bigMax, dense] = V.estimate.map((v) => v.tokens) as number[];
    expect(x3000).toBeGreaterThanOrEqual(1000);
    expect(x3000).toBeLessThanOrEqual(1400);
    expect(withTools!).toBeGreaterThan(base! + 1000);
    expect(cjk!).toBeGreaterThanOrEqual(300 * 1.25);
    expect(bigMax).toBe(base);
    expect(dense!).toBeGreaterThanOrEqual(300 * 1.25);
  });

  it("ignores every generation knob", () => {
    const base = { messages: [{ role: "user", content: "hi" }] };
    const knobs: Record<string, unknown> = {};
    for (const k of UNBILLED_KEYS) knobs[k] = "x".repeat(1000);
    expect(estimatePromptTokens({ ...base, ...knobs })).toBe(estimatePromptTokens(base));
  });

  it("digits and letters at 3 a token, symbols and non-ASCII (astral once) at one", () => {
    const t = (content: string) => estimatePromptTokens({ messages: [content] });
    const letters = t("a".repeat(300));
    expect(t("7".repeat(300))).toBe(letters);
    expect(t("#".repeat(300)) - letters).toBe(Math.trunc(300 * 1.25) - Math.trunc(100 * 1.25));
    expect(t("日".repeat(300))).toBe(t("#".repeat(300)));
    expect(t("😀".repeat(300))).toBe(t("日".repeat(300)));
  });

  it("property: the one-pass scan counts what Python's json.dumps prints, from any client's spelling, repeated keys too", () => {
    // Values spelled as a client might: escapes for any character, spaces, numbers in odd forms.
    const char = fc.oneof(
      fc.constantFrom(
        "a",
        "Z",
        "5",
        " ",
        "\n",
        "\t",
        '"',
        "\\",
        "/",
        "\u0001",
        "\u007f",
        "é",
        "日",
        "😀",
        "\ud800",
      ),
      fc.string({ unit: "binary", minLength: 1, maxLength: 1 }),
    );
    const str = fc.array(fc.tuple(char, fc.boolean()), { maxLength: 12 }).map((cs) => {
      let raw = '"';
      let text = "";
      for (const [c, esc] of cs) {
        text += c;
        if (esc || c < " " || c === '"' || c === "\\" || (c >= "\ud800" && c <= "\udfff"))
          for (let k = 0; k < c.length; k++) raw += `\\u${c.charCodeAt(k).toString(16).padStart(4, "0")}`;
        else raw += c;
      }
      // A lone surrogate cannot be raw UTF-8: it is always escaped above.
      return { raw: `${raw}"`, text };
    });
    // Numbers in every spelling a client may use: Python prints each float as its repr.
    const literal = fc.constantFrom(
      "0",
      "-0",
      "12",
      "-7",
      "1.0",
      "1.50",
      "1e5",
      "1E-7",
      "-0.0",
      "0e-999",
      "2.5e+3",
      "12345678901234567890",
      "0.10000000000000000001",
      "123456789012345.6",
      "1e400",
      "-1e-400",
      "4.9e-324",
      "1e-320",
      "2.2250738585072014e-308",
      "1.7976931348623157e308",
      "9007199254740993.0",
      "1e16",
      "1e-5",
      "0.0001",
      "100000000000000000000000.0",
      "NaN",
      "-Infinity",
    );
    const spelled = fc
      .tuple(
        fc.oneof(
          fc.double({ noNaN: true, noDefaultInfinity: true }),
          fc.integer().map((k) => k / 1000),
        ),
        fc.integer({ min: 0, max: 5 }),
        fc.integer({ min: 1, max: 21 }),
      )
      .map(([x, form, p]) => {
        if (Object.is(x, -0) || x === 0) return form % 2 ? "-0.0" : "0.0";
        const s = [
          String(x),
          x.toExponential(),
          x.toPrecision(p),
          x.toExponential(Math.min(p, 20)).replace("e", "E"),
          x.toPrecision(p).replace(/e\+?/, "e00"),
          String(x).includes(".") || String(x).includes("e") ? `${x}0` : `${x}.0`,
        ][form]!;
        return s.includes(".") || s.includes("e") || s.includes("E") ? s : `${s}.0`;
      })
      .filter((s) => /^-?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?$/.test(s));
    const num = fc.oneof(literal, spelled);
    const ws = fc.constantFrom("", " ", "\n  ", "\t");
    const value: fc.Arbitrary<string> = fc.letrec<{ v: string }>((tie) => ({
      v: fc.oneof(
        { depthSize: "small" },
        str.map((s) => s.raw),
        num,
        fc.constantFrom("true", "false", "null"),
        fc
          .tuple(fc.array(tie("v"), { maxLength: 4 }), ws)
          .map(([xs, w]) => `[${w}${xs.join(`${w},${w}`)}${w}]`),
        // Keys may repeat (a Python dict keeps the last value), spelled alike or not.
        fc
          .tuple(
            fc.array(fc.tuple(fc.oneof(str, fc.constant({ raw: '"k"', text: "k" })), tie("v")), {
              maxLength: 4,
            }),
            ws,
          )
          .map(([kv, w]) => `{${w}${kv.map(([k, v]) => `${k.raw}${w}:${w}${v}`).join(`,${w}`)}${w}}`),
      ),
    })).v;
    // Knobs the meter interprets (stream, max_tokens) can make a request invalid: left out here.
    const knobs = [...UNBILLED_KEYS].filter(
      (k) => !["stream", "max_tokens", "max_completion_tokens", "n"].includes(k),
    );
    const key = fc.oneof(
      fc.constantFrom(...knobs, "messages", "tools"),
      str.map((s) => s.text),
    );
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.tuple(key, value), { maxLength: 6, selector: ([k]) => k }),
        ws,
        (members, w) => {
          const body = `${w}{${members.map(([k, v]) => `${JSON.stringify(k)}${w}:${w}${v}`).join(",")}}${w}`;
          const req = parseChatRequest(Buffer.from(body));
          const def = billedClassesOf(Buffer.from(body));
          expect(req.classes).toEqual(def);
          expect(req.promptEstimate).toBe(tokensFromClasses(def));
        },
      ),
      { numRuns: 2000, seed: 20261204 },
    );
  });

  it("a repeated key counts its last value, at any depth, as a Python dict keeps it", () => {
    const top =
      '{"messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"a much longer second copy"}]}';
    const nested = '{"messages":[{"role":"user","content":"first","content":"second, longer value wins"}]}';
    const byText = new Map(V.estimate.map((v) => [v.body, v.tokens]));
    expect(parseChatRequest(Buffer.from(top)).promptEstimate).toBe(byText.get(top));
    expect(parseChatRequest(Buffer.from(nested)).promptEstimate).toBe(byText.get(nested));
  });

  it("refuses what Python's json.loads refuses, takes what it takes", () => {
    for (const bad of [
      "",
      "[]",
      '"x"',
      "{",
      '{"a":1,}',
      '{"a":01}',
      '{"a":"\u0001"}',
      '{"a":"\\x"}',
      '{"a":1} x',
      "\ufeff{}",
    ])
      expect(() => parseChatRequest(Buffer.from(bad)), JSON.stringify(bad)).toThrow();
    expect(() => parseChatRequest(Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]))).toThrow(/UTF-8/);
    for (const ok of ['{"a":NaN}', '{"a":-Infinity}', ' {"a" : [ 1 , 2 ] } ', '{"a":"\\ud800"}'])
      expect(parseChatRequest(Buffer.from(ok)).members).toHaveLength(1);
  });
});

describe("admission: upstream's reserve_for, in the same doubles", () => {
  const prices = floatPrices(loadPriceTable());

  it("upstream's vectors: same refusals, same clamps, same max_tokens, the same reservation to the bit", () => {
    expect(V.reserve.length).toBeGreaterThan(400);
    let refused = 0;
    let clamped = 0;
    for (const c of V.reserve) {
      const body: Record<string, unknown> = {
        model: c.model,
        messages: [{ role: "user", content: c.ch.repeat(c.n) }],
      };
      if (c.want_key !== null) body[c.want_key] = c.want;
      const req = parseChatRequest(Buffer.from(JSON.stringify(body)));
      expect(req.promptEstimate).toBe(c.estimate);
      const a = reserveFor(prices.get(c.model)!, req.promptEstimate, req.want, c.room);
      if (c.max_tokens === null) {
        expect(a.ok, JSON.stringify(c)).toBe(false);
        refused++;
      } else {
        expect(a, JSON.stringify(c)).toEqual({
          ok: true,
          reserved: Math.max(c.reserved, req.promptEstimate * prices.get(c.model)!.prompt),
          maxTokens: c.max_tokens,
          clamped: c.clamped,
        });
        if (c.clamped) clamped++;
      }
    }
    expect(refused).toBeGreaterThan(50);
    expect(clamped).toBeGreaterThan(20);
  });

  it("max_tokens through Python's int(): strings of digits count, what it cannot convert means 8192", () => {
    expect(pyInt("100")).toBe(100);
    expect(pyInt(" 4_2\n")).toBe(42);
    expect(pyInt("٤٢")).toBe(42);
    expect(pyInt("12.5")).toBe("value_error");
    expect(pyInt(12.7)).toBe(12);
    expect(pyInt(true)).toBe(1);
    expect(pyInt(Number.NaN)).toBe("value_error");
    expect(pyInt(Number.POSITIVE_INFINITY)).toBe("overflow");
    expect(pyInt([])).toBe("value_error");
    const want = (v: unknown) =>
      parseChatRequest(
        Buffer.from(JSON.stringify({ messages: [], max_tokens: v, max_completion_tokens: 77 })),
      ).want;
    expect(want(0)).toBe(77);
    expect(want(null)).toBe(77);
    expect(want("300")).toBe(300);
    expect(want("abc")).toBe(8192);
    expect(want({ a: 1 })).toBe(8192);
  });

  it("the budget header and /v1/budget round as Python formats and rounds (ties to even)", () => {
    for (const f of V.fixed6) {
      expect(pyFixed6(f.x), String(f.x)).toBe(f.header);
      expect(pyRound6(f.x), String(f.x)).toBe(f.round6);
    }
    expect((1 / 128).toFixed(6)).not.toBe(pyFixed6(1 / 128)); // the case toFixed gets wrong
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
