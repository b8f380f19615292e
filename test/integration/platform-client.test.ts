import { Writable } from "node:stream";
import { gzipSync } from "node:zlib";
import { Keyring } from "@polkadot/keyring";
import { cryptoWaitReady } from "@polkadot/util-crypto";
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createLogger } from "../../src/log.js";
import {
  challengeScoreMessage,
  PlatformClient,
  type PlatformClientOptions,
  type ScoreVerdict,
  type Signer,
  signerFromPair,
} from "../../src/platform/index.js";
import { FakePlatform } from "../fakes/platform.js";
import { freePort as deadPort } from "../helpers/ports.js";

let signer: Signer;
let stranger: Signer;
let fake: FakePlatform;

const verdict: ScoreVerdict = {
  spec_number: 1,
  challenger: {
    score: 2.6667,
    qualified: true,
    scenario_results: { "fix-the-build": { score: 1, weight: 1, qualified: true } },
  },
  llm_base_url: "http://127.0.0.1:8790/v1",
  llm_model: "auto",
  bench_image_hash: "sha256:aaaa",
  harness_image_hash: "sha256:bbbb",
  harness_name: "trajrl-validator-ts",
  harness_version: "0.1.0",
};

const client = (over: Partial<PlatformClientOptions> = {}) =>
  new PlatformClient({ baseUrl: fake.url, signer, version: "0.1.0-test", ...over });

/** A signer that signs a different message than the one it claims: the fake must refuse it. */
const tampering = (s: Signer, rewrite: (m: string) => string): Signer => ({
  ss58: s.ss58,
  sign: (m) => s.sign(rewrite(m)),
});

/** A port with nothing listening (bound, then closed). */
beforeAll(async () => {
  await cryptoWaitReady();
  const kr = new Keyring({ type: "sr25519", ss58Format: 42 });
  signer = signerFromPair(kr.addFromUri("//PlatformClientTest"));
  stranger = signerFromPair(kr.addFromUri("//NotAValidator"));
});

beforeEach(async () => {
  fake = await FakePlatform.start({ validators: [signer.ss58] });
});
afterEach(async () => {
  await fake.close();
});

describe("GET /api/v2/epoch/current", () => {
  it("404 means no epoch: null", async () => {
    expect(await client().getEpochCurrent()).toBeNull();
    expect(fake.requests("epoch.current")).toHaveLength(1);
  });

  it("is signed in the query (hotkey, timestamp, signature) and unlocks the pack URL", async () => {
    const e = fake.openEpoch({ specNumber: 3 });
    const cur = await client().getEpochCurrent();
    expect(cur?.epoch?.challenge_epoch_id).toBe(e.challenge_epoch_id);
    expect(cur?.epoch?.challenger_pack_url).toBe(e.challenger_pack_url);
    expect(cur?.epoch?.challenger_pack_hash).toBe(e.challenger_pack_hash);
    expect(cur?.epoch?.spec_number).toBe(3);
    const req = fake.requests("epoch.current")[0]!;
    expect(Object.keys(req.query).sort()).toEqual(["hotkey", "signature", "timestamp"]);
    expect(req.signature).toEqual({
      message: `trajectoryrl-epoch-current:${signer.ss58}:${req.query.timestamp}`,
      valid: true,
    });
  });

  it("a tampered signature soft-falls-through: the epoch is returned without its pack URL", async () => {
    fake.openEpoch();
    const cur = await client({
      signer: tampering(signer, (m) => m.replace("epoch-current", "heartbeat")),
    }).getEpochCurrent();
    expect(cur?.epoch?.challenger_pack_url).toBeNull();
    expect(fake.requests("epoch.current")[0]!.signature?.valid).toBe(false);
  });

  it("a timestamp outside the server's ±5 min also hides the URL", async () => {
    fake.openEpoch();
    const cur = await client({ now: () => Date.now() - 10 * 60_000 }).getEpochCurrent();
    expect(cur?.epoch?.challenger_pack_url).toBeNull();
  });

  it.each([
    ["a body that is not JSON", "<html>oops</html>"],
    ["an epoch without an id", JSON.stringify({ success: true, epoch: { challenger_hotkey: "5x" } })],
    ["a JSON array", "[]"],
  ])("rejects %s with platform_malformed_response, logged with the reason", async (_, body) => {
    const lines: string[] = [];
    const log = createLogger({
      level: "warn",
      destination: new Writable({
        write(c, _e, cb) {
          lines.push(String(c));
          cb();
        },
      }),
    });
    fake.inject("epoch.current", { kind: "malformed", body });
    await expect(client({ log }).getEpochCurrent()).rejects.toMatchObject({
      code: "platform_malformed_response",
      failureClass: "infra",
    });
    const logged = lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l.msg === "platform.malformed_response");
    expect(logged?.endpoint).toBe("epoch.current");
    expect(typeof logged?.reason).toBe("string");
    expect(JSON.stringify(lines)).not.toContain("signature=0x");
  });

  it("5xx is a retryable platform_http_error", async () => {
    fake.inject("epoch.current", { kind: "status", status: 502 });
    await expect(client().getEpochCurrent()).rejects.toMatchObject({
      code: "platform_http_error",
      retryable: true,
    });
  });
});

describe("GET /api/v2/winner/current", () => {
  it("parses the votes; 404 is a cold start; malformed is a typed error", async () => {
    fake.winnerResponse = {
      success: true,
      winner: { hotkey: "5W", uid: 3, pack_hash: "ab", pack_url: null, score: "1.5", since_epoch_id: "99" },
      finalized_epoch: {
        challenge_epoch_id: 99,
        challenger_hotkey: "5W",
        challenger_pack_hash: "ab",
        outcome: "winner_replaced",
        winner_replaced: true,
        finalized_at: "2026-05-09T01:30:00.000Z",
      },
      submissions: [
        {
          validator_hotkey: "5V1",
          validator_stake: 10,
          challenger_score: 1.5,
          challenger_qualified: true,
          challenger_rejected: false,
        },
      ],
    };
    const w = await client().getWinnerCurrent();
    expect(w.winner?.score).toBe(1.5);
    expect(w.winner?.since_epoch_id).toBe(99);
    expect(w.submissions).toHaveLength(1);
    expect(fake.requests("winner.current")[0]!.query).toEqual({});

    fake.winnerResponse = null;
    expect(await client().getWinnerCurrent()).toEqual({
      winner: null,
      finalized_epoch: null,
      submissions: [],
    });

    fake.inject("winner.current", { kind: "malformed", body: JSON.stringify({ submissions: "none" }) });
    await expect(client().getWinnerCurrent()).rejects.toMatchObject({ code: "platform_malformed_response" });
  });

  it("a response larger than the cap is refused, not buffered", async () => {
    fake.inject("winner.current", { kind: "malformed", body: `{"pad":"${"x".repeat(5 * 1024 * 1024)}"}` });
    await expect(client().getWinnerCurrent()).rejects.toMatchObject({ code: "platform_malformed_response" });
  });

  it("a hung server times out (platform_timeout); the caller's abort is 'aborted'", async () => {
    fake.inject("winner.current", { kind: "hang", ms: 20_000 });
    const t0 = performance.now();
    await expect(client({ timeouts: { read: 300 } }).getWinnerCurrent()).rejects.toMatchObject({
      code: "platform_timeout",
      retryable: true,
    });
    expect(performance.now() - t0).toBeLessThan(10_000);

    fake.inject("winner.current", { kind: "hang", ms: 20_000 });
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    await expect(client().getWinnerCurrent({ signal: ac.signal })).rejects.toMatchObject({
      code: "aborted",
      retryable: false,
    });
  });

  it("nothing listening is platform_unreachable", async () => {
    const c = new PlatformClient({ baseUrl: `http://127.0.0.1:${await deadPort()}/`, signer });
    await expect(c.getWinnerCurrent()).rejects.toMatchObject({
      code: "platform_unreachable",
      retryable: true,
    });
  });
});

describe("POST /api/v2/epoch/{id}/score: every result class", () => {
  it("delivered: the fake verifies the documented message and gets the documented body", async () => {
    const e = fake.openEpoch();
    const out = await client().postScore(e.challenge_epoch_id, verdict);
    expect(out.kind).toBe("delivered");
    expect(out.kind === "delivered" && out.receipt?.challenger?.pack_hash).toBe(e.challenger_pack_hash);
    const req = fake.requests("epoch.score")[0]!;
    const body = req.body as Record<string, unknown>;
    expect(req.signature).toEqual({
      message: challengeScoreMessage(signer.ss58, body.timestamp as number, e.challenge_epoch_id),
      valid: true,
    });
    expect(Object.keys(body).slice(0, 5)).toEqual([
      "validator_hotkey",
      "timestamp",
      "signature",
      "version",
      "spec_number",
    ]);
    expect(body).toMatchObject({
      validator_hotkey: signer.ss58,
      version: "0.1.0-test",
      spec_number: 1,
      challenger: verdict.challenger,
      llm_base_url: verdict.llm_base_url,
      llm_model: "auto",
      bench_image_hash: "sha256:aaaa",
      harness_image_hash: "sha256:bbbb",
      harness_name: "trajrl-validator-ts",
      harness_version: "0.1.0",
    });
    expect(fake.scores.get(e.challenge_epoch_id)).toHaveLength(1);
  });

  it("a tampered message is rejected by the fake (401) and nothing is recorded", async () => {
    const e = fake.openEpoch();
    // Signs the epoch id + 1: the classic cross-epoch replay the id in the message exists to stop.
    const bad = tampering(signer, (m) => m.replace(/:(\d+)$/, (_, id) => `:${Number(id) + 1}`));
    const out = await client({ signer: bad }).postScore(e.challenge_epoch_id, verdict);
    expect(out).toMatchObject({ kind: "rejected", status: 401, code: "platform_unauthorized" });
    expect(fake.requests("epoch.score")[0]!.signature?.valid).toBe(false);
    expect(fake.scores.get(e.challenge_epoch_id)).toBeUndefined();
  });

  it("rejection verdicts go out as rejected: true, score 0", async () => {
    const e = fake.openEpoch();
    const out = await client().postScore(e.challenge_epoch_id, {
      spec_number: 1,
      challenger: { score: 0, qualified: false, rejected: true, rejection_detail: "pack_verify_failed" },
    });
    expect(out.kind).toBe("delivered");
    expect(fake.scores.get(e.challenge_epoch_id)![0]!.challenger).toEqual({
      score: 0,
      qualified: false,
      rejected: true,
      rejection_detail: "pack_verify_failed",
    });
  });

  it("duplicate: a second POST for the same epoch is a 409 duplicate", async () => {
    const e = fake.openEpoch();
    await client().postScore(e.challenge_epoch_id, verdict);
    expect(await client().postScore(e.challenge_epoch_id, verdict)).toMatchObject({
      kind: "duplicate",
      status: 409,
    });
    expect(fake.scores.get(e.challenge_epoch_id)).toHaveLength(1);
  });

  it("finalized: a POST after the epoch closed", async () => {
    const e = fake.openEpoch();
    fake.closeEpoch();
    expect(await client().postScore(e.challenge_epoch_id, verdict)).toMatchObject({
      kind: "finalized",
      message: "epoch is finalized",
    });
  });

  it("retryable: 503, a timeout, a reset connection, nothing listening", async () => {
    const e = fake.openEpoch();
    fake.inject("epoch.score", { kind: "status", status: 503 });
    expect(await client().postScore(e.challenge_epoch_id, verdict)).toMatchObject({
      kind: "retryable",
      status: 503,
    });
    fake.inject("epoch.score", { kind: "hang", ms: 5_000 });
    expect(await client({ timeouts: { score: 300 } }).postScore(e.challenge_epoch_id, verdict)).toMatchObject(
      {
        kind: "retryable",
        status: null,
        code: "platform_timeout",
      },
    );
    fake.inject("epoch.score", { kind: "reset" });
    expect(await client().postScore(e.challenge_epoch_id, verdict)).toMatchObject({
      kind: "retryable",
      code: "platform_unreachable",
    });
    const dead = new PlatformClient({ baseUrl: `http://127.0.0.1:${await deadPort()}`, signer });
    expect(await dead.postScore(e.challenge_epoch_id, verdict)).toMatchObject({
      kind: "retryable",
      code: "platform_unreachable",
    });
    expect(fake.scores.get(e.challenge_epoch_id)).toBeUndefined();
  });

  it("rejected: unknown epoch (404), a hotkey that is not a validator (403); a skewed clock (401 drift) is retried", async () => {
    fake.openEpoch();
    expect(await client().postScore(999_999, verdict)).toMatchObject({ kind: "rejected", status: 404 });
    const e = fake.openEpoch();
    expect(await client({ signer: stranger }).postScore(e.challenge_epoch_id, verdict)).toMatchObject({
      kind: "rejected",
      status: 403,
      code: "platform_unauthorized",
    });
    expect(
      await client({ now: () => Date.now() - 6 * 60_000 }).postScore(e.challenge_epoch_id, verdict),
    ).toMatchObject({
      // Each attempt signs a fresh timestamp: once the host's clock is right the verdict goes out.
      kind: "retryable",
      status: 401,
      code: "platform_clock_skew",
    });
  });

  it("only a 200 is delivered: another 2xx is sent again (upstream posts again on anything but 200)", async () => {
    const e = fake.openEpoch();
    fake.inject("epoch.score", { kind: "status", status: 201, body: '{"success": true}' });
    expect(await client().postScore(e.challenge_epoch_id, verdict)).toMatchObject({
      kind: "retryable",
      status: 201,
      code: "platform_unexpected_status",
    });
    expect((await client().postScore(e.challenge_epoch_id, verdict)).kind).toBe("delivered");
  });

  it("a 200 with an undocumented body still counts as delivered (receipt null)", async () => {
    const e = fake.openEpoch();
    fake.inject("epoch.score", { kind: "malformed", body: "OK" });
    expect(await client().postScore(e.challenge_epoch_id, verdict)).toEqual({
      kind: "delivered",
      status: 200,
      receipt: null,
    });
  });

  it("an invalid verdict or epoch id never leaves the machine; an abort throws", async () => {
    const e = fake.openEpoch();
    await expect(
      client().postScore(e.challenge_epoch_id, {
        spec_number: 1,
        challenger: { score: 3, qualified: true, rejected: true },
      }),
    ).rejects.toMatchObject({ code: "invalid_verdict", failureClass: "input" });
    await expect(client().postScore(0, verdict)).rejects.toMatchObject({ code: "invalid_epoch_id" });
    expect(fake.requests("epoch.score")).toHaveLength(0);
    fake.inject("epoch.score", { kind: "hang", ms: 5_000 });
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    await expect(
      client().postScore(e.challenge_epoch_id, verdict, { signal: ac.signal }),
    ).rejects.toMatchObject({
      code: "aborted",
    });
  });
});

describe("fire-and-forget posts", () => {
  it("heartbeat: signed trajectoryrl-heartbeat with the documented fields", async () => {
    const r = await client().postHeartbeat({
      last_eval_at: 1_700_000_000,
      llm_model: "auto",
      llm_base_url: "http://m/v1",
    });
    expect(r.ok).toBe(true);
    const req = fake.requests("validators.heartbeat")[0]!;
    expect(req.signature?.valid).toBe(true);
    expect(req.signature?.message).toMatch(new RegExp(`^trajectoryrl-heartbeat:${signer.ss58}:\\d+$`));
    expect(req.body).toMatchObject({
      hotkey: signer.ss58,
      version: "0.1.0-test",
      last_eval_at: 1_700_000_000,
      llm_model: "auto",
    });
    expect(Object.keys(req.body as object)).not.toContain("last_set_weights_at");
  });

  it("every signed POST is refused (401) when the signed message is not the endpoint's documented one", async () => {
    const e = fake.openEpoch();
    // Each rewrite is a plausible mistake: wrong prefix, missing extra, extras swapped.
    const bad = (from: RegExp, to: string) =>
      client({ signer: tampering(signer, (m) => m.replace(from, to)) });
    expect(await bad(/^trajectoryrl-heartbeat/, "trajectoryrl-logs").postHeartbeat()).toMatchObject({
      ok: false,
      status: 401,
    });
    const ev = {
      miner_hotkey: "5M",
      miner_uid: 1,
      scenario_name: "s1",
      scenario_index: 0,
      total_scenarios: 1,
      state: "running" as const,
    };
    expect(await bad(/:s1$/, "").postScenarioProgress(e.challenge_epoch_id, ev)).toMatchObject({
      ok: false,
      status: 401,
    });
    expect(await bad(/:(\d+):s1$/, ":s1:$1").postScenarioProgress(e.challenge_epoch_id, ev)).toMatchObject({
      ok: false,
      status: 401,
    });
    const archive = gzipSync(Buffer.from("x"));
    expect(
      await bad(/^trajectoryrl-logs/, "trajectoryrl-log").uploadCycleLogs({
        eval_id: "e",
        block_height: 1,
        archive,
      }),
    ).toMatchObject({ ok: false, status: 401 });
    expect(fake.heartbeats).toHaveLength(0);
    expect(fake.progress).toHaveLength(0);
    expect(fake.logs).toHaveLength(0);
    expect(fake.received.filter((r) => r.signature).every((r) => r.signature?.valid === false)).toBe(true);
  });

  it("heartbeat failures are results, never throws", async () => {
    fake.inject("validators.heartbeat", { kind: "status", status: 500 });
    expect(await client().postHeartbeat()).toMatchObject({ ok: false, status: 500, retryable: true });
    expect(await client({ signer: stranger }).postHeartbeat()).toMatchObject({
      ok: false,
      status: 403,
      retryable: false,
    });
    const dead = new PlatformClient({ baseUrl: `http://127.0.0.1:${await deadPort()}`, signer });
    expect(await dead.postHeartbeat()).toMatchObject({ ok: false, code: "platform_unreachable" });
  });

  it("scenario progress: signed with epoch id and scenario name, state carried", async () => {
    const e = fake.openEpoch();
    for (const state of ["running", "verifying", "complete"] as const) {
      const r = await client().postScenarioProgress(e.challenge_epoch_id, {
        miner_hotkey: e.challenger_hotkey,
        miner_uid: 7,
        scenario_name: "fix-the-build",
        scenario_index: 0,
        total_scenarios: 3,
        state,
        ...(state === "complete" ? { quality: 0.75, cost_usd: 0.12, duration_s: 40, timed_out: false } : {}),
      });
      expect(r.ok).toBe(true);
    }
    expect(fake.progress.map((p) => p.state)).toEqual(["running", "verifying", "complete"]);
    expect(fake.progress[0]).toMatchObject({
      quality: 0,
      scenario_name: "fix-the-build",
      validator_hotkey: signer.ss58,
    });
    expect(fake.progress[2]).toMatchObject({ quality: 0.75, cost_usd: 0.12 });
    const sig = fake.requests("epoch.scenario_progress")[0]!.signature!;
    expect(sig.valid).toBe(true);
    expect(sig.message).toMatch(
      new RegExp(
        `^trajectoryrl-scenario-progress:${signer.ss58}:\\d+:${e.challenge_epoch_id}:fix-the-build$`,
      ),
    );
  });

  it("scenario progress is bounded: at most N in flight (the rest dropped), each within its timeout", async () => {
    const e = fake.openEpoch();
    fake.inject("epoch.scenario_progress", { kind: "hang", ms: 20_000 }, 10);
    const c = client({ progressInFlight: 2, timeouts: { progress: 400 } });
    const ev = (k: number) => ({
      miner_hotkey: "5M",
      miner_uid: -1,
      scenario_name: `s${k}`,
      scenario_index: k,
      total_scenarios: 5,
      state: "running" as const,
    });
    const t0 = performance.now();
    const results = await Promise.all(
      [0, 1, 2, 3, 4].map((k) => c.postScenarioProgress(e.challenge_epoch_id, ev(k))),
    );
    expect(performance.now() - t0).toBeLessThan(10_000);
    expect(results.filter((r) => !r.ok && r.code === "platform_progress_dropped")).toHaveLength(3);
    expect(results.filter((r) => !r.ok && r.code === "platform_timeout")).toHaveLength(2);
    // The slots are free again afterwards: the next event is sent (and times out), not dropped.
    expect(await c.postScenarioProgress(e.challenge_epoch_id, ev(9))).toMatchObject({
      ok: false,
      code: "platform_timeout",
    });
  });

  it("log upload: multipart with the documented fields and a .tar.gz archive", async () => {
    const archive = gzipSync(Buffer.from("validator.log contents"));
    const r = await client().uploadLogs({
      eval_id: "20260320_143025_e1000",
      miner_hotkey: "5Miner",
      miner_uid: 7,
      block_height: 12345,
      pack_hash: "ab".repeat(32),
      epoch_number: 1000,
      spec_number: 1,
      archive,
    });
    expect(r).toMatchObject({ ok: true, status: 200 });
    expect(r.ok && r.receipt?.size_bytes).toBe(archive.length);
    const got = fake.logs[0]!;
    expect(got.route).toBe("logs.upload");
    expect(got.archive.equals(archive)).toBe(true);
    expect(got.fields).toMatchObject({
      validator_hotkey: signer.ss58,
      eval_id: "20260320_143025_e1000",
      miner_hotkey: "5Miner",
      miner_uid: "7",
      block_height: "12345",
      epoch_number: "1000",
      spec_number: "1",
    });
    const req = fake.requests("logs.upload")[0]!;
    expect(req.signature?.message).toBe(`trajectoryrl-logs:${signer.ss58}:${got.fields.timestamp}`);
    expect((req.body as Record<string, { name: string; type: string }>).log_archive).toMatchObject({
      name: "logs.tar.gz",
      type: "application/gzip",
    });
  });

  it("cycle logs go to /logs/cycle; an archive over 10 MiB is refused before sending", async () => {
    const archive = gzipSync(Buffer.from("cycle"));
    expect(
      (await client().uploadCycleLogs({ eval_id: "20260320_143025", block_height: 1, archive })).ok,
    ).toBe(true);
    expect(fake.logs[0]!.route).toBe("logs.cycle");
    const big = new Uint8Array(10 * 1024 * 1024 + 1);
    big[0] = 0x1f;
    big[1] = 0x8b;
    const r = await client().uploadLogs({
      eval_id: "x",
      miner_hotkey: "5M",
      miner_uid: 1,
      block_height: 1,
      pack_hash: "ab",
      archive: big,
    });
    expect(r).toMatchObject({ ok: false, code: "log_archive_too_large", retryable: false });
    expect(fake.requests("logs.upload")).toHaveLength(0);
  });
});
