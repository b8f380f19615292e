import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Keyring } from "@polkadot/keyring";
import { cryptoWaitReady } from "@polkadot/util-crypto";
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  type BackoffPolicy,
  deliverDueVerdicts,
  PlatformClient,
  type ScoreVerdict,
  type Signer,
  signerFromPair,
} from "../../src/platform/index.js";
import { type Db, openDb, ScoredEpochRepo, VerdictOutboxRepo } from "../../src/store/index.js";
import { FakePlatform } from "../fakes/platform.js";

/** The network these rows belong to: a genesis hash. */
const NET = `0x${"ab".repeat(32)}`;
let signer: Signer;
let fake: FakePlatform;
let dir: string;
let dbPath: string;
let db: Db | undefined;

const policy: BackoffPolicy = { initialMs: 1_000, factor: 2, maxMs: 60_000, jitter: 0, maxAgeMs: 3_600_000 };
const verdict: ScoreVerdict = {
  spec_number: 1,
  challenger: { score: 1.5, qualified: true, scenario_results: {} },
};

/** Open (or reopen: the "restart") the validator database. */
function open(): { outbox: VerdictOutboxRepo; scored: ScoredEpochRepo } {
  db?.close();
  db = openDb(dbPath);
  return { outbox: new VerdictOutboxRepo(db, NET), scored: new ScoredEpochRepo(db, NET) };
}

beforeAll(async () => {
  await cryptoWaitReady();
  signer = signerFromPair(new Keyring({ type: "sr25519", ss58Format: 42 }).addFromUri("//OutboxTest"));
});
beforeEach(async () => {
  fake = await FakePlatform.start({ validators: [signer.ss58] });
  dir = mkdtempSync(join(tmpdir(), "platform-outbox-"));
  dbPath = join(dir, "validator.sqlite");
});
afterEach(async () => {
  db?.close();
  db = undefined;
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("verdict outbox against the fake platform", () => {
  it("survives a 503 and a restart: delivered once, on the next run, and the epoch stays scored", async () => {
    const e = fake.openEpoch();
    let clock = 1_000_000_000_000;
    const client = new PlatformClient({ baseUrl: fake.url, signer, now: () => Date.now() });
    fake.inject("epoch.score", { kind: "status", status: 503 });

    // Run 1: the evaluation ends, the verdict is queued and the first POST meets a 503.
    let repos = open();
    const { created } = repos.outbox.enqueue({
      epochId: e.challenge_epoch_id,
      validatorHotkey: signer.ss58,
      verdict,
      nowMs: clock,
      packHash: e.challenger_pack_hash,
      challengerHotkey: e.challenger_hotkey,
    });
    expect(created).toBe(true);
    const r1 = await deliverDueVerdicts({ outbox: repos.outbox, client, policy, now: () => clock });
    expect(r1).toMatchObject({ attempted: 1, retrying: 1, delivered: 0 });
    expect(fake.requests("epoch.score").map((r) => r.status)).toEqual([503]);
    const pending = repos.outbox.get(e.challenge_epoch_id, signer.ss58)!;
    expect(pending).toMatchObject({
      state: "pending",
      attempts: 1,
      lastStatus: 503,
      nextAttemptAt: clock + 1_000,
    });
    expect(pending.lastError).toContain("HTTP 503");

    // The process dies here. Run 2 reopens the same file.
    repos = open();
    expect(repos.scored.has(e.challenge_epoch_id, signer.ss58)).toBe(true);
    expect(
      await deliverDueVerdicts({ outbox: repos.outbox, client, policy, now: () => clock }),
    ).toMatchObject({
      attempted: 0,
    });
    clock += 1_000;
    expect(
      await deliverDueVerdicts({ outbox: repos.outbox, client, policy, now: () => clock }),
    ).toMatchObject({
      attempted: 1,
      delivered: 1,
    });
    expect(repos.outbox.get(e.challenge_epoch_id, signer.ss58)).toMatchObject({
      state: "delivered",
      outcome: "delivered",
      attempts: 2,
      deliveredAt: clock,
    });
    expect(fake.scores.get(e.challenge_epoch_id)).toHaveLength(1);
    expect(fake.requests("epoch.score").every((r) => r.status !== 200 || r.signature?.valid)).toBe(true);

    // Run 3: nothing left to send; a re-enqueue of the same epoch changes nothing.
    repos = open();
    expect(
      repos.outbox.enqueue({
        epochId: e.challenge_epoch_id,
        validatorHotkey: signer.ss58,
        verdict,
        nowMs: clock,
      }).created,
    ).toBe(false);
    clock += 3_600_000;
    expect(
      await deliverDueVerdicts({ outbox: repos.outbox, client, policy, now: () => clock }),
    ).toMatchObject({ attempted: 0 });
    expect(fake.requests("epoch.score")).toHaveLength(2);
    expect(repos.outbox.counts()).toEqual({ pending: 0, delivered: 1, abandoned: 0 });
  });

  it("an answer lost after the server stored the vote: the retry's 409 duplicate is counted once, as delivered", async () => {
    const e = fake.openEpoch();
    let clock = 2_000_000_000_000;
    // The timeout must outlast the fake's handling (signature check included) on a loaded machine.
    const client = new PlatformClient({ baseUrl: fake.url, signer, timeouts: { score: 2_000 } });
    fake.inject("epoch.score", { kind: "hang", ms: 20_000, accept: true });
    const { outbox } = open();
    outbox.enqueue({ epochId: e.challenge_epoch_id, validatorHotkey: signer.ss58, verdict, nowMs: clock });

    expect(await deliverDueVerdicts({ outbox, client, policy, now: () => clock })).toMatchObject({
      retrying: 1,
    });
    expect(fake.scores.get(e.challenge_epoch_id)).toHaveLength(1);
    clock += 1_000;
    expect(await deliverDueVerdicts({ outbox, client, policy, now: () => clock })).toMatchObject({
      duplicate: 1,
      delivered: 0,
    });
    expect(outbox.get(e.challenge_epoch_id, signer.ss58)).toMatchObject({
      state: "delivered",
      outcome: "duplicate",
      attempts: 2,
    });
    expect(fake.scores.get(e.challenge_epoch_id)).toHaveLength(1);
    expect(outbox.counts().delivered).toBe(1);
  });

  it("409 'epoch is finalized' ends the entry: no further attempts", async () => {
    const e = fake.openEpoch();
    let clock = 3_000_000_000_000;
    const client = new PlatformClient({ baseUrl: fake.url, signer });
    const { outbox } = open();
    outbox.enqueue({ epochId: e.challenge_epoch_id, validatorHotkey: signer.ss58, verdict, nowMs: clock });
    fake.closeEpoch();
    expect(await deliverDueVerdicts({ outbox, client, policy, now: () => clock })).toMatchObject({
      finalized: 1,
    });
    expect(outbox.get(e.challenge_epoch_id, signer.ss58)).toMatchObject({
      state: "abandoned",
      outcome: "finalized",
      reason: "epoch is finalized",
      lastStatus: 409,
    });
    clock += 3_600_000;
    await deliverDueVerdicts({ outbox, client, policy, now: () => clock });
    expect(fake.requests("epoch.score")).toHaveLength(1);
  });

  it("a newer epoch closes older pending verdicts; another hotkey's entries are never sent by this one", async () => {
    const e1 = fake.openEpoch();
    const e2 = fake.openEpoch();
    const clock = 4_000_000_000_000;
    const client = new PlatformClient({ baseUrl: fake.url, signer });
    const { outbox } = open();
    outbox.enqueue({ epochId: e1.challenge_epoch_id, validatorHotkey: signer.ss58, verdict, nowMs: clock });
    outbox.enqueue({ epochId: e2.challenge_epoch_id, validatorHotkey: "5OldHotkey", verdict, nowMs: clock });
    expect(outbox.closeEpochsBefore(signer.ss58, e2.challenge_epoch_id, clock)).toBe(1);
    expect(outbox.get(e1.challenge_epoch_id, signer.ss58)).toMatchObject({
      state: "abandoned",
      outcome: "epoch_closed",
    });
    expect(await deliverDueVerdicts({ outbox, client, policy, now: () => clock })).toMatchObject({
      attempted: 0,
    });
    expect(fake.requests("epoch.score")).toHaveLength(0);
  });

  it("a verdict older than the maximum age is expired without being sent", async () => {
    const e = fake.openEpoch();
    const clock = 5_000_000_000_000;
    const client = new PlatformClient({ baseUrl: fake.url, signer });
    const { outbox } = open();
    outbox.enqueue({ epochId: e.challenge_epoch_id, validatorHotkey: signer.ss58, verdict, nowMs: clock });
    const r = await deliverDueVerdicts({ outbox, client, policy, now: () => clock + policy.maxAgeMs });
    expect(r).toMatchObject({ expired: 1, attempted: 0 });
    expect(outbox.get(e.challenge_epoch_id, signer.ss58)?.outcome).toBe("expired");
    expect(fake.requests("epoch.score")).toHaveLength(0);
  });

  it("an abort mid-POST leaves the entry pending and due (the attempt is counted)", async () => {
    const e = fake.openEpoch();
    const clock = 6_000_000_000_000;
    const client = new PlatformClient({ baseUrl: fake.url, signer });
    const { outbox } = open();
    outbox.enqueue({ epochId: e.challenge_epoch_id, validatorHotkey: signer.ss58, verdict, nowMs: clock });
    fake.inject("epoch.score", { kind: "hang", ms: 3_000 });
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    await expect(
      deliverDueVerdicts({ outbox, client, policy, now: () => clock }, { signal: ac.signal }),
    ).rejects.toMatchObject({
      code: "aborted",
    });
    expect(outbox.get(e.challenge_epoch_id, signer.ss58)).toMatchObject({ state: "pending", attempts: 1 });
    expect(outbox.due(signer.ss58, clock)).toHaveLength(1);
  });
});
