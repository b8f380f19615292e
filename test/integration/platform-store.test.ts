import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { winnerCurrentSchema } from "../../src/platform/index.js";
import {
  type Db,
  durably,
  EvaluationRepo,
  LogUploadRepo,
  MARK,
  openDb,
  PlatformMarksRepo,
  ScoredEpochRepo,
  VerdictOutboxRepo,
  WINNER_FALLBACK_TTL_MS,
  WinnerCacheRepo,
} from "../../src/store/index.js";

/** The network these rows belong to: a genesis hash. */
const NET = `0x${"ab".repeat(32)}`;
let dir: string;
let db: Db;
const reopen = () => {
  db.close();
  db = openDb(join(dir, "v.sqlite"));
  return db;
};

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "platform-store-"));
  db = openDb(join(dir, "v.sqlite"));
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("migration 005", () => {
  it("is applied once and its tables exist", () => {
    const v = db.prepare("SELECT version, name FROM schema_migrations WHERE version = 5").get();
    expect(v).toEqual({ version: 5, name: "platform" });
    const tables = (
      db.prepare("SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'platform_%'").all() as {
        name: string;
      }[]
    ).map((r) => r.name);
    expect(tables.sort()).toEqual([
      "platform_log_uploads",
      "platform_marks",
      "platform_outbox",
      "platform_scored_epochs",
      "platform_winner_cache",
    ]);
    reopen();
    expect(db.prepare("SELECT count(*) AS n FROM schema_migrations WHERE version = 5").get()).toEqual({
      n: 1,
    });
  });
});

describe("scored epochs", () => {
  it("the first mark wins and survives a reopen", () => {
    const r = new ScoredEpochRepo(db, NET);
    expect(r.has(7, "5V")).toBe(false);
    expect(
      r.mark({
        epochId: 7,
        validatorHotkey: "5V",
        score: 1.25,
        qualified: true,
        rejected: false,
        scoredAt: 10,
      }),
    ).toBe(true);
    expect(r.mark({ epochId: 7, validatorHotkey: "5V", score: 0, scoredAt: 20 })).toBe(false);
    const again = new ScoredEpochRepo(reopen(), NET);
    expect(again.get(7, "5V")).toEqual({
      epochId: 7,
      validatorHotkey: "5V",
      challengerHotkey: null,
      packHash: null,
      specNumber: null,
      score: 1.25,
      qualified: true,
      rejected: false,
      scoredAt: 10,
    });
    expect(again.has(7, "5Other")).toBe(false);
    again.mark({ epochId: 9, validatorHotkey: "5V", scoredAt: 30 });
    expect(again.latest("5V")?.epochId).toBe(9);
  });
});

describe("outbox repo", () => {
  it("enqueue validates the verdict, marks the epoch scored in the same transaction", () => {
    const o = new VerdictOutboxRepo(db, NET);
    expect(() =>
      o.enqueue({
        epochId: 1,
        validatorHotkey: "5V",
        verdict: { spec_number: 1, challenger: { score: 2, qualified: true, rejected: true } },
        nowMs: 1,
      }),
    ).toThrow();
    expect(new ScoredEpochRepo(db, NET).has(1, "5V")).toBe(false);
    const { entry } = o.enqueue({
      epochId: 1,
      validatorHotkey: "5V",
      verdict: {
        spec_number: 2,
        challenger: { score: 0, qualified: false, rejected: true, rejection_detail: "x" },
      },
      nowMs: 5,
    });
    expect(entry).toMatchObject({ state: "pending", attempts: 0, nextAttemptAt: 5, createdAt: 5 });
    expect(new ScoredEpochRepo(db, NET).get(1, "5V")).toMatchObject({
      specNumber: 2,
      score: 0,
      qualified: false,
      rejected: true,
    });
  });

  it("a transition applies only to a pending entry (no double counting)", () => {
    const o = new VerdictOutboxRepo(db, NET);
    const { entry } = o.enqueue({
      epochId: 2,
      validatorHotkey: "5V",
      verdict: { spec_number: 1, challenger: { score: 1, qualified: true } },
      nowMs: 1,
    });
    expect(o.apply(entry.id, { state: "delivered", outcome: "delivered", reason: null }, 2, 200)).toBe(true);
    expect(o.apply(entry.id, { state: "delivered", outcome: "duplicate", reason: "dup" }, 3, 409)).toBe(
      false,
    );
    expect(o.apply(entry.id, { state: "pending", nextAttemptAt: 9, reason: "x" }, 3)).toBe(false);
    expect(o.byId(entry.id)).toMatchObject({
      state: "delivered",
      outcome: "delivered",
      deliveredAt: 2,
      lastStatus: 200,
    });
  });
});

describe("winner cache", () => {
  const winner = winnerCurrentSchema.parse({
    winner: { hotkey: "5W", uid: 3, pack_hash: "ab", score: "1.5", since_epoch_id: 4 },
    finalized_epoch: null,
    submissions: [
      { validator_hotkey: "5V", validator_stake: 10, challenger_score: 1.5, challenger_qualified: true },
    ],
  });

  it("is empty until written; fresh within the TTL, stale after it; survives a reopen", () => {
    const c = new WinnerCacheRepo(db, NET);
    expect(c.read(0)).toBeUndefined();
    c.put(winner, 1_000);
    expect(c.read(1_000 + WINNER_FALLBACK_TTL_MS)).toMatchObject({
      fresh: true,
      ageMs: WINNER_FALLBACK_TTL_MS,
      fetchedAt: 1_000,
    });
    const stale = new WinnerCacheRepo(reopen(), NET).read(1_001 + WINNER_FALLBACK_TTL_MS);
    expect(stale?.fresh).toBe(false);
    expect(stale?.winner).toEqual(winner);
    expect(new WinnerCacheRepo(db, NET).read(5_000, 3_000)?.fresh).toBe(false);
  });

  it("a refresh replaces the row; a payload that no longer parses reads as no cache (the safe side)", () => {
    const c = new WinnerCacheRepo(db, NET);
    c.put(winner, 1);
    c.put({ ...winner, winner: null }, 2);
    expect(c.read(2)?.winner.winner).toBeNull();
    expect(db.prepare("SELECT count(*) AS n FROM platform_winner_cache").get()).toEqual({ n: 1 });
    db.prepare("UPDATE platform_winner_cache SET payload = ?").run('{"submissions": "broken"}');
    expect(c.read(3)).toBeUndefined();
  });
});

describe("log uploads and marks", () => {
  it("pending uploads are replayed oldest first until marked uploaded", () => {
    const l = new LogUploadRepo(db, NET);
    const a = l.enqueue({
      kind: "eval",
      evalId: "20260320_143025_e1",
      epochId: 1,
      meta: { miner_hotkey: "5M", miner_uid: 7, block_height: 12, pack_hash: "ab" },
      archivePath: "/data/logs/a.tar.gz",
      sizeBytes: 100,
      nowMs: 10,
    });
    l.enqueue({
      kind: "cycle",
      evalId: "20260320_143025_e1",
      meta: { block_height: 12 },
      archivePath: "/c",
      sizeBytes: 5,
      nowMs: 20,
    });
    expect(
      l.enqueue({
        kind: "eval",
        evalId: "20260320_143025_e1",
        meta: {},
        archivePath: "/other",
        sizeBytes: 1,
        nowMs: 30,
      }).id,
    ).toBe(a.id);
    expect(l.pending().map((u) => u.kind)).toEqual(["eval", "cycle"]);
    expect(l.pending(15).map((u) => u.kind)).toEqual(["cycle"]);
    l.markFailed(a.id, "HTTP 500");
    expect(l.pending()[0]).toMatchObject({ attempts: 1, lastError: "HTTP 500", meta: { miner_uid: 7 } });
    expect(l.markUploaded(a.id, 40)).toBe(true);
    expect(l.markUploaded(a.id, 41)).toBe(false);
    expect(new LogUploadRepo(reopen(), NET).pending().map((u) => u.kind)).toEqual(["cycle"]);
  });

  it("marks keep the latest instant per name", () => {
    const m = new PlatformMarksRepo(db, NET);
    expect(m.get(MARK.heartbeatSent)).toBeUndefined();
    m.set(MARK.heartbeatSent, 100);
    m.set(MARK.heartbeatSent, 200, "ok");
    expect(new PlatformMarksRepo(reopen(), NET).get(MARK.heartbeatSent)).toEqual({ at: 200, detail: "ok" });
  });
});

describe("votes are committed with synchronous=FULL, everything else with NORMAL", () => {
  /** The synchronous level in force at each transaction's commit (durably opens one per write). */
  function levelsAtCommit(d: Db): number[] {
    const levels: number[] = [];
    const tx = d.transaction.bind(d);
    d.transaction = ((fn: (...a: unknown[]) => unknown) => {
      const wrapped = tx(fn);
      return Object.assign((...a: unknown[]) => {
        const out = wrapped(...a);
        levels.push(d.pragma("synchronous", { simple: true }) as number);
        return out;
      }, wrapped);
    }) as typeof d.transaction;
    return levels;
  }
  const FULL = 2;
  const NORMAL = 1;

  it("the outbox, the scored mark and a finished evaluation's verdict", () => {
    expect(db.pragma("synchronous", { simple: true })).toBe(NORMAL);
    const levels = levelsAtCommit(db);
    const o = new VerdictOutboxRepo(db, NET);
    const { entry } = o.enqueue({
      epochId: 3,
      validatorHotkey: "5V",
      verdict: { spec_number: 1, challenger: { score: 1, qualified: true } },
      nowMs: 1,
    });
    o.markAttempt(entry.id, 2);
    o.apply(entry.id, { state: "pending", nextAttemptAt: 9, reason: "retry" }, 3, 503);
    o.apply(entry.id, { state: "delivered", outcome: "delivered", reason: null }, 4, 200);
    o.closeEpochsBefore("5V", 4, 5);
    new ScoredEpochRepo(db, NET).mark({ epochId: 9, validatorHotkey: "5V", scoredAt: 6 });
    const ev = new EvaluationRepo(db, NET);
    ev.create({
      id: "e1",
      resumeKey: "k",
      packHash: "h",
      spec: 1,
      scenarios: ["a"],
      source: "epoch",
      meta: {},
    });
    ev.finish("e1", "scored", null, { spec_number: 1 });
    expect(levels).toEqual([FULL, FULL, FULL, FULL, FULL, FULL, FULL]);
    // …and the connection is back to NORMAL for everything else.
    expect(db.pragma("synchronous", { simple: true })).toBe(NORMAL);
  });

  it("restored after a failed write; inside a caller's transaction the outer commit decides", () => {
    expect(() =>
      durably(db, () => {
        throw new Error("boom");
      }),
    ).toThrow("boom");
    expect(db.pragma("synchronous", { simple: true })).toBe(NORMAL);
    const seen: number[] = [];
    db.transaction(() =>
      durably(db, () => seen.push(db.pragma("synchronous", { simple: true }) as number)),
    )();
    expect(seen).toEqual([NORMAL]);
    const outer: number[] = [];
    durably(db, () => durably(db, () => outer.push(db.pragma("synchronous", { simple: true }) as number)));
    expect(outer).toEqual([FULL]);
  });
});
