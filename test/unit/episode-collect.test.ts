/**
 * What is copied out of an agent's container is decided before its bytes are read (the archive
 * API's stat header, the tar entry's header), and what the agent recorded is parsed at the
 * boundary: pure pieces of src/sandbox/tar.ts and src/episode/turn-records.ts.
 */
import { PassThrough } from "node:stream";
import tar from "tar-stream";
import { describe, expect, it } from "vitest";
import { attributeAgentEnd } from "../../src/episode/attribution.js";
import { parseTurnRecords } from "../../src/episode/turn-records.js";
import { classifyStat, parsePathStat, readFirstEntry } from "../../src/sandbox/tar.js";

const TiB = 1024 ** 4;
const header = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64");

describe("the stat header decides before a byte is read", () => {
  it("parses the engine's header and classifies by Go's file mode", () => {
    // As the engine answered for a 15 TiB sparse file, a directory and a symlink (captured).
    const file = parsePathStat(
      header({ name: "big", size: 15 * TiB, mode: 420, mtime: "x", linkTarget: "" }),
    )!;
    const dir = parsePathStat(header({ name: "tmp", size: 4096, mode: 2148532735, linkTarget: "" }))!;
    const link = parsePathStat(header({ name: "l", size: 11, mode: 134218239, linkTarget: "/etc/passwd" }))!;
    expect(classifyStat(file, 64 * 1024 ** 2)).toEqual({ kind: "too_large", size: 15 * TiB });
    expect(classifyStat({ ...file, size: 10 }, 64 * 1024 ** 2)).toBeUndefined();
    expect(classifyStat(dir, 1e9)).toEqual({ kind: "directory" });
    expect(classifyStat(link, 1e9)).toEqual({ kind: "symlink", target: "/etc/passwd" });
    // A named pipe (1<<25) and a socket (1<<24) are never read.
    expect(classifyStat({ ...file, size: 0, mode: 2 ** 25 + 0o644 }, 1e9)).toEqual({
      kind: "other",
      type: "namedPipe",
    });
    expect(classifyStat({ ...file, size: 0, mode: 2 ** 24 + 0o644 }, 1e9)).toEqual({
      kind: "other",
      type: "socket",
    });
  });

  it("refuses a header it cannot read", () => {
    expect(parsePathStat(undefined)).toBeUndefined();
    expect(parsePathStat("not base64 json")).toBeUndefined();
    expect(parsePathStat(header({ name: "x", size: -1, mode: 420 }))).toBeUndefined();
    expect(parsePathStat(header({ name: "x", size: "12", mode: 420 }))).toBeUndefined();
  });
});

describe("readFirstEntry stops at the first entry's header", () => {
  /** A tar stream whose one entry claims `size` bytes, then zeros forever (until destroyed). */
  function endless(size: number): { stream: PassThrough; sent: () => number } {
    const out = new PassThrough();
    let sent = 0;
    const head = tar.pack();
    head.entry({ name: "big", size, type: "file" }); // the header block only: the body never comes
    head.once("data", (block: unknown) => {
      out.write(block as Buffer);
      sent += (block as Buffer).length;
      const zeros = Buffer.alloc(64 * 1024);
      const pump = () => {
        while (!out.destroyed && out.write(zeros)) sent += zeros.length;
        if (!out.destroyed) out.once("drain", pump);
      };
      pump();
    });
    return { stream: out, sent: () => sent };
  }

  it("a file whose header is over the cap: too_large, the stream destroyed, nothing drained", async () => {
    const { stream, sent } = endless(15 * TiB);
    const r = await readFirstEntry(stream, 1024 * 1024);
    expect(r).toEqual({ kind: "too_large", size: 15 * TiB });
    expect(stream.destroyed).toBe(true);
    expect(sent()).toBeLessThan(4 * 1024 * 1024);
  });

  it("a directory entry: answered at once, its contents never read", async () => {
    const pack = tar.pack();
    pack.entry({ name: "d", type: "directory" });
    const { stream, sent } = endless(15 * TiB);
    const both = new PassThrough();
    pack.once("data", (b: unknown) => {
      both.write(b as Buffer);
      stream.pipe(both);
    });
    const r = await readFirstEntry(both, 1024 * 1024);
    expect(r).toEqual({ kind: "directory" });
    expect(both.destroyed).toBe(true);
    expect(sent()).toBeLessThan(4 * 1024 * 1024);
    stream.destroy();
  });

  it("a small file is read whole; an aborted read rejects with the signal's reason", async () => {
    const pack = tar.pack();
    pack.entry({ name: "f", mode: 0o755 }, "hello\n");
    pack.finalize();
    const piped = new PassThrough();
    pack.pipe(piped);
    expect(await readFirstEntry(piped, 1024)).toMatchObject({ kind: "file", size: 6, mode: 0o755 });
    const stuck = new PassThrough(); // never sends a byte
    const ac = new AbortController();
    const p = readFirstEntry(stuck, 1024, ac.signal);
    ac.abort(new Error("deadline"));
    await expect(p).rejects.toThrow("deadline");
    expect(stuck.destroyed).toBe(true);
  });
});

describe("turn records are parsed at the boundary", () => {
  const turn = {
    type: "turn",
    turn: 1,
    started_at: "t",
    messages: [{ role: "assistant", content: "hi", tool_calls: [] }],
    tool_call_count: 0,
    finish_reason: "stop",
    tool_calls: [],
  };

  it("counts a hand-written turn line, a torn line and an unknown type, and keeps the valid records", () => {
    const text = [
      JSON.stringify({ type: "session", version: "0.1.0" }),
      JSON.stringify(turn),
      '{"type":"turn"}',
      JSON.stringify({ ...turn, turn: 2, tool_calls: [{ name: "terminal" }] }),
      "[1,2]",
      JSON.stringify({ type: "note" }),
      JSON.stringify({ type: "summary", reason: "completed", turns: 1, tool_call_count: 0 }),
      '{"type":"tu',
    ].join("\n");
    const r = parseTurnRecords(text);
    expect(r.turns.map((t) => t.turn)).toEqual([1]);
    expect(r.summary?.reason).toBe("completed");
    expect(r.session).toBeDefined();
    expect(r.invalid).toBe(5);
    expect(r.invalidTurns).toBe(2);
    expect(r.firstInvalid.map((x) => [x.line, x.type])).toEqual([
      [3, "turn"],
      [4, "turn"],
      [5, null],
      [6, "note"],
      [8, null],
    ]);
  });

  it("never throws, whatever the text", () => {
    for (const t of ["", "\n\n", "null", '"x"', "{", '{"type":"summary"}', "\u0000".repeat(10)])
      expect(() => parseTurnRecords(t)).not.toThrow();
  });
});

describe("attribution", () => {
  it("an agent killed by the disk watchdog is the policy's fault", () => {
    expect(
      attributeAgentEnd({
        killedBy: "disk_limit",
        disk: { bytes: 3e9, limitBytes: 2e9, limitInodes: 2e5 },
        exitCode: undefined,
        oomKilled: false,
        upstreamFailing: false,
      }),
    ).toMatchObject({
      class: "policy",
      code: "agent_disk_limit",
      message: expect.stringContaining("3000000000 of 2000000000 bytes"),
    });
  });

  it("so is one killed for its inodes (a million empty files are 0 bytes), and the message says which bound", () => {
    expect(
      attributeAgentEnd({
        killedBy: "disk_limit",
        disk: { bytes: 0, inodes: 250_001, limitBytes: 2e9, limitInodes: 200_000 },
        exitCode: undefined,
        oomKilled: false,
        upstreamFailing: false,
      }),
    ).toMatchObject({
      class: "policy",
      code: "agent_disk_limit",
      message: expect.stringContaining("more than 200000 files and directories"),
    });
  });
});
