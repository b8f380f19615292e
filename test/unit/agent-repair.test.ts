import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseToolArguments } from "../../agent/src/repair.js";

const ok = (raw: string) => {
  const r = parseToolArguments(raw);
  if (!r.ok) throw new Error(`expected ok for ${raw}: ${r.error}`);
  return r;
};

describe("agent tool-argument repair", () => {
  it("passes valid objects through untouched, and empty arguments as {}", () => {
    expect(ok('{"command": "ls"}')).toEqual({ ok: true, args: { command: "ls" } });
    expect(ok("  ")).toEqual({ ok: true, args: {} });
  });

  it("never changes what a valid JSON object means (property)", () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), (obj) => {
        const r = ok(JSON.stringify(obj));
        expect(r.repaired).toBeUndefined();
        expect(r.args).toEqual(JSON.parse(JSON.stringify(obj)));
      }),
      { numRuns: 200 },
    );
  });

  it.each([
    ['```json\n{"command": "ls"}\n```', { command: "ls" }, /code fence/],
    ['{"command": "ls"}}', { command: "ls" }, /text after/],
    ['{"command": "ls"} trailing words', { command: "ls" }, /text after/],
    ['Here: {"path": "a.txt"}', { path: "a.txt" }, /text before/],
    ['{"command": "ls"', { command: "ls" }, /missing closing brace/],
    ['{"a": {"b": [1, 2', { a: { b: [1, 2] } }, /missing closing brackets/],
    ['{"command": "ls",}', { command: "ls" }, /trailing comma/],
    ["{'path': 'a.txt', 'x': True, 'y': None}", { path: "a.txt", x: true, y: null }, /single quotes/],
    ["{'content': 'say \"hi\" and it\\'s ok'}", { content: 'say "hi" and it\'s ok' }, /single quotes/],
    [
      '{"path": "f.py", "content": "line1\nline2\tx"}',
      { path: "f.py", content: "line1\nline2\tx" },
      /control/,
    ],
    [JSON.stringify(JSON.stringify({ command: "pwd" })), { command: "pwd" }, /double-encoded/],
  ])("repairs %j", (raw, args, note) => {
    const r = ok(raw);
    expect(r.args).toEqual(args);
    expect(r.repaired).toMatch(note);
  });

  it("keeps apostrophes inside double-quoted strings intact when converting other quotes is not needed", () => {
    expect(ok(`{"command": "echo it's"`).args).toEqual({ command: "echo it's" });
  });

  it.each([
    ['{"command": "echo unterminated'],
    ["ls -la"],
    ['{"a": }'],
    ["[1, 2]"],
    ['"just a string"'],
    ["null"],
    ['{"a": 1]'],
  ])("refuses %j", (raw) => {
    const r = parseToolArguments(raw);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.length).toBeGreaterThan(0);
  });
});
