/**
 * Evidence from what an evaluation left: the verdict and episodes in SQLite, the receipts in
 * SQLite, each final episode's artifacts on disk (grading.json, the deliverable, ctrf.json, the
 * session files, meter.json) — recorded under <dir>/evidence, listed by evaluation, and its checks
 * hold; a rejection made without an evaluation (a pack the daemon could not fetch) too.
 */
import { mkdir, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import {
  auditEvidence,
  type EvidenceSigner,
  evidenceForUpload,
  openEvidence,
  recordEvidence,
} from "../../src/evidence/index.js";
import { silentLogger } from "../../src/log.js";
import type { Receipt } from "../../src/meter/index.js";
import { verifierReady } from "../../src/platform/index.js";
import { type Db, EvaluationRepo, EvidenceIndex, openDb, ReceiptRepo } from "../../src/store/index.js";
import { sampleEvidence, testSigner } from "../helpers/evidence.js";

let signer: EvidenceSigner;
beforeAll(async () => {
  await verifierReady();
  signer = await testSigner(5);
});

/** sampleEvidence() written as an evaluation leaves it: rows, receipts, artifacts. */
async function evaluationOnDisk(
  dir: string,
): Promise<{ db: Db; id: string; payload: Record<string, unknown> }> {
  const c = sampleEvidence();
  const db = openDb(":memory:");
  const repo = new EvaluationRepo(db);
  const ev = repo.create({
    id: "ev_test",
    resumeKey: "k",
    packHash: c.packHash,
    spec: 0,
    scenarios: c.episodes.map((e) => e.scenario),
    source: "local",
    epochId: null,
    meta: { label: "pin" },
  });
  for (const e of c.episodes) {
    const art = join(dir, "runs", ev.id, e.scenario);
    await mkdir(art, { recursive: true });
    for (const [name, data] of Object.entries(e.files)) await writeFile(join(art, name), data);
    await writeFile(join(art, "grading.json"), JSON.stringify(e.grading));
    await writeFile(join(art, "meter.json"), JSON.stringify({ summary: { rows_dropped: 0 }, rows: [] }));
    repo.startEpisode({ id: e.episodeId, evaluationId: ev.id, scenario: e.scenario, attempt: 1 });
    repo.finishEpisode(e.episodeId, "final", { scenario: e.scenario, artifactsDir: art } as never);
    new ReceiptRepo(db).insertMany(
      e.receipts.map(
        (r) =>
          ({ ...r, usd: Number(r.usd_pico) / 1e12, reserved_usd: Number(r.reserved_pico) / 1e12 }) as Receipt,
      ),
    );
  }
  const verdict = {
    spec: 0,
    score: 1.5,
    scenarios: c.episodes.map((e) => ({
      scenario: e.scenario,
      quality: e.quality,
      status: e.status,
      ...(e.failure ? { failure: { ...e.failure, message: "m" } } : {}),
      costUsd: e.costUsd,
      attempts: 1,
      episodeId: e.episodeId,
    })),
    provenance: { priceTableHash: c.priceTableHash, suite: "quick", bench: c.bench },
    startedAt: "2026-12-01T00:00:00.000Z",
    finishedAt: "2026-12-01T00:05:00.000Z",
  };
  repo.finish(ev.id, "scored", null, verdict);
  return { db, id: ev.id, payload: c.payload };
}

describe("recordEvidence", () => {
  it("gathers the verdict, the receipts and each final episode's artifacts; kept, listed, and every check holds", async () => {
    const dir = await mkdtemp(join(tmpdir(), "evidence-record-"));
    const { db, id, payload } = await evaluationOnDisk(dir);
    const rec = await recordEvidence({
      db,
      evaluationId: id,
      payload,
      context: { packHash: "x", epochId: null, source: "local" },
      signer,
      dir,
      log: silentLogger,
    });
    expect(rec.path).toBe(join(dir, "evidence", `${rec.id}.tar.gz`));
    expect(new EvidenceIndex(db).get(id)).toMatchObject({ id: rec.id, path: rec.path, signer: signer.ss58 });
    const [found] = await openEvidence(await readFile(rec.path), rec.path);
    const a = auditEvidence(found!.evidence);
    expect(a.checks.filter((c) => c.status !== "ok")).toEqual([]);
    expect(
      a.manifest!.episodes.map((e) => [
        e.scenario,
        e.score_rule,
        e.receipts.count,
        Object.keys(e.files).sort(),
      ]),
    ).toEqual([
      ["binary-flag-hunt", "grade", 2, ["ctrf.json", "deliverable", "transcript.txt", "turns.jsonl"]],
      ["access-log-regex", "grade", 1, ["ctrf.json", "deliverable", "transcript.txt", "turns.jsonl"]],
      ["git-lost-commit-recovery", "zero", 1, ["turns.jsonl"]],
    ]);
    expect(a.manifest!.evaluation).toMatchObject({ id, label: "pin", source: "local" });
    expect(a.manifest!.suite).toBe("quick");

    // A budget a little under the full archive: files go by digest alone until it fits.
    const upload = await evidenceForUpload(rec, rec.bytes - 40);
    expect(upload).toMatchObject({
      fits: true,
      name: expect.stringMatching(/^evidence\/[0-9a-f]{64}\.tar\.gz$/),
    });
    expect(upload.omitted).toBeGreaterThan(0);
    expect(upload.data.length).toBeLessThanOrEqual(rec.bytes - 40);
  });

  it("a rejection made without an evaluation (a pack not fetched) still has evidence of what was posted", async () => {
    const dir = await mkdtemp(join(tmpdir(), "evidence-reject-"));
    const payload = {
      spec_number: 27,
      challenger: { score: 0, qualified: false, rejected: true, rejection_detail: "pack_verify_failed" },
    };
    const rec = await recordEvidence({
      db: openDb(":memory:"),
      evaluationId: null,
      payload,
      context: { packHash: "ab".repeat(32), epochId: 42, source: "epoch" },
      signer,
      dir,
      log: silentLogger,
    });
    const [found] = await openEvidence(await readFile(rec.path), rec.path);
    const a = auditEvidence(found!.evidence);
    expect(a.checks.filter((c) => c.status === "failed")).toEqual([]);
    expect(a.checks.find((c) => c.name === "payload")?.detail).toBe("a rejection: score 0");
    expect(a.manifest).toMatchObject({
      pack_hash: "ab".repeat(32),
      spec: 27,
      episodes: [],
      evaluation: { id: null, source: "epoch", epoch_id: "42" },
    });
  });
});
