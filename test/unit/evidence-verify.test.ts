/**
 * `verify` over evidence made in memory, with a stand-in for the Docker re-grade (the real one is
 * test/integration/evidence-verify.test.ts): how a re-grade becomes reproduced / differs / not
 * reproducible, when the run is ok, the table and the comparison of two validators, and who signs
 * `eval`'s evidence (the wallet's hotkey, else a local key made once).
 */
import { mkdtemp, readFile, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import {
  type EvidenceEpisode,
  type EvidenceSigner,
  evalSigner,
  localSigner,
  type Manifest,
  openEvidence,
  type Regrader,
  renderComparison,
  renderReport,
  sealEvidence,
  type VerifyReport,
  verifyOpened,
} from "../../src/evidence/index.js";
import { silentLogger } from "../../src/log.js";
import { sampleEvidence, testSigner } from "../helpers/evidence.js";

let signer: EvidenceSigner;
beforeAll(async () => {
  signer = await testSigner(7);
});

/** Re-grades by a table: scenario → the qualities each re-grade gives (or why none). */
function fakeRegrader(by: Record<string, number[] | string>): Regrader & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    async regrade(_m: Manifest, e: EvidenceEpisode, deliverable: Buffer | undefined, repeat: number) {
      calls.push(`${e.scenario}:${deliverable?.toString("utf8").split("\n")[1] ?? "-"}:${repeat}`);
      const v = by[e.scenario];
      if (typeof v === "string") return { kind: "not_reproducible", why: v };
      return { kind: "graded", qualities: v ?? [], failures: (v ?? []).map(() => null), notes: [] };
    },
  };
}

async function verify(
  regrader: Regrader | undefined,
  o: { repeat?: number; budgets?: { deliverable: number; file: number }; expectSigner?: string } = {},
): Promise<VerifyReport> {
  const s = await sealEvidence(sampleEvidence(), {
    signer,
    nowMs: 0,
    ...(o.budgets ? { budgets: o.budgets } : {}),
  });
  const [found] = await openEvidence(s.gz, "ev.tar.gz");
  return verifyOpened("ev.tar.gz", found!.evidence, {
    ...(regrader ? { regrader } : {}),
    ...(o.repeat ? { repeat: o.repeat } : {}),
    ...(o.expectSigner ? { expectSigner: o.expectSigner } : {}),
  });
}

const results = (r: VerifyReport) => r.scenarios.map((s) => [s.scenario, s.result]);

describe("verify", () => {
  it("reproduces when every re-grade gives the posted score; the not-graded episode is not re-graded", async () => {
    const rg = fakeRegrader({ "binary-flag-hunt": [0.5], "access-log-regex": [1] });
    const r = await verify(rg);
    expect(r.ok).toBe(true);
    expect(results(r)).toEqual([
      ["binary-flag-hunt", "reproduced"],
      ["access-log-regex", "reproduced"],
      ["git-lost-commit-recovery", "not_graded"],
    ]);
    expect(r.scenarios[2]!.why).toBe("agent_output_missing");
    // The deliverable handed to the re-grade is the one in the evidence.
    expect(rg.calls).toEqual(["binary-flag-hunt:echo flag:1", "access-log-regex:grep -E x:1"]);
    expect(r.scenarios[0]).toMatchObject({ posted: 0.5, report: 0.5, regraded: [0.5] });
  });

  it("a re-grade that differs from the posted score fails the run, saying both", async () => {
    const r = await verify(fakeRegrader({ "binary-flag-hunt": [0.6667], "access-log-regex": [1] }));
    expect(r.ok).toBe(false);
    expect(r.scenarios[0]).toMatchObject({ result: "differs", why: "re-graded 0.6667, posted 0.5" });
  });

  it("two re-grades that disagree are a grader that is not deterministic, with the spread", async () => {
    const r = await verify(fakeRegrader({ "binary-flag-hunt": [0.5, 0.6667], "access-log-regex": [1, 1] }), {
      repeat: 2,
    });
    expect(r.ok).toBe(false);
    expect(r.scenarios[0]).toMatchObject({
      result: "differs",
      why: "the grader gave 0.5, 0.6667 on the same deliverable (spread 0.1667)",
    });
    expect(r.scenarios[1]!.result).toBe("reproduced");
  });

  it("what cannot be re-graded is not reproducible, with why, and does not fail the run", async () => {
    const r = await verify(
      fakeRegrader({
        "binary-flag-hunt": "scenario binary-flag-hunt is not in this checkout's scenarios/",
        "access-log-regex": [1],
      }),
    );
    expect(r.ok).toBe(true);
    expect(r.scenarios[0]).toMatchObject({
      result: "not_reproducible",
      why: "scenario binary-flag-hunt is not in this checkout's scenarios/",
    });
    const over = await verify(fakeRegrader({}), { budgets: { deliverable: 4, file: 1 << 20 } });
    expect(over.scenarios[0]).toMatchObject({
      result: "not_reproducible",
      why: "the deliverable was over the evidence's size budget: its digest alone",
    });
  });

  it("without a re-grade: the checks alone; --signer names whom it wanted", async () => {
    const r = await verify(undefined);
    expect(r.ok).toBe(true);
    expect(r.scenarios.map((s) => s.result)).toEqual(["not_checked", "not_checked", "not_graded"]);
    const wrong = await verify(undefined, {
      expectSigner: "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY",
    });
    expect(wrong.ok).toBe(false);
    expect(wrong.checks.at(-1)).toMatchObject({
      name: "signature",
      status: "failed",
      detail: expect.stringMatching(/expected 5Grw/),
    });
  });

  it("prints who signed, every check and a row per scenario; compares two validators scenario by scenario", async () => {
    const a = await verify(fakeRegrader({ "binary-flag-hunt": [0.5], "access-log-regex": [1] }));
    const text = renderReport(a);
    expect(text).toMatch(/signed by 5\w+ \(the validator's hotkey, as the evidence says\)/);
    expect(text).toMatch(/ {2}ok {4}payload {4}score 1.5 = Σ 3 scenario scores/);
    expect(text).toMatch(/binary-flag-hunt\s+0\.5000\s+0\.5000\s+0\.5000\s+reproduced/);
    expect(text).toMatch(
      /^OK: every check that could run agrees \(2 reproduced, 0 differ, 0 not reproducible, 1 not graded\)$/m,
    );
    const b: VerifyReport = {
      ...a,
      source: "other.tar.gz",
      scenarios: a.scenarios.map((s) =>
        s.scenario === "binary-flag-hunt"
          ? { ...s, posted: 1, regraded: [1], deliverable: "f".repeat(64) }
          : s,
      ),
    };
    const cmp = renderComparison([a, b]);
    expect(cmp).toMatch(
      /binary-flag-hunt.*different deliverables, each graded as posted: the agents' runs differed/,
    );
    expect(cmp).toMatch(/access-log-regex.*same score/);
  });
});

describe("who signs eval's evidence", () => {
  it("the wallet's hotkey when it is readable, else a local key made once (0600) and reused", async () => {
    const dir = await mkdtemp(join(tmpdir(), "evidence-signer-"));
    const first = await localSigner(dir);
    const again = await localSigner(dir);
    expect(first.kind).toBe("local");
    expect(again.ss58).toBe(first.ss58);
    const file = join(dir, "evidence", "local-signer.json");
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(file, "utf8")).ss58Address).toBe(first.ss58);

    const noWallet = await evalSigner(
      { walletPath: join(dir, "none"), walletName: "w", walletHotkey: "h" },
      dir,
      silentLogger,
    );
    expect(noWallet).toMatchObject({ kind: "local", ss58: first.ss58 });

    const wallets = join(dir, "wallets");
    const { mkdir } = await import("node:fs/promises");
    await mkdir(join(wallets, "w", "hotkeys"), { recursive: true });
    await writeFile(
      join(wallets, "w", "hotkeys", "h"),
      JSON.stringify({ secretSeed: `0x${"07".repeat(32)}` }),
    );
    const wallet = await evalSigner(
      { walletPath: wallets, walletName: "w", walletHotkey: "h" },
      dir,
      silentLogger,
    );
    expect(wallet).toMatchObject({ kind: "hotkey", ss58: signer.ss58 });
  });
});
