/**
 * The version the platform gates on (issue 31 item 1). Every score, progress report and heartbeat
 * sends `version` = the upstream release this build implements (src/subnet.ts UPSTREAM_RELEASE);
 * the platform stand-in answers the POST 200 whatever the version and, at finalize, drops a vote
 * below its `min_supported` (INCENTIVE_MECHANISM.md "Submission Filter Pipeline" step [6]) — which
 * the daemon sees on GET /winner/current and turns into the `vote_not_counted` alarm with its fix.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { UPSTREAM_RELEASE } from "../../src/subnet.js";
import { USER_AGENT } from "../../src/version.js";
import { until } from "../helpers/daemon.js";
import { readPinPack, runCleanups, startDaemon, type World, world } from "../helpers/daemon-world.js";

let pinBytes: Buffer;
beforeAll(async () => {
  pinBytes = await readPinPack();
});
afterEach(runCleanups);

async function voteAndFinalize(w: World, minSupported: string) {
  w.fake.minSupportedVersion = minSupported;
  const epoch = w.fake.openEpoch({
    packBytes: pinBytes,
    challengerHotkey: w.subnet.challenger,
    specNumber: 900,
  });
  const r = await startDaemon(w, { scenarios: ["alpha"], script: () => ({ quality: 0.5 }) });
  await until(() => (w.fake.scores.get(epoch.challenge_epoch_id)?.length ?? 0) === 1, 30_000, "the verdict");
  await until(() => w.fake.progress.length > 0, 10_000, "a progress report");
  w.fake.finalizeEpoch();
  return { r, epoch };
}

describe("the version the platform gates on", () => {
  it("every score, progress report and heartbeat says the upstream release; every request names this build", async () => {
    const w = await world();
    const { r, epoch } = await voteAndFinalize(w, UPSTREAM_RELEASE);
    expect(w.fake.scores.get(epoch.challenge_epoch_id)![0]).toMatchObject({ version: UPSTREAM_RELEASE });
    expect(w.fake.heartbeats[0]).toMatchObject({ version: UPSTREAM_RELEASE });
    expect(w.fake.progress[0]).toMatchObject({ version: UPSTREAM_RELEASE });
    const platformCalls = w.fake.received.filter((q) => q.route !== "pack");
    expect(platformCalls.length).toBeGreaterThan(3);
    expect(new Set(platformCalls.map((q) => q.userAgent))).toEqual(new Set([USER_AGENT]));
    // A platform whose floor is this release counts the vote: the winner loop sees it counted, no alarm.
    expect(w.fake.filtered.get(epoch.challenge_epoch_id)).toEqual([]);
    const sawFinalized = (l: string) =>
      l.includes('"msg":"winner.seat_check') && l.includes(`"epoch":${epoch.challenge_epoch_id}`);
    await until(() => r.logs.some(sawFinalized), 10_000, "a winner tick over the finalized epoch");
    expect(r.live.alarms.has("vote_not_counted")).toBe(false);
  });

  it("a platform whose min_supported is newer drops the vote at finalize: an alarm with the fix, not a silent loss", async () => {
    const w = await world();
    const { r, epoch } = await voteAndFinalize(w, "0.7.1");
    expect(w.fake.filtered.get(epoch.challenge_epoch_id)).toEqual([
      {
        validator_hotkey: w.wallet.ss58,
        step: 6,
        reason: `version ${UPSTREAM_RELEASE} < min_supported 0.7.1`,
      },
    ]);
    await until(() => r.live.alarms.has("vote_not_counted"), 10_000, "the vote_not_counted alarm");
    const alarm = r.live.alarms.get("vote_not_counted")!;
    expect(alarm.severity).toBe("error");
    expect(alarm.message).toContain(
      `epoch ${epoch.challenge_epoch_id} finalized without this validator's vote`,
    );
    expect(alarm.message).toContain(`sends version ${UPSTREAM_RELEASE}`);
    expect(alarm.message).toContain("Fix: upgrade trajrl-validator");
    expect(r.logs.some((l) => l.includes('"msg":"winner.vote_not_counted"'))).toBe(true);

    // The next epoch, counted (the platform's floor is back at this release): the alarm clears.
    w.fake.minSupportedVersion = UPSTREAM_RELEASE;
    const next = w.fake.openEpoch({
      packBytes: pinBytes,
      challengerHotkey: w.subnet.challenger,
      specNumber: 900,
    });
    await until(
      () => (w.fake.scores.get(next.challenge_epoch_id)?.length ?? 0) === 1,
      30_000,
      "the next verdict",
    );
    w.fake.finalizeEpoch();
    await until(() => !r.live.alarms.has("vote_not_counted"), 10_000, "the alarm to clear");
  });
});
