import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { termLines, termText } from "../../src/terminal-text.js";

/** What a terminal acts on or hides: C0, DEL, C1, and the invisible formatting characters. */
const ACTIVE =
  /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]/;

describe("text from outside, for a terminal (issue 36 item 9)", () => {
  it("no control or invisible formatting character survives (termLines: but its line breaks) (property)", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 200 }), (s) => {
        expect(termText(s)).not.toMatch(ACTIVE);
        expect(termLines(s)).not.toMatch(
          new RegExp(ACTIVE.source.replace("\\u0000-\\u001f", "\\u0000-\\u0009\\u000b-\\u001f")),
        );
      }),
    );
  });

  it("the escapes are JSON's: a string without quote or backslash reads back exactly (property)", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 200 }), (raw) => {
        const s = raw.replace(/["\\]/g, "");
        // Lone surrogates are not JSON text; everything else is.
        fc.pre(!/[\ud800-\udfff]/.test(s));
        expect(JSON.parse(`"${termText(s)}"`)).toBe(s);
      }),
    );
  });

  it("the attacks: clear the screen, a fake green line, the window title, C1 CSI, reversed text", () => {
    expect(termText("\u001b[2J\u001b[H\u001b[32mvalid\u001b[0m")).toBe(
      "\\u001b[2J\\u001b[H\\u001b[32mvalid\\u001b[0m",
    );
    expect(termText("\u001b]0;pwned\u0007")).toBe("\\u001b]0;pwned\\u0007");
    expect(termText("x\u009b2J")).toBe("x\\u009b2J");
    expect(termText("a\u202egnp.exe")).toBe("a\\u202egnp.exe");
    expect(termText("ok\nvalid: fake\r")).toBe("ok\\nvalid: fake\\r");
    expect(termText("naïve 名前 🙂 a\\b")).toBe("naïve 名前 🙂 a\\b");
    expect(termText(undefined)).toBe("");
  });

  it("termLines keeps our own line breaks and escapes the rest; a JSON document keeps its meaning", () => {
    expect(termLines("a\u001b[2J\nb\u2028c")).toBe("a\\u001b[2J\nb\\u2028c");
    const doc = JSON.stringify({ files: ["x\u009b2J", "a\u202eb", "l\u2028s"] }, null, 2);
    expect(termLines(doc)).not.toMatch(/[\u009b\u202e\u2028]/);
    expect(JSON.parse(termLines(doc))).toEqual(JSON.parse(doc));
  });
});
