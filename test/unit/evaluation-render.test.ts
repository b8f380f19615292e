import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import {
  buildVerdict,
  leaderboard,
  ProgressView,
  renderReport,
  type Verdict,
  verdictTable,
} from "../../src/evaluation/index.js";

function verdict(
  score: number[],
  usd: number[],
  models: string[],
  on: { spec: number; suite?: string } = { spec: 0, suite: "quick" },
): Verdict {
  return buildVerdict({
    evaluationId: "ev",
    packHash: "a".repeat(64),
    spec: on.spec,
    scenarios: score.map((q, k) => ({
      scenario: `s${k}<x>`,
      quality: q,
      tests: 4,
      passed: q * 4,
      status: "scored",
      costUsd: usd[k]!,
      byModel: {
        [models[k % models.length]!]: {
          calls: 2,
          costUsd: usd[k]!,
          promptTokens: 10,
          cachedTokens: 0,
          completionTokens: 5,
        },
      },
      attempts: 1,
      episodeId: `e${k}`,
      timings: { setupMs: 1, agentMs: 2, verifyMs: 3, totalMs: 6000 },
    })),
    provenance: {
      priceTableHash: "b".repeat(64),
      imageDigests: {},
      validatorVersion: "0",
      harness: { name: "h", version: "1" },
      llm: { baseUrl: "x", simulated: true, defaultModel: "m" },
      capUsd: 0.3,
      concurrency: 1,
      ...(on.suite ? { suite: on.suite } : {}),
    },
    startedAt: "",
    finishedAt: "",
  });
}

describe("evaluation output", () => {
  const strong = verdict([1, 1, 0.5], [0.1, 0.12, 0.2], ["kimi-k3"]);
  const cheap = verdict([1, 0, 0.5], [0.01, 0.01, 0.02], ["glm-5.3-flash"]);
  const cheapTie = verdict([1, 0, 0.5], [0.001, 0.001, 0.002], ["deepseek-v4.1-flash"]);

  it("leaderboard orders by score, then by lower cost; `$/episode` is the mean, `$/session` the pack's total", () => {
    const out = leaderboard([
      { label: "cheap", verdict: cheap },
      { label: "strong", verdict: strong },
      { label: "cheapest", verdict: cheapTie },
    ]);
    const [header, , ...lines] = out.split("\n");
    expect(header!.split(/\s{2,}/)).toEqual([
      "#",
      "pack",
      "score",
      "qualified",
      "$/episode",
      "$/session",
      "top models by spend",
    ]);
    expect(lines.map((l) => l.split(/\s{2,}/)[1])).toEqual(["strong", "cheapest", "cheap"]);
    // strong: 0.10 + 0.12 + 0.20 = 0.42 over 3 episodes.
    expect(lines[0]!.split(/\s{2,}/).slice(2, 6)).toEqual(["2.5000 / 3", "yes", "$0.1400", "$0.4200"]);
  });

  it("verdict table names the suite (never spec 0) or the subnet spec, and its costs per session and per episode", () => {
    const t = verdictTable(strong);
    expect(t).toContain("score 2.5000");
    expect(t.split("\n")[0]).toMatch(/ suite quick .* \$\/session \$0\.4200 {2}\$\/episode \$0\.1400$/);
    expect(t).not.toContain("spec 0");
    expect(t.split("\n")[1]).toMatch(/^scenario\s+quality\s+tests\s+\$\/episode\s+time\s+failure$/);
    expect(t).toMatch(/s2<x>\s+0\.5000\s+2\/4\s+\$0\.2000/);
    const subnet = verdictTable(verdict([1], [0.05], ["m"], { spec: 27 }));
    expect(subnet.split("\n")[0]).toContain(" spec 27 ");
  });

  it("the HTML report escapes names and draws one bar per scenario", () => {
    const html = renderReport([
      { label: "strong", verdict: strong },
      { label: "cheap", verdict: cheap },
    ]);
    expect(html).toContain("s0&lt;x&gt;");
    expect(html).not.toContain("s0<x>");
    expect(html).toContain("Leaderboard");
    expect((html.match(/class="track"/g) ?? []).length).toBe(6);
    expect(html).toContain("kimi-k3");
  });

  it("the HTML report names the columns as the terminal does and shows the suite, not spec 0", () => {
    const html = renderReport([
      { label: "strong", verdict: strong },
      { label: "cheap", verdict: cheap },
    ]);
    expect(html).toContain(
      "<th>#</th><th>pack</th><th>score</th><th>qualified</th><th>$/episode</th><th>$/session</th>",
    );
    expect(html).toContain("<td>strong</td><td>2.5000</td><td>yes</td><td>$0.1400</td><td>$0.4200</td>");
    expect(html).toContain("$0.4200 per session ($0.1400 per episode)");
    expect(html).toContain("<th>tests</th><th>$/episode</th>");
    expect(html).toMatch(/<footer>suite quick · /);
    expect(html).not.toMatch(/spec 0|\$ \/ session|total \$/);
    expect(renderReport([{ label: "s", verdict: verdict([1], [0.05], ["m"], { spec: 27 }) }])).toMatch(
      /<footer>spec 27 · /,
    );
  });

  it("the HTML report names each verdict's evidence and how to re-grade it", () => {
    const path = "/data/evidence/ab<c>.tar.gz";
    const html = renderReport([
      { label: "strong", verdict: strong, evidence: { id: "ab", path } },
      { label: "cheap", verdict: cheap },
    ]);
    expect(html).toContain("evidence <code>/data/evidence/ab&lt;c&gt;.tar.gz</code>");
    expect(html).toContain("<code>trajrl-validator verify /data/evidence/ab&lt;c&gt;.tar.gz</code>");
    expect((html.match(/class="evidence"/g) ?? []).length).toBe(1);
  });

  // issue 36 item 9: a pack's file name and a bench's scenario names come from outside.
  const UNSAFE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e]/;
  const EVIL = "e\u001b]0;pwned\u0007\u001b[2J\nq\u202e";

  it("leaderboard and verdict table escape what came from outside: no control character, one line per row", () => {
    const v = verdict([1, 0.5], [0.1, 0.2], ["kimi-k3"]);
    v.scenarios[0]!.scenario = EVIL;
    const board = leaderboard([
      { label: EVIL, verdict: v },
      { label: "ok", verdict: verdict([1], [0.1], ["m"]) },
    ]);
    const table = verdictTable(v);
    for (const text of [board, table]) {
      expect(text).not.toMatch(UNSAFE);
      expect(text).toContain("e\\u001b]0;pwned\\u0007\\u001b[2J\\nq\\u202e");
    }
    expect(board.split("\n")).toHaveLength(4);
    expect(table.split("\n")).toHaveLength(5);
  });

  it("the progress view escapes scenario names and the title, as plain lines and as the live block", () => {
    const s = new PassThrough();
    let text = "";
    s.on("data", (d) => (text += d));
    const plain = new ProgressView(s as unknown as NodeJS.WritableStream, false);
    plain.start(`\n${EVIL}`, [EVIL]);
    plain.onEvent({
      evaluationId: "e",
      scenario: EVIL,
      attempt: 1,
      spentUsd: 0,
      capUsd: 0.3,
      elapsedMs: 0,
      phase: "running",
    });
    plain.stop();
    expect(text).not.toMatch(UNSAFE);
    expect(text.trim().split("\n")).toHaveLength(2);
    const live = new ProgressView(new PassThrough() as unknown as NodeJS.WritableStream, false);
    live.start("t", [EVIL]);
    const block = live.renderBlock();
    expect(block.join("\n")).not.toMatch(UNSAFE);
    expect(block).toHaveLength(2);
  });

  it("progress view: plain lines when not a TTY, one per phase change", () => {
    const s = new PassThrough();
    let text = "";
    s.on("data", (d) => (text += d));
    const v = new ProgressView(s as unknown as NodeJS.WritableStream, false);
    v.start("pack x", ["a", "b"]);
    const ev = { evaluationId: "e", scenario: "a", attempt: 1, spentUsd: 0.01, capUsd: 0.3, elapsedMs: 1000 };
    v.onEvent({ ...ev, phase: "running" });
    v.onEvent({ ...ev, phase: "running", spentUsd: 0.02 });
    v.onEvent({ ...ev, phase: "done", quality: 1 });
    v.stop();
    const lines = text.trim().split("\n");
    expect(lines).toHaveLength(3);
    expect(lines[2]).toContain("a: done");
    expect(lines[2]).toContain("quality=1.0000");
  });

  it("progress view: the live block shows each scenario's phase and spend", () => {
    const v = new ProgressView(new PassThrough() as unknown as NodeJS.WritableStream, false);
    v.start("t", ["a", "b"]);
    v.onEvent({
      evaluationId: "e",
      scenario: "b",
      attempt: 2,
      spentUsd: 0.15,
      capUsd: 0.3,
      elapsedMs: 0,
      phase: "verifying",
    });
    const block = v.renderBlock();
    expect(block[1]).toMatch(/a\s+queued/);
    expect(block[2]).toMatch(/b\s+verifying \(try 2\).*\[#####\.\.\.\.\.\]\s+\$0\.1500/);
  });
});
