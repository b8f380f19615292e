/**
 * Evidence in memory: the receipts' hash chain, the manifest's signature, sealing and reading an
 * archive, and every check of `verify` that needs no Docker — each tamper (a receipt, a deliverable,
 * a grader's report, a score, the manifest, the signature) fails, naming what was changed.
 */
import { gzipSync } from "node:zlib";
import { beforeAll, describe, expect, it } from "vitest";
import type { GradingRecord } from "../../src/episode/index.js";
import {
  auditEvidence,
  chainReceipts,
  checkChain,
  type EvidenceSigner,
  fitEvidence,
  type GradingRecordJson,
  type Manifest,
  manifestBytes,
  openEvidence,
  sealEvidence,
  signManifest,
} from "../../src/evidence/index.js";
import { sha256Hex } from "../../src/hash.js";
import { verifierReady } from "../../src/platform/index.js";
import { packTar } from "../../src/sandbox/index.js";
import { repack, sampleEvidence, testSigner, unpack } from "../helpers/evidence.js";

// The grading record the episode writes is the one the evidence reads back (a compile-time check).
const _sameRecord: GradingRecordJson = {} as GradingRecord;
void _sameRecord;

let signer: EvidenceSigner;
let other: EvidenceSigner;
beforeAll(async () => {
  await verifierReady();
  signer = await testSigner(7);
  other = await testSigner(9);
});

const NOW = Date.parse("2026-12-01T00:06:00Z");

async function audit(gz: Buffer) {
  const [found] = await openEvidence(gz, "test");
  return auditEvidence(found!.evidence);
}
const failedChecks = (a: Awaited<ReturnType<typeof audit>>) =>
  a.checks.filter((c) => c.status === "failed").map((c) => `${c.name}: ${c.detail}`);

/** The manifest of an archive, edited and signed again by `by` (a validator that lies, consistently). */
async function resign(gz: Buffer, by: EvidenceSigner, edit: (m: Manifest) => void): Promise<Buffer> {
  return repack(gz, (files) => {
    const m = JSON.parse(files.get("manifest.json")!.toString("utf8")) as Manifest;
    edit(m);
    m.validator.hotkey = by.ss58;
    const bytes = manifestBytes(m);
    files.set("manifest.json", bytes);
    files.set("signature.json", Buffer.from(JSON.stringify(signManifest(bytes, by, NOW))));
  });
}

describe("the receipts' hash chain", () => {
  const rows = sampleEvidence().episodes.flatMap((e) => e.receipts);

  it("walks back to its head; a changed, dropped or reordered receipt breaks it at that line", () => {
    const { text, head } = chainReceipts(rows);
    const ok = checkChain(text);
    expect(ok).toMatchObject({ ok: true, head });
    expect(ok.rows).toHaveLength(rows.length);

    const lines = text.trimEnd().split("\n");
    const changed = lines.map((l, i) =>
      i === 2 ? l.replace('"usd_pico":"798000000"', '"usd_pico":"798000001"') : l,
    );
    expect(changed[2]).not.toBe(lines[2]);
    expect(checkChain(`${changed.join("\n")}\n`)).toMatchObject({
      ok: false,
      line: 3,
      episode: "ev_test.access-log-regex.1",
      seq: 1,
      problem: expect.stringMatching(/does not hash/),
    });
    expect(checkChain(`${[lines[0], lines[2], lines[3]].join("\n")}\n`)).toMatchObject({
      ok: false,
      line: 2,
    });
    expect(checkChain(`${[lines[1], lines[0], ...lines.slice(2)].join("\n")}\n`)).toMatchObject({
      ok: false,
      line: 1,
    });
  });

  it("is Python's json.dumps(sort_keys=True) of each row: a float in the row hashes as its repr", () => {
    const one = chainReceipts([rows[0]!]).text;
    expect(JSON.parse(one).row.duration_ms).toBe(40.25);
    // A row changed only in the representation of a number is another row.
    const { head } = chainReceipts([{ ...rows[0]!, duration_ms: 40.250001 }]);
    expect(head).not.toBe(chainReceipts([rows[0]!]).head);
  });
});

describe("sealed evidence", () => {
  let gz: Buffer;
  beforeAll(async () => {
    gz = (await sealEvidence(sampleEvidence(), { signer, nowMs: NOW })).gz;
  });

  it("is content-addressed: the same evaluation seals to the same manifest and id (sr25519 signs with a fresh nonce)", async () => {
    const again = await sealEvidence(sampleEvidence(), { signer, nowMs: NOW });
    const [a, b] = [await unpack(gz), await unpack(again.gz)];
    expect(a.get("manifest.json")!.equals(b.get("manifest.json")!)).toBe(true);
    expect(again.id).toBe(sha256Hex(a.get("manifest.json")!));
    expect(a.get("signature.json")!.equals(b.get("signature.json")!)).toBe(false);
    expect(failedChecks(await audit(again.gz))).toEqual([]);
    expect(again.manifest.episodes.map((e) => e.score_rule)).toEqual(["grade", "grade", "zero"]);
    // 9 episode files and receipts.jsonl, each once.
    expect([...a.keys()].filter((n) => n.startsWith("blobs/") && n.length > 6).length).toBe(10);
  });

  it("passes every check untouched", async () => {
    const a = await audit(gz);
    expect(failedChecks(a)).toEqual([]);
    expect(a.checks.map((c) => [c.name, c.status])).toEqual([
      ["manifest", "ok"],
      ["signature", "ok"],
      ["files", "ok"],
      ["receipts", "ok"],
      ["costs", "ok"],
      ["payload", "ok"],
      ["reports", "ok"],
    ]);
  });

  it("a changed deliverable fails the files check, naming its scenario", async () => {
    const bad = await repack(gz, (files) => {
      const m = JSON.parse(files.get("manifest.json")!.toString("utf8")) as Manifest;
      const sha = m.episodes[0]!.files.deliverable!.sha256;
      files.set(`blobs/${sha}`, Buffer.from("#!/bin/sh\necho forged\n"));
    });
    expect(failedChecks(await audit(bad))).toEqual([
      "files: deliverable of binary-flag-hunt: its bytes are not the ones the manifest names (changed)",
    ]);
  });

  it("a changed receipt fails, naming the receipt's episode and seq", async () => {
    const bad = await repack(gz, (files) => {
      const m = JSON.parse(files.get("manifest.json")!.toString("utf8")) as Manifest;
      const sha = m.receipts.file.sha256;
      const text = files.get(`blobs/${sha}`)!.toString("utf8");
      files.set(`blobs/${sha}`, Buffer.from(text.replace('"usd_pico":"1000"', '"usd_pico":"0"')));
    });
    const failed = failedChecks(await audit(bad));
    expect(failed[0]).toBe("files: receipts.jsonl: its bytes are not the ones the manifest names (changed)");
    expect(failed[1]).toBe(
      "receipts: receipts.jsonl line 2 (episode ev_test.binary-flag-hunt.1, seq 2): the row does not hash to its hash (the receipt was changed)",
    );
  });

  it("a score changed in the manifest breaks the signature; signed again, the payload and the reports give it away", async () => {
    const edited = await repack(gz, (files) => {
      const text = files.get("manifest.json")!.toString("utf8");
      files.set("manifest.json", Buffer.from(text.replace('"score": 0.5', '"score": 1')));
    });
    expect(failedChecks(await audit(edited))).toEqual([
      "signature: the signed message does not name this manifest.json (it was changed after signing)",
      expect.stringMatching(/^payload: binary-flag-hunt: posted 1, the verdict's quality 0.5/),
    ]);

    // A liar that signs again and keeps the verdict consistent is caught by the grader's report.
    const lie = await resign(gz, other, (m) => {
      const s = (m.payload.challenger as { scenario_results: Record<string, { score: number }> })
        .scenario_results;
      s["binary-flag-hunt"]!.score = 1;
      (m.payload.challenger as { score: number }).score = 2;
      m.episodes[0]!.quality = 1;
      m.episodes[0]!.grading!.grade!.quality = 1;
    });
    expect(failedChecks(await audit(lie))).toEqual([
      "reports: binary-flag-hunt: the grader's report gives 0.5, the grade says 1",
    ]);
  });

  it("a changed posted cost or a receipts sum that does not match is a costs failure", async () => {
    const lie = await resign(gz, signer, (m) => {
      const s = (
        m.payload.challenger as { scenario_results: Record<string, { judge: { cost_usd: number } }> }
      ).scenario_results;
      s["access-log-regex"]!.judge.cost_usd = 0.0001;
    });
    expect(failedChecks(await audit(lie))).toEqual([
      "costs: access-log-regex: receipts sum $0.000798, posted cost_usd $0.0001",
    ]);
  });

  it("a different signature file, or a signer the manifest does not name, fails the signature", async () => {
    const forged = await repack(gz, (files) => {
      const sig = JSON.parse(files.get("signature.json")!.toString("utf8"));
      sig.signature = `0x${"00".repeat(64)}`;
      files.set("signature.json", Buffer.from(JSON.stringify(sig)));
    });
    expect(failedChecks(await audit(forged))).toEqual([
      expect.stringMatching(/^signature: the signature does not verify under 5/),
    ]);

    const swapped = await repack(gz, (files) => {
      const bytes = files.get("manifest.json")!;
      files.set("signature.json", Buffer.from(JSON.stringify(signManifest(bytes, other, NOW))));
    });
    expect(failedChecks(await audit(swapped))).toEqual([
      expect.stringMatching(/^signature: signed by 5\w+, but the manifest names 5\w+ as its signer$/),
    ]);
  });

  it("a manifest that is not one is said so, and nothing else is checked", async () => {
    const bad = await repack(gz, (files) => files.set("manifest.json", Buffer.from('{"schema":"x"}')));
    expect(failedChecks(await audit(bad))).toEqual([
      expect.stringMatching(/^manifest: manifest.json is not an evidence manifest/),
    ]);
  });

  it("is found inside a platform log archive (evidence/<id>.tar.gz) and refused when neither", async () => {
    const id = (await sealEvidence(sampleEvidence(), { signer, nowMs: NOW })).id;
    const logArchive = gzipSync(
      await packTar([
        { name: "verdict.json", data: "{}" },
        { name: `evidence/${id}.tar.gz`, data: gz },
      ]),
    );
    const found = await openEvidence(logArchive, "logs.tar.gz");
    expect(found.map((f) => f.name)).toEqual([`logs.tar.gz:evidence/${id}.tar.gz`]);
    expect(failedChecks(auditEvidence(found[0]!.evidence))).toEqual([]);
    const none = gzipSync(await packTar([{ name: "verdict.json", data: "{}" }]));
    await expect(openEvidence(none, "x.tar.gz")).rejects.toThrow(/no manifest.json and no evidence/);
    await expect(openEvidence(Buffer.from("not gzip"), "y")).rejects.toThrow(/not a gzip file/);
  });
});

describe("budgets", () => {
  it("names a deliverable over the budget by digest alone, and says so", async () => {
    const s = await sealEvidence(sampleEvidence(), {
      signer,
      nowMs: NOW,
      budgets: { deliverable: 10, file: 1 << 20 },
    });
    expect(s.omitted).toEqual([
      { file: "binary-flag-hunt/deliverable", reason: "over_budget" },
      { file: "access-log-regex/deliverable", reason: "over_budget" },
    ]);
    const a = await audit(s.gz);
    expect(failedChecks(a)).toEqual([]);
    expect(a.checks.find((c) => c.name === "files")?.detail).toBe(
      "8 files match their digests, 2 named by digest alone",
    );
  });

  it("fits a byte budget by leaving out transcripts, then session exports, then deliverables — never reports or receipts", async () => {
    const c = sampleEvidence();
    // Incompressible session files: they must go to fit.
    for (const e of c.episodes)
      e.files["turns.jsonl"] = Buffer.from(
        Array.from({ length: 40_000 }, () => Math.random().toString(36)).join(""),
      );
    const full = await sealEvidence(c, { signer, nowMs: NOW });
    const fitted = await fitEvidence(c, { signer, nowMs: NOW }, 40_000);
    expect(full.gz.length).toBeGreaterThan(40_000);
    expect(fitted.fits).toBe(true);
    expect(fitted.gz.length).toBeLessThanOrEqual(40_000);
    expect(fitted.omitted.every((o) => o.reason === "upload_cap")).toBe(true);
    expect(fitted.omitted.map((o) => o.file)).toEqual(
      expect.arrayContaining(["binary-flag-hunt/turns.jsonl"]),
    );
    expect(fitted.omitted.some((o) => o.file.endsWith("ctrf.json"))).toBe(false);
    expect(failedChecks(await audit(fitted.gz))).toEqual([]);
    const tiny = await fitEvidence(c, { signer, nowMs: NOW }, 500);
    expect(tiny.fits).toBe(false);
  });
});
