/** The log-line check the daemon log tests use (test/helpers/json-lines.ts) finds what it must. */
import { describe, expect, it } from "vitest";
import { badLogLines, duplicateKeys } from "../helpers/json-lines.js";

describe("log lines: one JSON object, each key once", () => {
  it("finds a key named twice, at any depth", () => {
    expect(duplicateKeys('{"a":1,"b":{"c":[1,{"d":2,"d":3}]},"a":"x"}')).toEqual(["b.c[1].d", "a"]);
    expect(duplicateKeys('{"component":"eval","pack":"ab","component":"meter"}')).toEqual(["component"]);
    expect(duplicateKeys('{"a":"\\"a\\"","b":[],"c":{},"d":-1.5e3,"e":null}')).toEqual([]);
  });

  it("a line that is not one JSON object is named", () => {
    const bad = badLogLines(
      '{"ok":1}\nvalidator-entrypoint: hello\nerror: no wallet\n{"a":1,"a":2}\n\n[1]\n',
    );
    expect(bad.map((b) => b.problem.split(":")[0])).toEqual([
      "not JSON",
      "not JSON",
      "duplicate keys",
      "not JSON",
    ]);
    expect(bad[2]!.line).toBe('{"a":1,"a":2}');
  });
});
