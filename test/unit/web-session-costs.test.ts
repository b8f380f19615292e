/**
 * The status page and `status` name money as the terminal and the HTML report do (`$/episode` the
 * mean of one scenario run, `$/session` the pack over the whole spec or suite), and show a built-in
 * evaluation by its suite, never as "spec 0". Real SQLite (in memory), the real LiveStatus.
 */
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { LiveStatus } from "../../src/status/index.js";
import { EvaluationRepo, openDb } from "../../src/store/index.js";
import { renderMain } from "../../src/web/html.js";
import { StatusReader, type StatusSnapshot } from "../../src/web/snapshot.js";
import { renderText } from "../../src/web/text.js";
import { NETWORK, seedStore, verdictOf } from "../helpers/web.js";

const NOW = Date.parse("2026-06-01T12:00:00Z");

function snapshot(running?: { spec: number; suite?: string }): StatusSnapshot {
  const db = openDb(":memory:");
  seedStore(db, NOW);
  // A built-in verdict: spec 0, its suite in the provenance.
  const evals = new EvaluationRepo(db);
  evals.create({
    id: "ev_q",
    resumeKey: "rk_ev_q",
    packHash: "e5".repeat(32),
    spec: 0,
    scenarios: ["scenario-1", "scenario-2"],
    source: "local",
    meta: { label: "pin" },
  });
  const v = verdictOf("ev_q", "e5".repeat(32), [1, 0], { "qwen3.8-27b": 0.05 });
  evals.finish("ev_q", "scored", null, { ...v, spec: 0, provenance: { ...v.provenance, suite: "quick" } });
  const live = new LiveStatus(() => NOW);
  if (running)
    live.startEvaluation({
      evaluationId: "ev_live",
      packHash: "d4".repeat(32),
      label: "pin",
      epochId: null,
      ...running,
      capUsd: 0.3,
      scenarios: ["binary-flag-hunt"],
    });
  return new StatusReader(db, NETWORK).snapshot({ config: loadConfig({}), live, now: NOW });
}

describe("money per episode and per session", () => {
  it("the snapshot carries both: the session's total and its mean per episode", () => {
    const s = snapshot();
    const b = s.verdicts.find((v) => v.evaluationId === "ev_b")!;
    expect(b.costUsd).toBe(0.064);
    expect(b.costPerEpisodeUsd).toBeCloseTo(0.064 / 3, 12);
    const q = s.verdicts.find((v) => v.evaluationId === "ev_q")!;
    expect([q.spec, q.suite, q.costPerEpisodeUsd]).toEqual([0, "quick", 0.025]);
    expect(s.verdicts.find((v) => v.evaluationId === "ev_a")!.suite).toBeNull();
  });

  it("the page's verdict table names the columns $/episode and $/session, with those figures", () => {
    const html = renderMain(snapshot());
    expect(html).toMatch(
      /<th class="num">score<\/th><th class="num"[^>]*>\$\/episode<\/th><th class="num"[^>]*>\$\/session<\/th>/,
    );
    expect(html).not.toMatch(/<th class="num">cost<\/th>/);
    // ev_b: $0.064 over 3 episodes.
    expect(html).toContain('<td class="num">$0.0213</td><td class="num">$0.0640</td>');
  });

  it("`status` prints the same two columns", () => {
    const text = renderText(snapshot());
    const header = text
      .split("\n")
      .find((l) => l.trimStart().startsWith("when "))!
      .trim();
    expect(header.split(/\s{2,}/)).toEqual([
      "when",
      "pack",
      "what",
      "status",
      "score",
      "$/episode",
      "$/session",
      "cost by model",
    ]);
    expect(text).toMatch(/2\.25\/3\s+\$0\.0213\s+\$0\.0640/);
  });
});

describe("what a running evaluation is scored on", () => {
  it("a built-in run shows its suite, a registry run its subnet spec", () => {
    const builtin = snapshot({ spec: 0, suite: "quick" });
    expect(builtin.evaluation).toMatchObject({ spec: 0, suite: "quick" });
    expect(renderMain(builtin)).toMatch(/· suite quick · started/);
    expect(renderText(builtin)).toMatch(/RUNNING\s+pin · ev_live · suite quick · 0\/1 done/);
    expect(renderMain(builtin)).not.toContain("spec 0");
    const registry = snapshot({ spec: 27 });
    expect(registry.evaluation!.suite).toBeNull();
    expect(renderMain(registry)).toMatch(/· spec 27 · started/);
    expect(renderText(registry)).toMatch(/RUNNING\s+pin · ev_live · spec 27 · 0\/1 done/);
  });
});
