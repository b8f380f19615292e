import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import fc from "fast-check";
import pino from "pino";
import tar from "tar-stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildArchive, collectFiles, LogTap, planTruncation } from "../../src/daemon/index.js";

async function untar(gz: Buffer): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>();
  const ex = tar.extract();
  const done = new Promise<void>((resolve, reject) => {
    ex.on("entry", (h, stream, next) => {
      const chunks: Buffer[] = [];
      stream.on("data", (c) => {
        chunks.push(c as Buffer);
      });
      stream.on("end", () => {
        out.set(h.name, Buffer.concat(chunks));
        next();
      });
    });
    ex.on("finish", resolve);
    ex.on("error", reject);
  });
  ex.end(gunzipSync(gz));
  await done;
  return out;
}

describe("planTruncation", () => {
  it("keeps everything that fits and cuts the biggest files first", () => {
    expect(planTruncation([10, 20, 30], 100)).toEqual([10, 20, 30]);
    // 60 bytes for 3 files: 10 fits whole, the other two share 50.
    expect(planTruncation([10, 200, 30], 60)).toEqual([10, 25, 25]);
    expect(planTruncation([100, 100], 0)).toEqual([0, 0]);
  });

  it("fits the budget, never grows a file, and only cuts files bigger than every file it keeps whole (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.nat(10_000), { maxLength: 30 }), fc.nat(100_000), (sizes, budget) => {
        const keep = planTruncation(sizes, budget);
        const total = sizes.reduce((a, b) => a + b, 0);
        const kept = keep.reduce((a, b) => a + b, 0);
        if (total <= budget) return kept === total;
        if (kept > budget) return false;
        const cut = keep.map((k, i) => k < sizes[i]!);
        const cap = Math.max(0, ...keep.filter((_, i) => cut[i]));
        return keep.every(
          (k, i) => k <= sizes[i]! && (cut[i] ? k === cap : sizes[i]! <= cap || !cut.some(Boolean)),
        );
      }),
    );
  });
});

describe("buildArchive", () => {
  it("stays under the limit with incompressible data, keeps the tails of the cut files and says so", async () => {
    const big = randomBytes(300_000);
    const small = Buffer.from("small file\n");
    const built = await buildArchive(
      [
        { name: "artifacts/big.bin", data: big },
        { name: "validator.log", data: small },
      ],
      100_000,
    );
    expect(built.gz.length).toBeLessThanOrEqual(100_000);
    expect(built.truncated).toEqual({ "artifacts/big.bin": 300_000 });
    const files = await untar(built.gz);
    expect(files.get("validator.log")).toEqual(small);
    const kept = files.get("artifacts/big.bin")!;
    expect(kept.length).toBeGreaterThan(50_000);
    expect(kept).toEqual(big.subarray(big.length - kept.length));
    expect(files.get("TRUNCATED.txt")!.toString()).toContain("artifacts/big.bin: kept the last");
  });

  it("keeps small archives whole", async () => {
    const built = await buildArchive([{ name: "a.txt", data: Buffer.from("hello") }], 10 * 1024 * 1024);
    expect(built.truncated).toEqual({});
    expect((await untar(built.gz)).get("a.txt")!.toString()).toBe("hello");
  });
});

describe("collectFiles", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "daemon-artifacts-"));
    await mkdir(join(dir, "ep1", "logs"), { recursive: true });
    await writeFile(join(dir, "ep1", "turns.jsonl"), "{}\n");
    await writeFile(join(dir, "ep1", "logs", "agent.log"), "x".repeat(5_000));
    await symlink("/etc/passwd", join(dir, "ep1", "escape"));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it("reads regular files under a prefix, never follows symlinks, and bounds what it reads", async () => {
    const { entries, skipped } = await collectFiles(dir, "artifacts", { perFileMax: 1_000 });
    expect(entries.map((e) => e.name)).toEqual(["artifacts/ep1/logs/agent.log", "artifacts/ep1/turns.jsonl"]);
    expect(entries[0]!.data.length).toBe(1_000);
    expect(skipped).toEqual([]);
    const capped = await collectFiles(dir, "a", { maxFiles: 1 });
    expect(capped.entries).toHaveLength(1);
    expect(capped.skipped).toEqual(["a/ep1/turns.jsonl"]);
    expect((await collectFiles(join(dir, "missing"), "a")).entries).toEqual([]);
  });
});

describe("LogTap", () => {
  it("copies pino lines to the recordings in progress only, dropping the oldest past the cap", () => {
    const tap = new LogTap();
    const log = pino({ level: "info" }, pino.multistream([{ stream: tap, level: "trace" }]));
    log.info("before");
    const r = tap.start(200);
    log.info({ epoch: 42 }, "during");
    const text = tap.stop(r);
    log.info("after");
    const lines = text
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { msg: string; epoch?: number });
    expect(lines.map((l) => l.msg)).toEqual(["during"]);
    expect(lines[0]!.epoch).toBe(42);

    const small = tap.start(150);
    for (let i = 0; i < 10; i++) log.info({ i }, "line");
    const kept = tap.stop(small).trim().split("\n");
    expect(JSON.parse(kept[0]!)).toMatchObject({ msg: "log.truncated" });
    expect(JSON.parse(kept.at(-1)!)).toMatchObject({ i: 9 });
    expect(kept.length).toBeLessThan(11);
  });
});
