import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import fc from "fast-check";
import pino from "pino";
import tar from "tar-stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  buildArchive,
  collectFiles,
  LogTap,
  METER_ROWS_MAX,
  planTruncation,
  upstreamEpisodeFiles,
  upstreamMeterJson,
  upstreamPolicyLog,
} from "../../src/daemon/index.js";
import { meterArtifact, type Receipt, type UsageSummary } from "../../src/meter/index.js";

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

  it("keeps a pinned entry (the evidence) whole and cuts the others into what it leaves", async () => {
    const evidence = randomBytes(60_000);
    const big = randomBytes(300_000);
    const built = await buildArchive([{ name: "artifacts/big.bin", data: big }], 100_000, [
      { name: "evidence/e.tar.gz", data: evidence },
    ]);
    expect(built.gz.length).toBeLessThanOrEqual(100_000);
    const files = await untar(built.gz);
    expect(files.get("evidence/e.tar.gz")).toEqual(evidence);
    const kept = files.get("artifacts/big.bin")!;
    expect(kept.length).toBeGreaterThan(10_000);
    expect(kept.length).toBeLessThan(40_000);
    expect(built.truncated).toEqual({ "artifacts/big.bin": 300_000 });
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

describe("an episode's policy.log and meter.json in the upload, as upstream uploads them", () => {
  const lines = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `${tag} ${i}`).join("\n");

  it("policy.log: the last 64 KiB of the policy's own log, then the sidecar's last 200 lines", () => {
    const own = `${"x".repeat(100 * 1024)}\nEND-OF-POLICY-LOG`;
    const text = `${own}\n--- stdout/stderr ---\n${lines(500, "out")}\n--- stderr ---\n${lines(50, "err")}\n`;
    const up = upstreamPolicyLog(text);
    const [file, container] = up.split("\n--- stdout/stderr ---\n") as [string, string];
    expect(file.length).toBe(64 * 1024);
    expect(file.endsWith("END-OF-POLICY-LOG")).toBe(true);
    const kept = container.split("\n");
    expect(kept).toHaveLength(200);
    expect(kept.at(-1)).toBe("err 49");
    expect(kept[0]).toBe("out 351");
    // Our built-in sidecar logs to its stdout only: the whole file is the container's log.
    const builtin = upstreamPolicyLog(`${lines(300, "line")}\n`);
    expect(builtin.startsWith("--- stdout/stderr ---\nline 100\n")).toBe(true);
    expect(builtin.split("\n")).toHaveLength(201);
    expect(upstreamPolicyLog("")).toBe("");
  });

  it("meter.json: the summary's keys at the top, the rows (the first 2000), the provenance report", () => {
    const receipt = (seq: number): Receipt => ({
      episode_id: "e1",
      seq,
      started_at: "2026-12-04T10:00:00.000Z",
      ts: 1_796_378_400 + seq,
      model: "kimi-k3",
      status: 200,
      upstream_status: 200,
      stream: true,
      prompt_tokens: 10,
      cached_tokens: 0,
      completion_tokens: 5,
      usd: 0.00001,
      usd_pico: "10000000",
      reserved_usd: 0.001,
      reserved_pico: "1000000000",
      max_tokens: 100,
      clamped: false,
      retries: 0,
      ttfb_ms: 12,
      duration_ms: 40,
      request_id: `r${seq}`,
      content_sha: "c".repeat(16),
      tool_sha: null,
      tool_calls: 0,
      finish_reason: "stop",
      truncated: false,
      usage_estimated: false,
      error_code: null,
    });
    const summary: UsageSummary = {
      episode_id: "e1",
      cap_usd: 0.3,
      cost_usd: 0.0123456789,
      reserved_usd: 0,
      calls: 2_050,
      errors: 1,
      cut: 0,
      estimated_usd: 0,
      longest_wait_s: 0.2,
      refused_cap: 2,
      refused_model: 3,
      refused: { cap: 2, model: 3 },
      clamped: 4,
      overshoot_usd: 0,
      retries: 0,
      waited: 0,
      rows_dropped: 0,
      by_model: {
        "kimi-k3": {
          calls: 2_050,
          cost_usd: 0.0123456789,
          prompt_tokens: 1,
          cached_tokens: 0,
          completion_tokens: 1,
        },
      },
      tokens: { prompt: 1, cached: 0, completion: 1 },
    };
    // The artifact exactly as the episode writes it (src/meter's meterArtifact).
    const artifact = meterArtifact({
      episodeId: "e1",
      priceTableHash: "ab",
      summary,
      receipts: Array.from({ length: 2_050 }, (_, i) => receipt(i + 1)),
    });
    const provenance = { total: 3, matched: 2, unmatched: [4], coverage: 0.6667 };
    const out = JSON.parse(upstreamMeterJson(artifact, { provenance, quality: 1 })!);
    expect(Object.keys(out).slice(0, 10)).toEqual([
      "cost_usd",
      "calls",
      "errors",
      "refused_cap",
      "refused_model",
      "clamped",
      "overshoot_usd",
      "by_model",
      "tokens",
      "cap_usd",
    ]);
    expect(out).toMatchObject({
      cost_usd: 0.012346,
      calls: 2_050,
      by_model: { "kimi-k3": 0.012346 },
      rows_total: 2_050,
      provenance,
      episode_id: "e1",
      price_table_hash: "ab",
    });
    expect(out.rows).toHaveLength(METER_ROWS_MAX);
    // upstream's row field names, as the meter writes them
    expect(out.rows[0]).toMatchObject({
      model: "kimi-k3",
      status: 200,
      prompt: 10,
      completion: 5,
      rid: "r1",
    });
    expect(out).not.toHaveProperty("receipts");
    expect(upstreamMeterJson({ something: "else" }, {})).toBeNull();
  });

  it("the whole archive: rewritten per episode, the rest untouched, within the 10 MiB cap", async () => {
    const big = randomBytes(6 * 1024 * 1024).toString("base64"); // ~8 MiB that will not compress
    const meter = { episode_id: "e", price_table_hash: "h", summary: null, rows: [{ seq: 0 }], receipts: [] };
    const entries = upstreamEpisodeFiles([
      { name: "artifacts/a/policy.log", data: Buffer.from(`p\n--- stdout/stderr ---\n${lines(300, "l")}`) },
      { name: "artifacts/a/meter.json", data: Buffer.from(JSON.stringify(meter)) },
      { name: "artifacts/a/evaluation.json", data: Buffer.from('{"provenance": null}') },
      { name: "artifacts/a/transcript.txt", data: Buffer.from(big) },
      { name: "artifacts/b/meter.json", data: Buffer.from("not json") },
    ]);
    const built = await buildArchive(entries, 10 * 1024 * 1024);
    expect(built.gz.length).toBeLessThanOrEqual(10 * 1024 * 1024);
    const files = await untar(built.gz);
    expect(files.get("artifacts/a/policy.log")!.toString().split("\n")).toHaveLength(202);
    expect(JSON.parse(files.get("artifacts/a/meter.json")!.toString())).toMatchObject({
      rows: [{ seq: 0 }],
      provenance: null,
      summary: null,
    });
    expect(files.get("artifacts/b/meter.json")!.toString()).toBe("not json");
    expect(files.get("artifacts/a/evaluation.json")!.toString()).toBe('{"provenance": null}');
  });
});
