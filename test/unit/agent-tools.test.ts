import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { commandEnv } from "../../agent/src/env.js";
import { capText, HeadTailBuffer } from "../../agent/src/output.js";
import { executeToolCall, type ToolContext, toolSchemas } from "../../agent/src/tools.js";

let dir: string;
let ctx: ToolContext;
const call = (name: string, args: unknown, over: Partial<ToolContext> = {}) =>
  executeToolCall(name, typeof args === "string" ? args : JSON.stringify(args), { ...ctx, ...over });

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "agent-tools-"));
  ctx = {
    workdir: dir,
    toolTimeoutS: 30,
    outputCap: 2048,
    // HOME in the temp dir: `bash -l` must not source the host user's (slow, unrelated) dotfiles.
    env: commandEnv({ ...process.env, HOME: dir, LLM_API_KEY: "sk-secret-should-not-leak" }),
    killGraceMs: 200,
  };
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A killed orphan stays a zombie when PID 1 does not reap: count that as dead. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !["Z", "X"].includes(stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3));
  } catch {
    return false;
  }
}

describe("agent tool schemas", () => {
  it("offers exactly Hermes' five tool names with the documented argument names", () => {
    const schemas = toolSchemas(120) as {
      type: string;
      function: { name: string; parameters: { properties: object; required: string[] } };
    }[];
    expect(schemas.map((s) => s.function.name)).toEqual([
      "terminal",
      "read_file",
      "write_file",
      "patch",
      "search_files",
    ]);
    expect(schemas.every((s) => s.type === "function")).toBe(true);
    const props = Object.fromEntries(
      schemas.map((s) => [s.function.name, Object.keys(s.function.parameters.properties)]),
    );
    expect(props).toEqual({
      terminal: ["command", "timeout"],
      read_file: ["path"],
      write_file: ["path", "content"],
      patch: ["path", "old", "new"],
      search_files: ["pattern", "path"],
    });
  });
});

describe("agent terminal tool", () => {
  it("runs bash in the workdir, interleaves stdout and stderr, reports the exit code", async () => {
    const r = await call("terminal", { command: "echo one; echo two >&2; pwd; exit 7" });
    expect(r.content).toContain("one");
    expect(r.content).toContain("two");
    expect(r.content).toContain(dir);
    expect(r.content.endsWith("[exit code: 7]")).toBe(true);
    expect(r.record).toMatchObject({ ok: false, error_code: "exit_nonzero", exit_code: 7 });
  });

  it("does not pass the model API key to commands", async () => {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell expansion, not a JS template
    const r = await call("terminal", { command: 'echo "key=[${LLM_API_KEY:-unset}]"' });
    expect(r.content).toContain("key=[unset]");
    expect(r.record.ok).toBe(true);
  });

  it("closes stdin so a command waiting for input ends at once", async () => {
    const r = await call("terminal", { command: "read line; echo got:$?" });
    expect(r.content).toContain("got:1");
  });

  it("kills the whole process group on timeout, background children included", async () => {
    const pidFile = join(dir, "bg.pid");
    const t0 = performance.now();
    const r = await call("terminal", {
      command: `sleep 60 & echo $! > ${pidFile}; echo started; sleep 60`,
      timeout: 2,
    });
    expect(performance.now() - t0).toBeLessThan(8000);
    expect(r.record).toMatchObject({ ok: false, error_code: "timeout", timed_out: true, exit_code: null });
    expect(r.content).toContain("started");
    expect(r.content).toMatch(/timed out after 2 s/);
    const pid = Number(readFileSync(pidFile, "utf8"));
    await new Promise((ok) => setTimeout(ok, 200));
    expect(alive(pid)).toBe(false);
  });

  it("returns promptly when a background job keeps the output pipe open", async () => {
    const t0 = performance.now();
    const r = await call("terminal", { command: "(sleep 5 &) ; echo quick" });
    expect(r.content).toContain("quick");
    expect(performance.now() - t0).toBeLessThan(4000);
  });

  it("caps output to head and tail with the omitted byte count", async () => {
    const r = await call("terminal", { command: "seq 1 100000" }, { outputCap: 1000 });
    expect(r.content.startsWith("1\n2\n3\n")).toBe(true);
    expect(r.content).toMatch(/\[\.\.\. \d+ bytes omitted \.\.\.\]/);
    expect(r.content).toContain("99999\n100000\n[exit code: 0]");
    expect(r.record.truncated_bytes).toBeGreaterThan(500_000);
    expect(r.content.length).toBeLessThan(1200);
  });

  it("rejects an empty or missing command without running anything", async () => {
    expect((await call("terminal", { command: "  " })).record.error_code).toBe("bad_arguments");
    expect((await call("terminal", {})).content).toMatch(/missing required argument "command"/);
  });
});

describe("agent file tools", () => {
  it("write_file creates parents; read_file reads it back verbatim (relative and absolute)", async () => {
    const w = await call("write_file", { path: "a/b/c.txt", content: "héllo\nworld\n" });
    expect(w.content).toBe(`wrote 13 bytes to ${join(dir, "a/b/c.txt")}`);
    expect((await call("read_file", { path: "a/b/c.txt" })).content).toBe("héllo\nworld\n");
    expect((await call("read_file", { path: join(dir, "a/b/c.txt") })).content).toBe("héllo\nworld\n");
  });

  it("read_file reports missing files, directories and binary files as errors", async () => {
    const missing = await call("read_file", { path: "nope" });
    expect(missing.record).toMatchObject({ ok: false, error_code: "not_found" });
    expect(missing.content).toMatch(/^error: no such file/);
    expect((await call("read_file", { path: "a" })).record.error_code).toBe("is_directory");
    writeFileSync(join(dir, "bin.dat"), Buffer.from([1, 2, 0, 3]));
    expect((await call("read_file", { path: "bin.dat" })).record.error_code).toBe("binary_file");
  });

  it("read_file caps a large file to its two ends without reading the middle into the answer", async () => {
    const lines = Array.from({ length: 5000 }, (_, i) => `line ${i}`).join("\n");
    writeFileSync(join(dir, "big.txt"), lines);
    const r = await call("read_file", { path: "big.txt" }, { outputCap: 1000 });
    expect(r.content.startsWith("line 0\nline 1\n")).toBe(true);
    expect(r.content.endsWith("line 4999")).toBe(true);
    expect(r.content).toMatch(/bytes omitted; read a range with terminal/);
    expect(r.record.truncated_bytes).toBeGreaterThan(30_000);
  });

  it("patch replaces one exact unique occurrence, literally (no $ patterns)", async () => {
    writeFileSync(join(dir, "p.py"), "def f():\n    return 1\n\ndef g():\n    return 2\n");
    const r = await call("patch", { path: "p.py", old: "    return 2", new: "    return '$&$1'" });
    expect(r.record.ok).toBe(true);
    expect(r.content).toMatch(/replaced 1 occurrence at line 5/);
    expect(readFileSync(join(dir, "p.py"), "utf8")).toBe(
      "def f():\n    return 1\n\ndef g():\n    return '$&$1'\n",
    );
  });

  it("patch refuses ambiguous, missing and empty matches with a clear error, leaving the file alone", async () => {
    writeFileSync(join(dir, "q.txt"), "x = 1\nx = 1\n");
    const dup = await call("patch", { path: "q.txt", old: "x = 1", new: "x = 2" });
    expect(dup.record.error_code).toBe("not_unique");
    expect(dup.content).toMatch(/occurs 2 times/);
    const none = await call("patch", { path: "q.txt", old: "y = 1", new: "y = 2" });
    expect(none.record.error_code).toBe("no_match");
    const ws = await call("patch", { path: "q.txt", old: " x = 1\nx = 1\n\n", new: "" });
    expect(ws.content).toMatch(/different surrounding whitespace/);
    expect((await call("patch", { path: "q.txt", old: "", new: "z" })).record.error_code).toBe(
      "bad_arguments",
    );
    expect(readFileSync(join(dir, "q.txt"), "utf8")).toBe("x = 1\nx = 1\n");
  });

  it("patch accepts Hermes' old_string/new_string names", async () => {
    writeFileSync(join(dir, "h.txt"), "alpha beta");
    const r = await call("patch", { path: "h.txt", old_string: "beta", new_string: "gamma" });
    expect(r.record.ok).toBe(true);
    expect(readFileSync(join(dir, "h.txt"), "utf8")).toBe("alpha gamma");
  });

  it("search_files finds matches recursively as path:line:text, skips .git, reports no matches", async () => {
    mkdirSync(join(dir, "src/.git"), { recursive: true });
    writeFileSync(join(dir, "src/m.py"), "import os\n# TODO: fix\nx = 1\n");
    writeFileSync(join(dir, "src/.git/HEAD"), "TODO in git\n");
    const r = await call("search_files", { pattern: "TODO|FIXME", path: "src" });
    expect(r.record.ok).toBe(true);
    expect(r.content).toBe(`${join(dir, "src/m.py")}:2:# TODO: fix`);
    const none = await call("search_files", { pattern: "nothing_here_zz", path: "src" });
    expect(none.content).toMatch(/^no matches/);
    const bad = await call("search_files", { pattern: "(", path: "src" });
    expect(bad.record).toMatchObject({ ok: false, error_code: "search_failed" });
    expect((await call("search_files", { pattern: "x", path: "missing-dir" })).record.error_code).toBe(
      "not_found",
    );
  });

  it("search_files caps the number of lines", async () => {
    writeFileSync(join(dir, "many.txt"), "hit\n".repeat(1000));
    const r = await call("search_files", { pattern: "hit", path: "many.txt" }, { outputCap: 100_000 });
    expect(r.content.split("\n").filter((l) => l.includes(":hit")).length).toBe(200);
    expect(r.content).toMatch(/more matches not shown/);
  });
});

describe("agent tool-call errors become tool results", () => {
  it("unknown tools, bad JSON and wrong types are answered, never thrown", async () => {
    expect((await call("browser", {})).record.error_code).toBe("unknown_tool");
    const bad = await call("terminal", '{"command": "echo hi');
    expect(bad.record.error_code).toBe("bad_json");
    expect(bad.content).toMatch(/not valid JSON.*nothing was run/s);
    expect(bad.content).toContain('{"command": "ls -la"}');
    const wrong = await call("write_file", { path: "x.txt", content: { nested: true } });
    expect(wrong.record.error_code).toBe("bad_arguments");
  });

  it("runs repaired arguments and tells the model what was repaired", async () => {
    const r = await call("terminal", "{'command': 'echo repaired-ok'}");
    expect(r.record).toMatchObject({ ok: true, repaired: "single quotes converted" });
    expect(r.content).toMatch(
      /^\[note: the arguments were not valid JSON and were repaired: single quotes converted\]\n/,
    );
    expect(r.content).toContain("repaired-ok");
  });
});

describe("agent output cap", () => {
  it("keeps head and tail of a stream pushed in arbitrary chunks", () => {
    const b = new HeadTailBuffer(10);
    for (const s of ["abc", "defgh", "ijklmnop", "qrstuvwxyz"]) b.push(Buffer.from(s));
    expect(b.totalBytes).toBe(26);
    expect(b.omittedBytes).toBe(16);
    expect(b.text()).toBe("abcde\n[... 16 bytes omitted ...]\nvwxyz");
    expect(capText("short", 10)).toEqual({ text: "short", omittedBytes: 0 });
  });
});
