/**
 * The status page, rendered on the server from a StatusSnapshot. The whole page works without
 * JavaScript; with it, static/app.js swaps in a freshly rendered `#main` fragment on every live event,
 * so there is exactly one renderer (this file) and escaping happens in one place. No inline script or
 * style: the page is served with a strict Content-Security-Policy; bars and the chart are inline SVG
 * (presentation attributes are not styles).
 */
import { esc } from "../html-escape.js";
import { specLabel } from "../scenarios/index.js";
import { spendFraction } from "../spend-bar.js";
import {
  ago,
  duration,
  isoOf,
  score,
  shortHash,
  shortKey,
  usd,
  weightShares,
  weightsReasonText,
} from "./format.js";
import type {
  AlarmView,
  LoopView,
  RunningEvaluation,
  ScenarioProgress,
  StatusSnapshot,
  VerdictSummary,
} from "./snapshot.js";

/** A tagged template that escapes every interpolation except those wrapped by `raw()`. */
class Raw {
  constructor(readonly html: string) {}
}
const raw = (html: string) => new Raw(html);
function h(strings: TemplateStringsArray, ...values: unknown[]): Raw {
  let out = strings[0]!;
  for (let k = 0; k < values.length; k++) {
    const v = values[k];
    out += (Array.isArray(v) ? v : [v]).map((x) => (x instanceof Raw ? x.html : esc(x))).join("");
    out += strings[k + 1]!;
  }
  return raw(out);
}

const time = (at: number | string | null | undefined, now: number) =>
  h`<time datetime="${isoOf(at)}" title="${isoOf(at)}">${ago(at, now)}</time>`;

// Colour per model: stable across renders (sorted model names index a fixed palette).
const PALETTE = ["#4c9aff", "#36b37e", "#ffab00", "#ff5630", "#a78bfa", "#00b8d9", "#f472b6", "#9ca3af"];
export function modelColors(models: Iterable<string>): Map<string, string> {
  const sorted = [...new Set(models)].sort();
  return new Map(sorted.map((m, k) => [m, PALETTE[k % PALETTE.length]!]));
}

const PHASES = new Set(["queued", "starting", "running", "verifying", "done", "failed", "retrying"]);
const phaseClass = (p: string) => (PHASES.has(p) ? `phase-${p}` : "phase-unknown");
const ACTIVE = new Set(["starting", "running", "verifying", "retrying"]);

function spendBar(spent: number, cap: number): Raw {
  const frac = spendFraction(spent, cap);
  const cls = frac >= 1 ? "bar-over" : frac >= 0.8 ? "bar-high" : "bar-ok";
  const w = (frac * 100).toFixed(1);
  return h`<svg class="bar" viewBox="0 0 100 8" preserveAspectRatio="none" role="img" aria-label="${usd(spent)} of ${usd(cap)}"><rect class="bar-bg" x="0" y="0" width="100" height="8" rx="2"/><rect class="${cls}" x="0" y="0" width="${w}" height="8" rx="2"/></svg>`;
}

function card(title: string, body: Raw, extra = ""): Raw {
  return h`<section class="card ${extra}"><h2>${title}</h2>${body}</section>`;
}

function kv(rows: [string, Raw | string][]): Raw {
  return h`<dl class="kv">${rows.map(([k, v]) => h`<dt>${k}</dt><dd>${v}</dd>`)}</dl>`;
}

function renderAlarms(alarms: AlarmView[], now: number): Raw {
  if (alarms.length === 0)
    return h`<section class="alarms none" id="alarms"><span class="dot ok"></span>No alarms</section>`;
  return h`<section class="alarms" id="alarms" aria-label="alarms"><ul>${alarms.map(
    (a) =>
      h`<li class="alarm sev-${a.severity}" data-code="${a.code}"><span class="sev">${a.severity}</span><code>${a.code}</code><span class="msg">${a.message}</span><span class="when">since ${time(a.since, now)}${a.count > 1 ? ` · ×${a.count}` : ""}</span></li>`,
  )}</ul></section>`;
}

function renderEpoch(s: StatusSnapshot): Raw {
  const e = s.epoch;
  if (!e) return card("Epoch", h`<p class="muted">No challenge epoch seen yet.</p>`, "epoch");
  return card(
    "Epoch",
    kv([
      ["epoch", h`<strong class="big">${e.epochId}</strong>`],
      [
        "challenger",
        h`<span class="mono" title="${e.challengerHotkey}">${shortKey(e.challengerHotkey)}</span>`,
      ],
      ["pack", h`<span class="mono" title="${e.packHash}">${shortHash(e.packHash)}</span>`],
      ["spec", e.specNumber === null ? "–" : String(e.specNumber)],
      ["decision", h`<span class="tag">${e.decision}</span>`],
      ["seen", time(e.seenAt, s.now)],
    ]),
    "epoch",
  );
}

function renderWinner(s: StatusSnapshot): Raw {
  const w = s.winner;
  if (!w) return card("Seated winner", h`<p class="muted">No winner cached yet.</p>`, "winner");
  const seat = w.hotkey
    ? h`<span class="mono" title="${w.hotkey}">${shortKey(w.hotkey)}</span>${w.uid === null ? "" : h` <span class="muted">uid ${w.uid}</span>`}`
    : h`<span class="muted">empty seat</span>`;
  return card(
    "Seated winner",
    kv([
      ["winner", seat],
      ["score", score(w.score)],
      ["pack", h`<span class="mono" title="${w.packHash ?? ""}">${shortHash(w.packHash)}</span>`],
      ["since epoch", w.sinceEpochId === null ? "–" : String(w.sinceEpochId)],
      [
        "cache",
        h`<span class="${w.fresh ? "good" : "bad"}">${w.fresh ? "fresh" : "stale"}</span> · fetched ${time(w.fetchedAt, s.now)}`,
      ],
    ]),
    "winner",
  );
}

function renderWeights(s: StatusSnapshot): Raw {
  const last = s.weights.last;
  const live = s.weights.live;
  if (!last && !live)
    return card("Last weights", h`<p class="muted">No set_weights attempt yet.</p>`, "weights");
  if (last) {
    const okCls = last.outcome === "included" ? "good" : last.outcome === "pending" ? "muted" : "bad";
    return card(
      "Last weights",
      kv([
        [
          "outcome",
          h`<span class="${okCls}">${last.outcome}</span>${last.errorName ? h` <code>${last.errorName}</code>` : ""}`,
        ],
        ["weights", weightShares(last.uids, last.weights)],
        ["why", h`<span title="${last.reason ?? ""}">${weightsReasonText(last.reason)}</span>`],
        ["block", last.includedBlock === null ? "–" : String(last.includedBlock)],
        ["tx", h`<span class="mono" title="${last.txHash ?? ""}">${shortHash(last.txHash, 14)}</span>`],
        ["when", time(last.finishedAt ?? last.at, s.now)],
      ]),
      "weights",
    );
  }
  const l = live!;
  return card(
    "Last weights",
    kv([
      ["outcome", l.outcome],
      ["weights", weightShares(l.uids, l.weights)],
      ["why", h`<span title="${l.reason}">${weightsReasonText(l.reason)}</span>`],
      ["when", time(l.at, s.now)],
    ]),
    "weights",
  );
}

function scenarioRow(p: ScenarioProgress): Raw {
  const active = ACTIVE.has(p.phase);
  const q = p.quality === undefined ? "–" : score(p.quality);
  const failure = p.failure
    ? h`<div class="failure" title="${p.failure.message}">${p.failure.class}: <code>${p.failure.code}</code></div>`
    : "";
  return h`<tr class="scenario" data-scenario="${p.scenario}" data-phase="${p.phase}" data-spent="${p.spentUsd}">
<td class="name mono">${p.scenario}</td>
<td><span class="phase ${phaseClass(p.phase)}">${p.phase}</span>${failure}</td>
<td class="num">${p.attempt > 0 ? String(p.attempt) : "–"}</td>
<td class="num elapsed" data-elapsed-ms="${Math.round(p.elapsedMs)}" data-active="${active ? "1" : "0"}">${p.phase === "queued" ? "–" : duration(p.elapsedMs)}</td>
<td class="spend">${spendBar(p.spentUsd, p.capUsd)}<span class="spend-text">${usd(p.spentUsd)} / ${usd(p.capUsd)}</span></td>
<td class="num quality">${q}</td>
</tr>`;
}

/** Image pulls and builds of the evaluation starting or running (the bench's progress). */
function renderImages(s: StatusSnapshot): Raw {
  if (!s.images?.length) return h``;
  const mb = (b: number | undefined) => (b === undefined ? "" : `${(b / 1e6).toFixed(1)} MB`);
  const rows = s.images.map(
    (i) =>
      h`<tr><td>${i.engine ? `${i.engine}: ` : ""}${i.image}</td><td class="mono">${i.ref}</td><td>${i.phase}</td><td class="num">${i.totalBytes ? `${mb(i.bytes)} / ${mb(i.totalBytes)}` : ""}</td><td class="muted">${i.note ?? ""}</td></tr>`,
  );
  return h`<table class="progress" id="images"><thead><tr><th>image</th><th>reference</th><th>phase</th><th class="num">pulled</th><th></th></tr></thead><tbody>${rows}</tbody></table>`;
}

function renderEvaluation(e: RunningEvaluation | null, s: StatusSnapshot): Raw {
  if (!e)
    return card(
      "Running evaluation",
      h`<p class="muted" id="no-evaluation">Idle: no evaluation is running${s.source === "database" ? " (live data needs the daemon)" : ""}.</p>${renderImages(s)}`,
      "evaluation wide",
    );
  const done = e.scenarios.filter((x) => x.phase === "done" || x.phase === "failed").length;
  const body = h`<div class="eval-head">
<div><span class="label">${e.label}</span> <span class="muted mono">${e.evaluationId}</span></div>
<div class="eval-meta">pack <span class="mono" title="${e.packHash}">${shortHash(e.packHash)}</span> · ${specLabel(e.spec, e.suite)}${e.epochId === null ? "" : ` · epoch ${e.epochId}`} · started ${time(e.startedAt, s.now)} · <strong id="eval-done">${done}/${e.scenarios.length}</strong> done · spent <strong id="eval-spent">${usd(e.spentUsd)}</strong> (cap ${usd(e.capUsd)} per episode)</div>
</div>
<table class="progress" id="progress"><thead><tr><th>scenario</th><th>phase</th><th class="num">attempt</th><th class="num">elapsed</th><th>spend vs cap</th><th class="num">quality</th></tr></thead>
<tbody>${e.scenarios.map(scenarioRow)}</tbody></table>${renderImages(s)}`;
  return card("Running evaluation", body, "evaluation wide");
}

/** Stacked bars: cost by model per verdict (left axis), score as a dot (right axis). Oldest on the left. */
export function verdictChart(
  verdicts: readonly VerdictSummary[],
  colors: Map<string, string> = modelColors(verdicts.flatMap((v) => Object.keys(v.costByModel))),
): Raw {
  const items = [...verdicts].reverse().filter((v) => v.costUsd !== null || v.score !== null);
  if (items.length === 0) return h`<p class="muted">No verdicts yet.</p>`;
  const W = 720;
  const H = 180;
  const pad = { l: 52, r: 44, t: 12, b: 26 };
  const cw = W - pad.l - pad.r;
  const ch = H - pad.t - pad.b;
  const maxCost = Math.max(1e-9, ...items.map((v) => v.costUsd ?? 0));
  const maxScore = Math.max(1, ...items.map((v) => v.score ?? 0), ...items.map((v) => v.scenarios.length));
  const slot = cw / items.length;
  const bw = Math.min(36, slot * 0.6);
  const y = (usdv: number) => pad.t + ch - (usdv / maxCost) * ch;
  const ys = (sc: number) => pad.t + ch - (sc / maxScore) * ch;
  const parts: Raw[] = [];
  for (const frac of [0, 0.5, 1]) {
    const yy = (pad.t + ch - frac * ch).toFixed(1);
    parts.push(
      h`<line class="grid" x1="${pad.l}" x2="${W - pad.r}" y1="${yy}" y2="${yy}"/><text class="axis" x="${pad.l - 6}" y="${yy}" text-anchor="end" dominant-baseline="middle">${usd(maxCost * frac)}</text><text class="axis score-axis" x="${W - pad.r + 6}" y="${yy}" dominant-baseline="middle">${score(maxScore * frac)}</text>`,
    );
  }
  const dots: string[] = [];
  items.forEach((v, k) => {
    const cx = pad.l + slot * k + slot / 2;
    const x = cx - bw / 2;
    let acc = 0;
    const models = Object.entries(v.costByModel).sort(([a], [b]) => (a < b ? -1 : 1));
    for (const [model, c] of models) {
      if (c <= 0) continue;
      const y0 = y(acc);
      const y1 = y(acc + c);
      acc += c;
      parts.push(
        h`<rect class="seg" x="${x.toFixed(1)}" y="${y1.toFixed(1)}" width="${bw.toFixed(1)}" height="${Math.max(0.5, y0 - y1).toFixed(1)}" fill="${colors.get(model)}"><title>${model}: ${usd(c)}</title></rect>`,
      );
    }
    // Epoch runs by epoch; local runs by the pack (as in the table below).
    const label = v.epochId !== null ? `e${v.epochId}` : shortHash(v.packHash, 6);
    parts.push(h`<text class="axis" x="${cx.toFixed(1)}" y="${H - 8}" text-anchor="middle">${label}</text>`);
    if (v.score !== null) {
      const cy = ys(v.score);
      dots.push(`${cx.toFixed(1)},${cy.toFixed(1)}`);
      parts.push(
        h`<circle class="score-dot ${v.qualified ? "q" : "nq"}" cx="${cx.toFixed(1)}" cy="${cy.toFixed(1)}" r="4"><title>score ${score(v.score)}${v.rejected ? " (rejected)" : ""} · cost ${usd(v.costUsd)}</title></circle>`,
      );
    }
  });
  const line = dots.length > 1 ? h`<polyline class="score-line" points="${dots.join(" ")}"/>` : "";
  const shown = new Set(items.flatMap((v) => Object.keys(v.costByModel)));
  const legend = [...colors]
    .filter(([m]) => shown.has(m))
    .map(
      ([m, c]) =>
        h`<span class="legend-item"><svg width="10" height="10"><rect width="10" height="10" rx="2" fill="${c}"/></svg>${m}</span>`,
    );
  return h`<figure class="chart"><svg id="verdict-chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="cost by model and score of recent verdicts">${parts}${line}</svg>
<figcaption><span class="legend-item"><svg width="10" height="10"><circle cx="5" cy="5" r="4" class="score-dot q"/></svg>score (right axis)</span>${legend}</figcaption></figure>`;
}

function statusTag(v: VerdictSummary): Raw {
  if (v.rejected)
    return h`<span class="tag bad" title="${v.rejection?.message ?? ""}">rejected${v.rejection ? ` · ${v.rejection.code}` : ""}</span>`;
  const cls =
    v.status === "scored"
      ? "good"
      : v.status === "running"
        ? "info"
        : v.status === "discarded"
          ? "warn"
          : "muted";
  return h`<span class="tag ${cls}" title="${v.reason ?? ""}">${v.status}</span>`;
}

function renderVerdicts(s: StatusSnapshot, colors: Map<string, string>): Raw {
  const rows = s.verdicts.map((v) => {
    const top = Object.entries(v.costByModel)
      .sort(([, a], [, b]) => b - a)
      .slice(0, 3)
      .map(([m, c]) => `${m} ${usd(c)}`)
      .join(", ");
    return h`<tr><td>${time(v.createdAt, s.now)}</td><td class="mono"><a href="/api/evaluations/${encodeURIComponent(v.evaluationId)}" title="${v.evaluationId}">${shortHash(v.packHash)}</a></td><td>${v.label ?? (v.epochId !== null ? `epoch ${v.epochId}` : v.source)} · ${specLabel(v.spec, v.suite)}</td><td>${statusTag(v)}</td><td class="num"><strong>${score(v.score)}</strong>${v.scenarios.length ? h`<span class="muted">/${v.scenarios.length}</span>` : ""}</td><td class="num">${usd(v.costPerEpisodeUsd)}</td><td class="num">${usd(v.costUsd)}</td><td class="models">${top || "–"}</td><td class="mono">${v.evidence ? h`<span title="trajrl-validator verify ${v.evidence.path}">${shortHash(v.evidence.id)}</span>` : "–"}</td></tr>`;
  });
  const table =
    rows.length === 0
      ? ""
      : h`<table class="verdicts"><thead><tr><th>when</th><th>pack</th><th>what</th><th>status</th><th class="num">score</th><th class="num" title="mean cost of one episode: one scenario run">$/episode</th><th class="num" title="cost of the session: the pack over the whole spec or suite">$/session</th><th>cost by model</th><th title="the verdict's evidence: re-grade it offline with trajrl-validator verify">evidence</th></tr></thead><tbody>${rows}</tbody></table>`;
  return card("Recent verdicts", h`${verdictChart(s.verdicts, colors)}${table}`, "verdicts wide");
}

/** The engine pool: one row per engine (shown once a pool has more than the default engine, or trouble). */
function renderEngines(s: StatusSnapshot): Raw {
  const engines = s.engines ?? [];
  const plain =
    engines.length === 1 &&
    engines[0]!.slots === null &&
    engines[0]!.state === "ready" &&
    !engines[0]!.draining;
  if (engines.length === 0 || plain) return h``;
  const mb = (b: number) => `${(b / 1e6).toFixed(0)} MB`;
  const rows = engines.map((e) => {
    const dot = e.state === "ready" ? (e.draining ? "warn" : "ok") : e.state === "down" ? "bad" : "warn";
    const failures = Object.entries(e.failures)
      .map(([code, n]) => `${code} ${n}`)
      .join(", ");
    return h`<tr data-engine="${e.name}"><td><span class="dot ${dot}"></span>${e.name}${e.primary ? h` <span class="muted">(builds)</span>` : ""}</td><td class="mono">${e.url}</td><td>${e.state}${e.draining ? " · draining" : ""} <span class="muted">${time(e.since, s.now)}</span></td><td class="num">${e.running} / ${e.slots ?? "–"}</td><td class="num">${e.episodes.scored} / ${e.episodes.failed}</td><td>${failures || "–"}</td><td class="num">${e.images.present}${e.images.copies ? ` · copied ${e.images.copies} (${mb(e.images.copiedBytes)})` : ""}${e.images.pulls ? ` · pulled ${e.images.pulls}` : ""}</td><td>${e.runtime?.name ?? "–"}</td><td>${e.lastError ? h`<code title="${e.lastError.message}">${e.lastError.code}</code> ${time(e.lastError.at, s.now)}` : "–"}</td></tr>`;
  });
  return card(
    "Engines",
    h`<table class="engines" id="engines"><thead><tr><th>engine</th><th>url</th><th>state</th><th class="num">running / slots</th><th class="num">scored / failed</th><th>failures</th><th class="num">images</th><th>runtime</th><th>last error</th></tr></thead><tbody>${rows}</tbody></table>`,
    "engines wide",
  );
}

function renderLoops(loops: LoopView[], now: number): Raw {
  if (loops.length === 0)
    return card("Loops", h`<p class="muted">No loops registered (not the daemon, or starting).</p>`, "loops");
  return card(
    "Loops",
    h`<table class="loops"><thead><tr><th>loop</th><th>last ok</th><th class="num">ticks</th><th class="num">failures</th><th>last error</th></tr></thead><tbody>${loops.map(
      (l) =>
        h`<tr class="${l.stale ? "stale" : ""}"><td><span class="dot ${l.stale ? "bad" : l.lastError && (l.lastOkAt ?? 0) < l.lastError.at ? "warn" : "ok"}"></span>${l.name}</td><td>${time(l.lastOkAt, now)}</td><td class="num">${l.ticks}</td><td class="num">${l.failures}</td><td>${l.lastError ? h`<code title="${l.lastError.message}">${l.lastError.code}</code> ${time(l.lastError.at, now)}` : "–"}</td></tr>`,
    )}</tbody></table>`,
    "loops",
  );
}

function renderMeter(s: StatusSnapshot, colors: Map<string, string>): Raw {
  const models = Object.entries(s.counters.meter);
  const meter =
    models.length === 0
      ? h`<p class="muted">No metered calls since start.</p>`
      : h`<table class="meter"><thead><tr><th>model</th><th class="num">calls</th><th class="num">spend</th><th class="num">clamped</th><th class="num">refused</th></tr></thead><tbody>${models.map(
          ([m, t]) =>
            h`<tr><td class="model"><svg width="10" height="10"><rect width="10" height="10" rx="2" fill="${colors.get(m)}"/></svg> ${m}</td><td class="num">${t.calls}</td><td class="num">${usd(t.usd)}</td><td class="num">${t.clamps}</td><td class="num">${t.refusals.cap + t.refusals.allowlist}</td></tr>`,
        )}</tbody></table>`;
  const eps = s.counters.episodes;
  const episodes =
    eps.length === 0
      ? ""
      : h`<p class="episodes">${eps.map(
          (e) =>
            h`<span class="tag ${e.outcome === "scored" ? "good" : e.outcome === "failed" ? "bad" : "warn"}">${e.outcome}${e.failureClass === "none" ? "" : `/${e.failureClass}`} ${e.count}</span> `,
        )}</p>`;
  return card("Meter & episodes (since start)", h`${meter}${episodes}`, "meter");
}

function renderOutbox(s: StatusSnapshot): Raw {
  const c = s.outbox.counts;
  const rows = s.outbox.recent.map(
    (o) =>
      h`<tr><td>${o.epochId}</td><td><span class="tag ${o.state === "delivered" ? "good" : o.state === "pending" ? "warn" : "muted"}">${o.state}${o.outcome && o.outcome !== o.state ? ` · ${o.outcome}` : ""}</span></td><td class="num">${score(o.score)}</td><td class="num">${o.attempts}</td><td>${o.lastError ? h`<span title="${o.lastError}">${o.lastError.slice(0, 40)}</span>` : "–"}</td></tr>`,
  );
  return card(
    "Verdict outbox",
    h`<p><span class="tag warn">pending ${c.pending ?? 0}</span> <span class="tag good">delivered ${c.delivered ?? 0}</span> <span class="tag muted">abandoned ${c.abandoned ?? 0}</span></p>${
      rows.length
        ? h`<table><thead><tr><th>epoch</th><th>state</th><th class="num">score</th><th class="num">tries</th><th>last error</th></tr></thead><tbody>${rows}</tbody></table>`
        : ""
    }`,
    "outbox",
  );
}

/** The part of the page that changes: swapped in by app.js from /fragment. */
export function renderMain(s: StatusSnapshot): string {
  // One colour per model across the chart and the meter table.
  const colors = modelColors([
    ...s.verdicts.flatMap((v) => Object.keys(v.costByModel)),
    ...Object.keys(s.counters.meter),
  ]);
  return h`${renderAlarms(s.alarms, s.now)}
<div class="grid three">${renderEpoch(s)}${renderWinner(s)}${renderWeights(s)}</div>
${renderEvaluation(s.evaluation, s)}
${renderEngines(s)}
${renderVerdicts(s, colors)}
<div class="grid three lower">${renderLoops(s.loops, s.now)}${renderMeter(s, colors)}${renderOutbox(s)}</div>`
    .html;
}

function renderHealth(s: StatusSnapshot): Raw {
  if (!s.health) return h`<span class="pill muted" id="health">health unknown</span>`;
  if (s.health.state === "healthy")
    return h`<span class="pill good" id="health" title="loops, database, docker, chain, platform">healthy</span>`;
  const checks = [...new Set(s.health.reasons.map((r) => r.check))].join(", ");
  return h`<span class="pill ${s.health.state === "degraded" ? "warn" : "bad"}" id="health" title="${s.health.reasons.map((r) => r.message).join("\n")}">${s.health.state}: ${checks}</span>`;
}

/** The worst alarm (errors first, then the oldest) next to the health pill; the full list is in main. */
function renderWorstAlarm(s: StatusSnapshot): Raw {
  const a = s.alarms[0];
  if (!a) return h``;
  const more = s.alarms.length > 1 ? ` +${s.alarms.length - 1}` : "";
  return h`<span class="pill ${a.severity === "error" ? "bad" : "warn"}" id="worst-alarm" title="${a.message}">${a.code}${more}</span>`;
}

export function renderHeader(s: StatusSnapshot): string {
  const uptime = s.startedAt === null ? "" : h` · up ${duration(s.now - s.startedAt)}`;
  const votesAs = s.votesAs
    ? h` <span class="muted" id="votes-as" title="the version every score and heartbeat sends: the upstream trajectoryRL release whose rules this build implements">· votes as trajectoryRL ${s.votesAs}</span>`
    : "";
  return h`<div class="brand">trajrl-validator <span class="muted">v${s.version}</span>${votesAs}</div>
<div class="chips"><span class="chip">${s.node.network} · netuid ${s.node.netuid}</span>${s.node.simulated ? h`<span class="chip warn" title="no LLM_API_KEY: the built-in Engy simulator answers">simulated LLM</span>` : h`<span class="chip">${s.node.llmBaseUrl}</span>`}<span class="chip">concurrency ${s.node.concurrency}</span></div>
<div class="right">${renderHealth(s)}${renderWorstAlarm(s)}<span class="live" id="live" data-now="${s.now}">snapshot ${isoOf(s.now).slice(11, 19)}Z${uptime}</span></div>`
    .html;
}

export function renderPage(s: StatusSnapshot): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>trajrl-validator · status</title>
<link rel="stylesheet" href="/static/style.css">
<link rel="stylesheet" href="/static/components.css">
<script src="/static/app.js" defer></script>
<noscript><meta http-equiv="refresh" content="30"></noscript>
</head>
<body>
<header class="top" id="top">${renderHeader(s)}</header>
<main id="main">${renderMain(s)}</main>
<footer>JSON: <a href="/api/status">/api/status</a> · <a href="/api/evaluations">/api/evaluations</a> · <a href="/metrics">/metrics</a> · <a href="/healthz">/healthz</a></footer>
</body>
</html>
`;
}
