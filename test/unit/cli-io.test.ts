/** Where a command's lines for people go: the rule every `--json` command follows (src/cli/io.ts). */
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { humanOutput } from "../../src/cli/io.js";

function stream(isTTY: boolean) {
  const s = new PassThrough() as PassThrough & { isTTY?: boolean; text: () => string };
  let text = "";
  s.on("data", (d) => (text += d));
  s.isTTY = isTTY;
  s.text = () => text;
  return s;
}

describe("humanOutput", () => {
  const cases: Array<
    [string, { json?: boolean; progress?: boolean }, boolean, "stdout" | "stderr" | "nowhere"]
  > = [
    ["tables: people read stdout", {}, false, "stdout"],
    ["tables on a terminal", {}, true, "stdout"],
    ["--json, stderr a terminal", { json: true }, true, "stderr"],
    ["--json, stderr a pipe or file", { json: true }, false, "nowhere"],
    ["--json --progress, stderr a pipe", { json: true, progress: true }, false, "stderr"],
  ];
  for (const [what, flags, tty, where] of cases)
    it(`${what}: ${where}`, () => {
      const stdout = stream(false);
      const stderr = stream(tty);
      const h = humanOutput(flags, { stdout, stderr });
      h.line("hello");
      h.stream.write("drawn\n");
      const got = { stdout: stdout.text(), stderr: stderr.text() };
      expect(h.shown).toBe(where !== "nowhere");
      for (const k of ["stdout", "stderr"] as const)
        expect(got[k], k).toBe(k === where ? "hello\ndrawn\n" : "");
    });
});
