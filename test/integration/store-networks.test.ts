/**
 * Rows belong to one network (migration 008, src/store/networks.ts): the same epoch id on two
 * networks is two epochs, and each repository opened for a network reads only its rows. Rows from
 * before the migration: a rehearsal's (the built-in suite, spec 0) belong to no network; the others
 * wait unclaimed for the first real network's daemon; marks, the winner cache and weights attempts
 * (nothing tells a rehearsal's apart) belong to no network.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { winnerCurrentSchema } from "../../src/platform/index.js";
import {
  adoptUnclaimedRows,
  type Db,
  EvaluationRepo,
  LogUploadRepo,
  MARK,
  MIGRATIONS,
  openDb,
  PlatformMarksRepo,
  ScoredEpochRepo,
  UNKNOWN_NETWORK,
  VerdictOutboxRepo,
  WeightsRepo,
  WinnerCacheRepo,
} from "../../src/store/index.js";

const FINNEY = `0x${"2f".repeat(32)}`;
const LOCAL = `0x${"8b".repeat(32)}`;
const HOTKEY = "5Validator";
const winner = (hotkey: string | null) =>
  winnerCurrentSchema.parse({
    winner: hotkey ? { hotkey, uid: 2, pack_hash: "ab", score: 1, since_epoch_id: 3 } : null,
    finalized_epoch: null,
    submissions: [],
  });

let dir: string;
let db: Db;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "store-networks-"));
});
afterEach(() => {
  db?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A database as the validator left it before migration 008: a rehearsal's rows next to a real network's. */
function seedBeforeNetworks(path: string): void {
  const old = openDb(path, { migrations: MIGRATIONS.filter((m) => m.version < 8) });
  const verdict = (spec: number, score: number) =>
    JSON.stringify({ spec_number: spec, challenger: { score, qualified: true } });
  const scored = old.prepare(
    "INSERT INTO platform_scored_epochs (epoch_id, validator_hotkey, spec_number, score, scored_at) VALUES (?, ?, ?, ?, 1)",
  );
  scored.run(1000, HOTKEY, 0, 0.75); // the rehearsal's epoch 1000 (built-in suite)
  scored.run(41, HOTKEY, 27, 2.5); // finney's epoch 41
  const outbox = old.prepare(
    "INSERT INTO platform_outbox (epoch_id, validator_hotkey, payload, next_attempt_at, created_at) VALUES (?, ?, ?, 1, 1)",
  );
  outbox.run(1000, HOTKEY, verdict(0, 0.75));
  outbox.run(41, HOTKEY, verdict(27, 2.5));
  old
    .prepare("INSERT INTO platform_winner_cache (id, payload, fetched_at) VALUES (1, ?, 1)")
    .run(JSON.stringify(winner("5LocalWinner")));
  old.prepare("INSERT INTO platform_marks (name, at) VALUES (?, 1)").run(MARK.lastSetWeightsAt);
  old
    .prepare(
      "INSERT INTO weight_attempts (netuid, mode, uids, weights, version_key, outcome) VALUES (11, 'set_weights', '[0]', '[65535]', 3, 'included')",
    )
    .run();
  const upload = old.prepare(
    "INSERT INTO platform_log_uploads (kind, eval_id, epoch_id, meta, archive_path, size_bytes, created_at) VALUES ('eval', ?, ?, ?, '/a', 1, 1)",
  );
  upload.run("e1000", 1000, JSON.stringify({ spec_number: 0 }));
  upload.run("e41", 41, JSON.stringify({ spec_number: 27 }));
  const evaluation = old.prepare(
    "INSERT INTO evaluations (id, resume_key, pack_hash, spec, scenarios, source, epoch_id, status, meta) VALUES (?, ?, 'h', ?, '[]', ?, ?, 'running', '{}')",
  );
  evaluation.run("ev_rehearsal", "k1", 0, "epoch", "1000");
  evaluation.run("ev_finney", "k2", 27, "epoch", "41");
  evaluation.run("ev_eval_cli", "k3", 0, "local", null);
  old.close();
}

describe("rows from before migration 008", () => {
  it("a rehearsal's belong to no network; a real network's are adopted by the first daemon on finney or test", () => {
    const path = join(dir, "v.sqlite");
    seedBeforeNetworks(path);
    db = openDb(path);
    // Before any adoption no network reads any of them.
    expect(new ScoredEpochRepo(db, FINNEY).has(41, HOTKEY)).toBe(false);
    expect(new VerdictOutboxRepo(db, LOCAL).counts()).toEqual({ pending: 0, delivered: 0, abandoned: 0 });

    expect(adoptUnclaimedRows(db, FINNEY)).toEqual({
      platform_scored_epochs: 1,
      platform_outbox: 1,
      platform_log_uploads: 1,
      evaluations: 1,
    });
    const scored = new ScoredEpochRepo(db, FINNEY);
    expect(scored.get(41, HOTKEY)).toMatchObject({ score: 2.5, specNumber: 27 });
    // The rehearsal's epoch 1000 is not finney's: a real epoch 1000 is evaluated.
    expect(scored.has(1000, HOTKEY)).toBe(false);
    const outbox = new VerdictOutboxRepo(db, FINNEY);
    expect(outbox.due(HOTKEY, 10).map((e) => e.epochId)).toEqual([41]);
    expect(outbox.recent().map((e) => e.epochId)).toEqual([41]);
    expect(new LogUploadRepo(db, FINNEY).pending().map((u) => u.evalId)).toEqual(["e41"]);
    expect(
      new EvaluationRepo(db, FINNEY)
        .recent()
        .map((e) => e.id)
        .sort(),
    ).toEqual(["ev_eval_cli", "ev_finney"]);
    expect(
      new EvaluationRepo(db, FINNEY)
        .running()
        .map((e) => e.id)
        .sort(),
    ).toEqual(["ev_eval_cli", "ev_finney"]);
    // Marks, the winner cache and weights attempts: no network's.
    expect(new PlatformMarksRepo(db, FINNEY).get(MARK.lastSetWeightsAt)).toBeUndefined();
    expect(new WinnerCacheRepo(db, FINNEY).read(2)).toBeUndefined();
    expect(new WeightsRepo(db, FINNEY).recent(11)).toEqual([]);
    // …and nobody's: not even a local network's.
    expect(new ScoredEpochRepo(db, LOCAL).has(1000, HOTKEY)).toBe(false);
    expect(new WinnerCacheRepo(db, LOCAL).read(2)).toBeUndefined();
    expect(new EvaluationRepo(db, LOCAL).recent().map((e) => e.id)).toEqual(["ev_eval_cli"]);
    expect(
      db.prepare("SELECT count(*) AS n FROM platform_scored_epochs WHERE network = ?").get(UNKNOWN_NETWORK),
    ).toEqual({ n: 1 });
    // Adopted once: a second real network finds nothing left.
    expect(adoptUnclaimedRows(db, `0x${"8f".repeat(32)}`)).toEqual({});
  });
});

describe("two networks in one database", () => {
  it("the same epoch id is two epochs; every repository reads its own network's rows", () => {
    db = openDb(join(dir, "v.sqlite"));
    const verdict = (score: number) => ({ spec_number: 27, challenger: { score, qualified: true } });
    const local = new VerdictOutboxRepo(db, LOCAL);
    const finney = new VerdictOutboxRepo(db, FINNEY);
    expect(
      local.enqueue({ epochId: 1000, validatorHotkey: HOTKEY, verdict: verdict(1), nowMs: 1 }).created,
    ).toBe(true);
    expect(new ScoredEpochRepo(db, LOCAL).has(1000, HOTKEY)).toBe(true);
    expect(new ScoredEpochRepo(db, FINNEY).has(1000, HOTKEY)).toBe(false);
    expect(finney.get(1000, HOTKEY)).toBeUndefined();
    expect(finney.due(HOTKEY, 10)).toEqual([]);
    expect(
      finney.enqueue({ epochId: 1000, validatorHotkey: HOTKEY, verdict: verdict(2), nowMs: 2 }).created,
    ).toBe(true);
    expect(local.get(1000, HOTKEY)?.verdict.challenger.score).toBe(1);
    expect(finney.get(1000, HOTKEY)?.verdict.challenger.score).toBe(2);
    // Closing the epochs before 2000 on one network leaves the other's pending.
    expect(local.closeEpochsBefore(HOTKEY, 2000, 3)).toBe(1);
    expect(finney.counts()).toEqual({ pending: 1, delivered: 0, abandoned: 0 });
    expect(local.byId(finney.get(1000, HOTKEY)!.id)).toBeUndefined();

    new WinnerCacheRepo(db, LOCAL).put(winner("5LocalWinner"), 1);
    expect(new WinnerCacheRepo(db, FINNEY).read(2)).toBeUndefined();
    new WinnerCacheRepo(db, FINNEY).put(winner(null), 2);
    expect(new WinnerCacheRepo(db, LOCAL).read(3)?.winner.winner?.hotkey).toBe("5LocalWinner");

    new PlatformMarksRepo(db, LOCAL).set(MARK.lastEvalAt, 5);
    expect(new PlatformMarksRepo(db, FINNEY).get(MARK.lastEvalAt)).toBeUndefined();

    const weights = new WeightsRepo(db, LOCAL);
    const id = weights.start({ netuid: 11, mode: "set_weights", uids: [0], weights: [65535], versionKey: 3 });
    weights.finish(id, { outcome: "included" });
    expect(new WeightsRepo(db, FINNEY).lastIncluded(11)).toBeUndefined();
    expect(new WeightsRepo(db, FINNEY).get(id)).toBeUndefined();

    const evals = new EvaluationRepo(db, LOCAL);
    const row = { resumeKey: "same", packHash: "h", spec: 0, scenarios: ["a"], meta: {} };
    evals.create({ ...row, id: "ev_local", source: "epoch", epochId: "1000" });
    expect(new EvaluationRepo(db, FINNEY).findResumable("same")).toBeUndefined();
    expect(new EvaluationRepo(db, FINNEY).running()).toEqual([]);
    expect(evals.findResumable("same")?.id).toBe("ev_local");
  });
});
