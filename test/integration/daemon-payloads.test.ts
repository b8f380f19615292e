/**
 * What the daemon's own verdicts carry (issue 31 item 3): a pack that cannot be fetched is upstream's
 * `pack_verify_failed` rejection with the metadata every upstream submission carries (validator.py
 * `_score_challenger` at 2f32a51b8e3b): the resolved spec, `llm_base_url`, `llm_model`,
 * `judge_model`, and the bench its harness last pulled — never this validator's name as a harness.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { LOCKED_JUDGE_MODEL } from "../../src/subnet.js";
import { until } from "../helpers/daemon.js";
import { readPinPack, runCleanups, startDaemon, world } from "../helpers/daemon-world.js";

let pinBytes: Buffer;
beforeAll(async () => {
  pinBytes = await readPinPack();
});
afterEach(runCleanups);

describe("the pack-fetch rejection", () => {
  it("before any bench was pulled: judge_model, no harness; after one: the bench last pulled", async () => {
    const w = await world();
    const gone = w.fake.openEpoch({ packUrl: `${w.fake.url}/packs/0000.json`, specNumber: 26 });
    await startDaemon(w, { scenarios: ["a"], script: () => ({ quality: 0.5 }) });
    await until(
      () => (w.fake.scores.get(gone.challenge_epoch_id)?.length ?? 0) === 1,
      15_000,
      "the rejection",
    );
    const first = w.fake.scores.get(gone.challenge_epoch_id)![0]!;
    expect(first).toMatchObject({
      spec_number: 26,
      challenger: { score: 0, qualified: false, rejected: true, rejection_detail: "pack_verify_failed" },
      llm_model: "policy:auto (default qwen3.8-27b)",
      judge_model: LOCKED_JUDGE_MODEL,
    });
    for (const k of [
      "harness_name",
      "harness_version",
      "bench_image_hash",
      "harness_image_hash",
      "bench_version",
    ])
      expect(first, k).not.toHaveProperty(k);

    // An evaluation prepares a bench (the stand-in's: its digests and harness identity)…
    const good = w.fake.openEpoch({ packBytes: pinBytes, specNumber: 900 });
    await until(() => (w.fake.scores.get(good.challenge_epoch_id)?.length ?? 0) === 1, 15_000, "the verdict");
    const scored = w.fake.scores.get(good.challenge_epoch_id)![0]!;
    // …and the next unfetchable pack's rejection carries what it pulled, as upstream's harness holds it.
    const again = w.fake.openEpoch({ packUrl: `${w.fake.url}/packs/0001.json`, specNumber: 26 });
    await until(
      () => (w.fake.scores.get(again.challenge_epoch_id)?.length ?? 0) === 1,
      15_000,
      "the rejection",
    );
    const second = w.fake.scores.get(again.challenge_epoch_id)![0]!;
    expect(second).toMatchObject({
      judge_model: LOCKED_JUDGE_MODEL,
      harness_image_hash: scored.harness_image_hash,
      harness_name: scored.harness_name,
      harness_version: scored.harness_version,
    });
    expect(second.harness_image_hash).toEqual(expect.stringMatching(/^sha256:/));
  });
});
