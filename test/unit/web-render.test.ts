import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { esc } from "../../src/html-escape.js";
import { LiveStatus } from "../../src/status/index.js";
import type { EvaluationRow } from "../../src/store/index.js";
import { EvidenceIndex, openDb } from "../../src/store/index.js";
import { UPSTREAM_RELEASE } from "../../src/subnet.js";
import { duration, shortKey, usd, weightShares } from "../../src/web/format.js";
import { decideHealth } from "../../src/web/health.js";
import { renderHeader, renderMain, renderPage, verdictChart } from "../../src/web/html.js";
import {
  deriveAlarms,
  runningEvaluation,
  StatusReader,
  type StatusSnapshot,
  summarizeEvaluation,
} from "../../src/web/snapshot.js";
import { Tally } from "../../src/web/tally.js";
import { renderText } from "../../src/web/text.js";
import { NETWORK, seedLive, seedStore } from "../helpers/web.js";

const NOW = Date.parse("2026-06-01T12:00:00Z");

function snapshotOf(opts: { weightsOutcome?: "included" | "failed"; live?: boolean } = {}): StatusSnapshot {
  const db = openDb(":memory:");
  seedStore(db, NOW, opts);
  const live = new LiveStatus(() => NOW);
  const tally = new Tally();
  tally.attach(live);
  seedLive(live);
  return new StatusReader(db, NETWORK).snapshot({
    config: loadConfig({}),
    live: opts.live === false ? null : live,
    counters: tally.snapshot(),
    now: NOW,
  });
}

/** Every tag of the document, with its attributes as written. */
const tags = (html: string) =>
  [...html.matchAll(/<([a-zA-Z][\w-]*)([^>]*)>/g)].map((m) => ({ tag: m[1]!, attrs: m[2]! }));

describe("escaping", () => {
  it("escapes the five HTML specials and stringifies anything", () => {
    expect(esc(`<a href="x" onclick='y'>&</a>`)).toBe(
      "&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;",
    );
    expect(esc(null)).toBe("");
    expect(esc(42)).toBe("42");
  });

  it("never lets stored or live text become markup", () => {
    const s = snapshotOf();
    s.alarms.push({
      code: "x<y",
      message: `"><img src=x onerror=alert(1)>`,
      severity: "error",
      since: NOW,
      lastSeen: NOW,
      count: 1,
      source: "live",
    });
    s.evaluation!.scenarios.push({
      scenario: "<b>evil</b>",
      phase: "<script>",
      attempt: 1,
      spentUsd: 0,
      capUsd: 0.3,
      elapsedMs: 0,
    });
    const html = renderPage(s);
    expect(html).not.toContain("<script>alert(1)</script>");
    expect(html).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    expect(html).not.toContain("<img src=x");
    expect(html).not.toContain("<b>evil</b>");
    // An unknown phase gets a neutral class, never the raw value as a class name.
    expect(html).toContain('class="phase phase-unknown"');
    // The only elements are ours.
    const allowed = new Set(
      "html head meta title link script noscript body header main footer div span section h2 dl dt dd strong code time table thead tbody tr th td svg rect line text circle polyline title figure figcaption p ul li a".split(
        " ",
      ),
    );
    for (const t of tags(html)) expect(allowed.has(t.tag.toLowerCase()), t.tag).toBe(true);
  });

  it("has no inline script or style, so the strict CSP holds", () => {
    const html = renderPage(snapshotOf());
    for (const t of tags(html)) {
      expect(t.attrs).not.toMatch(/\sstyle=/i);
      expect(t.attrs).not.toMatch(/\son[a-z]+=/i);
    }
    const scripts = [...html.matchAll(/<script([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts).toHaveLength(1);
    expect(scripts[0]![1]).toContain('src="/static/app.js"');
    expect(scripts[0]![2]).toBe("");
  });
});

describe("the status page", () => {
  it("shows each scenario of the running evaluation with phase, attempt, elapsed and spend against the cap", () => {
    const html = renderMain(snapshotOf());
    const rows = [
      ...html.matchAll(
        /<tr class="scenario" data-scenario="([^"]+)" data-phase="([^"]+)" data-spent="([^"]+)">([\s\S]*?)<\/tr>/g,
      ),
    ];
    expect(rows.map((r) => [r[1], r[2], r[3]])).toEqual([
      ["access-log-regex", "done", "0.041"],
      ["binary-flag-hunt", "running", "0.27"],
      ["eight-puzzle-optimal", "queued", "0"],
    ]);
    const [done, running, queued] = rows.map((r) => r[4]!);
    expect(done).toContain('class="phase phase-done"');
    expect(done).toContain("$0.0410 / $0.3000");
    expect(done).toContain('width="13.7"'); // 0.041 / 0.3
    expect(done).toMatch(/class="num quality">1</);
    // 0.27 of 0.30: the bar turns amber past 80 %.
    expect(running).toContain('class="bar-high"');
    expect(running).toContain('width="90.0"');
    expect(running).toContain('data-active="1"');
    expect(queued).toMatch(/data-active="0">–</);
    expect(html).toContain(
      '<strong id="eval-done">1/3</strong> done · spent <strong id="eval-spent">$0.3110</strong>',
    );
  });

  it("clamps an overspent bar at the cap and marks it", () => {
    const s = snapshotOf();
    s.evaluation!.scenarios[1]!.spentUsd = 0.45;
    const html = renderMain(s);
    expect(html).toContain('class="bar-over" x="0" y="0" width="100.0"');
  });

  it("shows the epoch, the seated winner, the last weights and the alarms", () => {
    const html = renderMain(snapshotOf());
    expect(html).toContain('<strong class="big">42</strong>');
    expect(html).toContain("5FHneW…94ty");
    expect(html).toContain("uid 7");
    expect(html).toContain(">fresh<");
    expect(html).toContain("uid 7: 100%");
    expect(html).toContain("5123456");
    expect(html).toContain('data-code="consensus_divergence"');
    // The winner's pre-signed pack URL never reaches the page.
    expect(html).not.toContain("X-Amz-Signature");
  });

  it("draws the verdict chart: one segment per model of each verdict, one score dot per verdict", () => {
    const s = snapshotOf();
    const svg = verdictChart(s.verdicts).html;
    const segs = [...svg.matchAll(/<rect class="seg"[^>]*fill="([^"]+)"><title>([^<]+)<\/title>/g)];
    expect(segs.map((m) => m[2])).toEqual([
      "glm-5.1: $0.0120",
      "qwen3.8-27b: $0.0310",
      "deepseek-v4: $0.0440",
      "qwen3.8-27b: $0.0200",
    ]);
    // The same model has the same colour in every bar.
    const qwen = segs.filter((m) => m[2]!.startsWith("qwen")).map((m) => m[1]);
    expect(new Set(qwen).size).toBe(1);
    expect([...svg.matchAll(/<circle class="score-dot/g)]).toHaveLength(3);
    expect(svg).toContain("<polyline");
    // Oldest first: epoch 40, epoch 41, then the local run.
    expect([...svg.matchAll(/text-anchor="middle">([^<]+)</g)].map((m) => m[1])).toEqual([
      "e40",
      "e41",
      "c3c3c3",
    ]);
  });

  it("says so when there is nothing yet", () => {
    const db = openDb(":memory:");
    const s = new StatusReader(db, NETWORK).snapshot({
      config: loadConfig({}),
      live: new LiveStatus(),
      now: NOW,
    });
    const html = renderMain(s);
    expect(html).toContain("No alarms");
    expect(html).toContain("No challenge epoch seen yet");
    expect(html).toContain("No winner cached yet");
    expect(html).toContain("No set_weights attempt yet");
    expect(html).toContain('id="no-evaluation"');
    expect(html).toContain("No verdicts yet");
  });
});

describe("snapshot shaping", () => {
  it("summarizes stored evaluations, reading cost by model from the verdict", () => {
    const s = snapshotOf();
    expect(s.verdicts.map((v) => [v.evaluationId, v.status, v.score, v.costUsd])).toEqual([
      ["ev_c", "rejected", 0, 0],
      ["ev_b", "scored", 2.25, 0.064],
      ["ev_a", "scored", 2.25, 0.043],
    ]);
    expect(s.verdicts[1]!.costByModel).toEqual({ "qwen3.8-27b": 0.02, "deepseek-v4": 0.044 });
    expect(s.verdicts[0]!.rejection).toEqual({
      code: "missing_skill_md",
      message: "the pack has no SKILL.md",
    });
  });

  it("lists a verdict's evidence (EvidenceIndex) on the page, with how to verify it", () => {
    const db = openDb(":memory:");
    seedStore(db, NOW, {});
    new EvidenceIndex(db).put("ev_b", {
      id: "e".repeat(64),
      path: "/data/evidence/x.tar.gz",
      bytes: 62_044,
      signer: "5F",
      createdAt: "t",
    });
    const s = new StatusReader(db, NETWORK).snapshot({ config: loadConfig({}), live: null, now: NOW });
    expect(s.verdicts.map((v) => v.evidence?.id ?? null)).toEqual([null, "e".repeat(64), null]);
    const html = renderMain(s);
    expect(html).toContain('<span title="trajrl-validator verify /data/evidence/x.tar.gz">eeeeeeeeeeee');
    expect(html).toContain(">evidence</th>");
  });

  it("keeps a row whose verdict this version cannot read, and says so", () => {
    const row: EvaluationRow = {
      id: "ev_x",
      resumeKey: "k",
      packHash: "ff".repeat(32),
      spec: 1,
      scenarios: [],
      source: "local",
      epochId: null,
      status: "scored",
      reason: null,
      verdict: { score: "not a number" },
      meta: {},
      createdAt: "2026-01-01T00:00:00Z",
      finishedAt: null,
    };
    const v = summarizeEvaluation(row);
    expect(v.status).toBe("scored (unreadable verdict)");
    expect(v.score).toBeNull();
    expect(summarizeEvaluation({ ...row, verdict: null, status: "running" }).status).toBe("running");
  });

  it("keeps counting the elapsed time of active scenarios between events, not of finished ones", () => {
    const live = new LiveStatus(() => NOW);
    live.startEvaluation({
      evaluationId: "e",
      packHash: "p",
      label: "l",
      epochId: null,
      spec: 1,
      capUsd: 1,
      scenarios: ["a", "b"],
    });
    live.onProgress({
      evaluationId: "e",
      scenario: "a",
      phase: "running",
      attempt: 1,
      spentUsd: 0,
      capUsd: 1,
      elapsedMs: 5000,
    });
    live.onProgress({
      evaluationId: "e",
      scenario: "b",
      phase: "done",
      attempt: 1,
      spentUsd: 0,
      capUsd: 1,
      elapsedMs: 7000,
    });
    const seen = (s: string) => (s === "a" || s === "b" ? NOW - 3000 : undefined);
    const r = runningEvaluation(live.evaluation, NOW, seen)!;
    expect(r.scenarios.map((x) => [x.scenario, x.elapsedMs])).toEqual([
      ["a", 8000],
      ["b", 7000],
    ]);
  });

  it("derives alarms: stale loops, a stale winner cache, a failed last set_weights; live ones win", () => {
    const alarms = deriveAlarms({
      live: [
        {
          code: "winner_cache_stale",
          message: "from the loop",
          severity: "warn",
          since: 5,
          lastSeen: 6,
          count: 2,
        },
      ],
      staleLoops: [{ name: "eval", intervalMs: 10_000, lastTickAt: NOW - 60_000, ticks: 3, failures: 0 }],
      winner: {
        hotkey: null,
        uid: null,
        packHash: null,
        score: null,
        sinceEpochId: null,
        specNumber: null,
        finalizedEpochId: null,
        finalizedOutcome: null,
        fetchedAt: NOW - 90_000_000,
        ageMs: 90_000_000,
        fresh: false,
      },
      lastWeights: {
        id: 1,
        at: "2026-06-01T11:59:00.000Z",
        mode: "direct",
        reason: null,
        uids: [0],
        weights: [1],
        outcome: "failed",
        errorName: "SettingWeightsTooFast",
        message: null,
        txHash: null,
        includedBlock: null,
        finishedAt: null,
      },
      now: NOW,
    });
    expect(alarms.map((a) => [a.code, a.severity, a.source])).toEqual([
      ["loop_stale:eval", "error", "derived"],
      ["set_weights_failed", "error", "derived"],
      ["winner_cache_stale", "warn", "live"],
    ]);
    expect(alarms[0]!.message).toBe("loop eval has not ticked for 60s (interval 10s)");
    expect(alarms[1]!.message).toContain("SettingWeightsTooFast");
  });

  it("raises set_weights_failed from the stored attempts", () => {
    const s = snapshotOf({ weightsOutcome: "failed" });
    expect(s.alarms.find((a) => a.code === "set_weights_failed")?.message).toContain(
      "NotEnoughStakeToSetWeights",
    );
    expect(renderMain(s)).toContain('data-code="set_weights_failed"');
    expect(snapshotOf().alarms.some((a) => a.code === "set_weights_failed")).toBe(false);
  });
});

describe("the terminal summary", () => {
  it("prints the same sections as the page", () => {
    const text = renderText(snapshotOf(), { note: "(live, from the daemon at http://127.0.0.1:8080)" });
    expect(text).toContain("trajrl-validator v");
    expect(text).toContain("finney netuid 11 · simulated LLM");
    expect(text).toContain("(live, from the daemon at http://127.0.0.1:8080)");
    expect(text).toMatch(/warn\s+consensus_divergence/);
    expect(text).toMatch(/EPOCH\s+42 · challenger 5Grwva…utQY/);
    expect(text).toMatch(/WINNER\s+5FHneW…94ty uid 7 · score 2.25/);
    expect(text).toMatch(/WEIGHTS\s+included · uid 7: 100% · block 5123456/);
    expect(text).toMatch(/OUTBOX\s+pending 1 · delivered 0 · abandoned 0/);
    expect(text).toMatch(/binary-flag-hunt\s+running\s+1\s+\S+\s+\[#########\.\]\s+\$0\.2700 \/ \$0\.3000/);
    expect(text).toMatch(/rejected missing_skill_md/);
    expect(text).toMatch(/qwen3\.8-27b\s+2\s+\$0\.0100\s+1\s+0/);
  });

  it("names what each verdict was scored on: suite quick on the built-in suite, spec N on the subnet's", () => {
    const s = snapshotOf();
    s.verdicts[0]!.spec = 0;
    s.verdicts[0]!.suite = "quick";
    s.verdicts[1]!.spec = 27;
    s.verdicts[1]!.suite = null;
    const rows = renderText(s).split("RECENT VERDICTS")[1]!;
    expect(rows).toMatch(/ · suite quick /);
    expect(rows).toMatch(/ · spec 27 /);
    const html = renderMain(s);
    expect(html).toMatch(/<td>[^<]* · suite quick<\/td>/);
    expect(html).toMatch(/<td>[^<]* · spec 27<\/td>/);
  });

  it("says why the weights went where they did: the seated winner, a copied owner row, a burn", () => {
    const s = snapshotOf();
    expect(renderText(s)).toMatch(
      /WEIGHTS\s+included · uid 7: 100%.*\n\s+100 % to the platform's seated winner\n/,
    );
    s.weights.last!.reason = "no_seat";
    s.weights.last!.uids = [0];
    s.winner!.hotkey = null;
    const text = renderText(s);
    expect(text).toMatch(/WINNER\s+empty seat · /);
    expect(text).toContain(
      "no winner seated and the subnet owner's weights unreadable: burned to the owner's uid (upstream's rule; the chain burns what the owner's uid receives)",
    );
    const html = renderMain(s);
    expect(html).toContain('<dt>why</dt><dd><span title="no_seat">no winner seated and the subnet owner');
    s.weights.last!.reason = "owner_row";
    expect(renderMain(s)).toContain(
      "no winner seated: a copy of the subnet owner&#39;s weights (upstream&#39;s rule)",
    );
  });

  it("puts health and the worst alarm in the header line, and on the page's header", () => {
    const s = snapshotOf();
    s.health = decideHealth(
      {
        staleLoops: [],
        database: { ok: true, checkedAt: NOW },
        docker: { ok: true, checkedAt: NOW },
        alarms: [{ code: "chain_unreachable", message: "chain: down", since: NOW - 600_000 }],
      },
      NOW,
    );
    s.alarms = [
      {
        code: "chain_unreachable",
        message: "chain: down",
        severity: "error",
        since: NOW - 600_000,
        lastSeen: NOW,
        count: 3,
        source: "live",
      },
      ...s.alarms,
    ];
    const head = renderText(s).split("\n")[0]!;
    expect(head).toMatch(/ · DEGRADED \(chain\) · ALARM chain_unreachable \(10m00s ago\) \+1$/);
    expect(renderText(s)).toContain("  ! chain: chain unreachable for 10m00s (threshold 5m00s): chain: down");
    const page = renderHeader(s);
    expect(page).toContain('<span class="pill warn" id="health"');
    expect(page).toContain(">degraded: chain</span>");
    expect(page).toMatch(
      /<span class="pill bad" id="worst-alarm" title="chain: down">chain_unreachable \+1<\/span>/,
    );
  });

  it("names this build and the upstream release it votes as (the `version` the platform gates on)", () => {
    const s = snapshotOf();
    expect(s.votesAs).toBe(UPSTREAM_RELEASE);
    expect(renderText(s).split("\n")[0]).toContain(
      `trajrl-validator v${s.version} (votes as trajectoryRL ${UPSTREAM_RELEASE})`,
    );
    expect(renderHeader(s)).toMatch(
      new RegExp(
        `<span class="muted" id="votes-as" title="[^"]+">· votes as trajectoryRL ${UPSTREAM_RELEASE.replaceAll(".", "\\.")}</span>`,
      ),
    );
  });

  it("does not pass terminal control sequences through", () => {
    const s = snapshotOf();
    s.evaluation!.label = "evil\u001b]0;pwned\u0007\nnext";
    const text = renderText(s);
    expect(text).not.toContain("\u001b");
    expect(text).toContain("evil\\u001b]0;pwned\\u0007\\nnext");
  });

  it("says what needs the daemon when read from the database", () => {
    const text = renderText(snapshotOf({ live: false }));
    expect(text).toContain("EPOCH        unknown (needs the daemon)");
    expect(text).toContain("RUNNING      unknown (needs the daemon)");
    expect(text).toContain("RECENT VERDICTS");
    expect(text).not.toContain("LOOPS");
  });
});

describe("formatters", () => {
  it("formats money, durations, keys and weight shares", () => {
    expect(usd(0)).toBe("$0");
    expect(usd(0.04567)).toBe("$0.0457");
    expect(usd(12.5)).toBe("$12.50");
    expect(usd(null)).toBe("–");
    expect(duration(3400)).toBe("3.4s");
    expect(duration(61_000)).toBe("1m01s");
    expect(duration(3_723_000)).toBe("1h02m");
    expect(duration(-1)).toBe("–");
    expect(shortKey("5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY")).toBe("5Grwva…utQY");
    expect(weightShares([0, 7], [0, 65535])).toBe("uid 7: 100%");
    expect(weightShares([1, 2], [1, 3])).toBe("uid 2: 75.0%, uid 1: 25.0%");
    expect(weightShares([], [])).toBe("–");
  });
});

describe("image pulls on the status page", () => {
  it("shows the bench's pulls while an evaluation's images are prepared, and forgets them when it ends", () => {
    const db = openDb(":memory:");
    seedStore(db, NOW);
    const live = new LiveStatus(() => NOW);
    const snap = () =>
      new StatusReader(db, NETWORK).snapshot({
        config: loadConfig({}),
        live,
        counters: new Tally().snapshot(),
        now: NOW,
      });
    expect(snap().images).toEqual([]);
    expect(renderMain(snap())).not.toContain('id="images"');
    const ref = "127.0.0.1:5000/trajectoryrl/scenario-a:T";
    live.benchProgress({
      image: "scenario/a",
      ref,
      phase: "pulling",
      bytes: 1_500_000,
      totalBytes: 3_000_000,
    });
    live.benchProgress({
      image: "bench",
      ref: "127.0.0.1:5000/trajectoryrl/sandbox-agent:T",
      phase: "fallback",
      note: "registry down",
    });
    const s = snap();
    expect(s.images.map((i) => [i.image, i.phase])).toEqual([
      ["scenario/a", "pulling"],
      ["bench", "fallback"],
    ]);
    const html = renderMain(s);
    expect(html).toContain('id="images"');
    expect(html).toContain(esc(ref));
    expect(html).toContain("1.5 MB / 3.0 MB");
    expect(html).toContain("registry down");
    live.endEvaluation();
    expect(snap().images).toEqual([]);
  });
});
