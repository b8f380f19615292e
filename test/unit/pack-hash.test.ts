import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/hash.js";
import {
  canonicalJson,
  loadPack,
  PyFloat,
  type PyValue,
  packHashOf,
  pyFloatRepr,
  pyInt,
  pyJsonDumps,
  pyJsonParse,
} from "../../src/pack/index.js";

const dir = new URL("../fixtures/packs/", import.meta.url);
const vectors = JSON.parse(readFileSync(new URL("hashes.json", dir), "utf8")).vectors as Array<
  Record<string, string | number>
>;

describe("pack_hash against the real miner packs", () => {
  for (const v of vectors) {
    const bytes = readFileSync(new URL(String(v.file), dir));
    it(`${v.file} hashes to ${String(v.pack_hash).slice(0, 12)}`, () => {
      expect(bytes.length).toBe(v.bytes);
      expect(sha256Hex(bytes)).toBe(v.raw_file_sha256);
      const value = pyJsonParse(bytes.toString("utf8"));
      const canonical = canonicalJson(value);
      expect(Buffer.byteLength(canonical)).toBe(v.canonical_length);
      expect(packHashOf(value)).toBe(v.pack_hash);
      const loaded = loadPack(bytes, String(v.pack_hash));
      expect(loaded.ok).toBe(true);
    });
    for (const [k, wrong] of Object.entries(v).filter(([k]) => k.startsWith("wrong_"))) {
      it(`${v.file}: the ${k} hash is rejected as pack_verify_failed`, () => {
        expect(wrong).not.toBe(v.pack_hash);
        const r = loadPack(bytes, String(wrong));
        expect(r.ok).toBe(false);
        if (!r.ok) expect(r.rejection.code).toBe("pack_verify_failed");
      });
    }
  }
});

describe("Python json.dumps fidelity", () => {
  it("escapes like ensure_ascii, including astral characters as surrogate pairs", () => {
    expect(pyJsonDumps('é\u2019😀\u007f\u0001/"\\\n\r\t\b\f')).toBe(
      '"\\u00e9\\u2019\\ud83d\\ude00\\u007f\\u0001/\\"\\\\\\n\\r\\t\\b\\f"',
    );
  });

  it("keeps the int/float distinction and big ints", () => {
    expect(pyJsonDumps(pyJsonParse("[1.0, 1, -0, -0.0, 12345678901234567890123, 1e400, 1E5, 0.1]"))).toBe(
      "[1.0, 1, 0, -0.0, 12345678901234567890123, Infinity, 100000.0, 0.1]",
    );
  });

  it("prints floats as repr() does at the exponent boundaries", () => {
    const cases: Array<[number, string]> = [
      [1e16, "1e+16"],
      [1e15, "1000000000000000.0"],
      [1.5e16, "1.5e+16"],
      [0.0001, "0.0001"],
      [0.00001, "1e-05"],
      [1.2345e-7, "1.2345e-07"],
      [123.456, "123.456"],
      [1e300, "1e+300"],
      [5e-324, "5e-324"],
      [-2.5, "-2.5"],
    ];
    for (const [x, s] of cases) expect(pyFloatRepr(x)).toBe(s);
  });

  it("sorts keys by code point, not by UTF-16 unit", () => {
    // U+FF61 sorts before U+1F600 by code point; by UTF-16 unit (0xD83D) it would come first.
    const obj = new Map<string, PyValue>([
      ["😀", 1n],
      ["｡", 2n],
      ["a", 3n],
    ]);
    expect(pyJsonDumps(obj)).toBe('{"a": 3, "\\uff61": 2, "\\ud83d\\ude00": 1}');
  });

  it("a duplicate key keeps the last value", () => {
    expect(pyJsonDumps(pyJsonParse('{"a": 1, "b": 2, "a": 3}'))).toBe('{"a": 3, "b": 2}');
  });

  it("rejects what Python's json.loads rejects", () => {
    for (const bad of [
      '{"a":1,}',
      "[1,]",
      "01",
      '"\\x"',
      '"a\u0001"',
      "\ufeff{}",
      "{} x",
      "",
      "nul",
      '{"a" 1}',
      "1".repeat(4301),
    ]) {
      expect(() => pyJsonParse(bad), JSON.stringify(bad.slice(0, 20))).toThrow();
    }
    expect(() => pyJsonParse("1".repeat(4300))).not.toThrow();
  });

  it("canonical form is stable under key reordering and whitespace (property)", () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), fc.integer({ min: 0, max: 3 }), (value, indent) => {
        const a = canonicalJson(pyJsonParse(JSON.stringify(value)));
        const reordered = JSON.stringify(reverseKeys(value), null, indent);
        const b = canonicalJson(pyJsonParse(reordered));
        expect(b).toBe(a);
        // and idempotent: canonical text parses back to the same canonical text
        expect(canonicalJson(pyJsonParse(a))).toBe(a);
      }),
      { numRuns: 500 },
    );
  });
});

function reverseKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(reverseKeys);
  if (v && typeof v === "object") {
    return Object.fromEntries(
      Object.entries(v)
        .reverse()
        .map(([k, x]) => [k, reverseKeys(x)]),
    );
  }
  return v;
}

describe("differential test against CPython's json module", () => {
  it("parse + dumps(sort_keys=True) matches python3 byte for byte on random documents", () => {
    const docs = fc.sample(
      fc.oneof(
        fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
        fc
          .dictionary(
            fc.string({ unit: "binary", maxLength: 6 }),
            fc.oneof(fc.double(), fc.integer(), fc.string({ unit: "binary" })),
          )
          .map((d) => JSON.stringify(d)),
        fc.double().map((x) => (Number.isNaN(x) ? "NaN" : x.toExponential())),
      ),
      { numRuns: 400, seed: 42 },
    );
    const script =
      "import json,sys\nfor doc in json.load(sys.stdin):\n    print(json.dumps(json.loads(doc), sort_keys=True))";
    const py = execFileSync("python3", ["-c", script], { input: JSON.stringify(docs), encoding: "utf8" });
    const expected = py.trimEnd().split("\n");
    expect(expected.length).toBe(docs.length);
    docs.forEach((d, k) => {
      expect(pyJsonDumps(pyJsonParse(d)), d).toBe(expected[k]);
    });
  });

  it("PyFloat survives a round trip", () => {
    expect(pyJsonDumps(new PyFloat(3))).toBe("3.0");
  });
});

describe("pyInt is Python's int() on a JSON value (CPython 3.11, checked in the REPL)", () => {
  it.each<[unknown, number | null]>([
    ["42", 42],
    [" 42 ", 42],
    ["+42", 42],
    ["-42", -42],
    ["4_2", 42],
    ["042", 42],
    ["\u0664\u0662", 42],
    ["\u{1D7D8}\u{1D7E2}", 0],
    ["\u300042\u3000", 42],
    ["\u001c7", null],
    ["1.5", null],
    ["1e3", null],
    ["0x10", null],
    ["", null],
    ["4__2", null],
    ["_42", null],
    ["+ 42", null],
    [12.7, 12],
    [-12.7, -12],
    [true, 1],
    [false, 0],
    [null, null],
    [undefined, null],
    [[1], null],
    [{}, null],
  ])("int(%j) → %s", (v, expected) => {
    expect(pyInt(v)).toBe(expected);
  });
});
