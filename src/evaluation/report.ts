/**
 * The HTML report of an `eval` run: one self-contained file (inline CSS and SVG, no scripts),
 * a leaderboard when several packs ran, then per pack the per-scenario quality and the cost by model.
 */
import { esc } from "../html-escape.js";
import { specLabel } from "../scenarios/index.js";
import type { LeaderboardEntry } from "./render.js";
import { fmtSecs, fmtUsd, sessionCosts } from "./render.js";
import type { Verdict } from "./types.js";

const PALETTE = ["#3b82f6", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6", "#14b8a6", "#f97316", "#64748b"];

function colorFor(model: string, all: string[]): string {
  return PALETTE[all.indexOf(model) % PALETTE.length] ?? "#64748b";
}

/** Horizontal bars of quality per scenario (0..1). */
function qualitySvg(v: Verdict): string {
  const rowH = 22;
  const labelW = 210;
  const barW = 360;
  const h = v.scenarios.length * rowH + 10;
  const rows = v.scenarios
    .map((s, k) => {
      const y = 5 + k * rowH;
      const w = Math.max(0, Math.min(1, s.quality)) * barW;
      const fill =
        s.failure && s.failure.class !== "policy"
          ? "#94a3b8"
          : s.quality >= 1
            ? "#10b981"
            : s.quality > 0
              ? "#f59e0b"
              : "#ef4444";
      return `<text x="0" y="${y + 15}" class="lbl">${esc(s.scenario)}</text>
<rect x="${labelW}" y="${y + 3}" width="${barW}" height="14" class="track"/>
<rect x="${labelW}" y="${y + 3}" width="${w.toFixed(1)}" height="14" fill="${fill}"/>
<text x="${labelW + barW + 8}" y="${y + 15}" class="val">${s.quality.toFixed(2)} (${s.passed}/${s.tests})</text>`;
    })
    .join("\n");
  return `<svg role="img" aria-label="quality per scenario" width="${labelW + barW + 110}" height="${h}">${rows}</svg>`;
}

/** One stacked bar per scenario of cost by model, with a legend; one scale for every pack of the report. */
function costSvg(v: Verdict, models: string[], maxCost: number): string {
  const rowH = 22;
  const labelW = 210;
  const barW = 360;
  const max = Math.max(1e-9, maxCost);
  const rows = v.scenarios
    .map((s, k) => {
      const y = 5 + k * rowH;
      let x = labelW;
      const parts = Object.entries(s.byModel)
        .sort((a, b) => models.indexOf(a[0]) - models.indexOf(b[0]))
        .map(([m, u]) => {
          const w = (u.costUsd / max) * barW;
          const r = `<rect x="${x.toFixed(1)}" y="${y + 3}" width="${w.toFixed(1)}" height="14" fill="${colorFor(m, models)}"><title>${esc(m)}: ${fmtUsd(u.costUsd)}, ${u.calls} calls</title></rect>`;
          x += w;
          return r;
        })
        .join("");
      return `<text x="0" y="${y + 15}" class="lbl">${esc(s.scenario)}</text>${parts}<text x="${labelW + barW + 8}" y="${y + 15}" class="val">${fmtUsd(s.costUsd)}</text>`;
    })
    .join("\n");
  const legendY = v.scenarios.length * rowH + 18;
  const legend = models
    .map(
      (m, k) =>
        `<rect x="${(k % 4) * 160}" y="${legendY + Math.floor(k / 4) * 18}" width="10" height="10" fill="${colorFor(m, models)}"/><text x="${(k % 4) * 160 + 14}" y="${legendY + Math.floor(k / 4) * 18 + 9}" class="lgd">${esc(m)}</text>`,
    )
    .join("");
  const h = legendY + Math.ceil(models.length / 4) * 18 + 6;
  return `<svg role="img" aria-label="cost by model per scenario" width="${labelW + barW + 110}" height="${h}">${rows}${legend}</svg>`;
}

function packSection(e: LeaderboardEntry, models: string[], maxCost: number): string {
  const v = e.verdict;
  const byModel = Object.entries(v.byModel)
    .sort((a, b) => b[1].costUsd - a[1].costUsd)
    .map(
      ([m, u]) =>
        `<tr><td><span class="sw" style="background:${colorFor(m, models)}"></span>${esc(m)}</td><td>${u.calls}</td><td>${u.promptTokens}</td><td>${u.cachedTokens}</td><td>${u.completionTokens}</td><td>${fmtUsd(u.costUsd)}</td></tr>`,
    )
    .join("");
  const rows = v.scenarios
    .map(
      (s) =>
        `<tr><td>${esc(s.scenario)}</td><td>${s.quality.toFixed(4)}</td><td>${s.passed}/${s.tests}</td><td>${fmtUsd(s.costUsd)}</td><td>${fmtSecs(s.timings.totalMs)}</td><td>${s.attempts}</td><td>${s.failure ? esc(`${s.failure.class}: ${s.failure.code} — ${s.failure.message}`) : ""}</td></tr>`,
    )
    .join("");
  return `<section>
<h2>${esc(e.label)} <small>${esc(v.packHash.slice(0, 16))}…</small></h2>
<p class="kpi"><b>score ${v.score.toFixed(4)}</b> of ${v.scenarios.length} · qualified ${v.qualified ? "yes" : "no"} · ${esc(specLabel(v.spec, v.provenance.suite))} · ${fmtUsd(sessionCosts(v).perSession)} per session (${fmtUsd(sessionCosts(v).perEpisode)} per episode)</p>
<div class="charts"><figure><figcaption>Quality per scenario</figcaption>${qualitySvg(v)}</figure>
<figure><figcaption>Cost by model per scenario</figcaption>${costSvg(v, models, maxCost)}</figure></div>
<table><thead><tr><th>scenario</th><th>quality</th><th>tests</th><th>$/episode</th><th>time</th><th>attempts</th><th>failure</th></tr></thead><tbody>${rows}</tbody></table>
<table><thead><tr><th>model</th><th>calls</th><th>prompt tok</th><th>cached tok</th><th>completion tok</th><th>cost</th></tr></thead><tbody>${byModel}</tbody></table>
${e.evidence ? `<p class="evidence">evidence <code>${esc(e.evidence.path)}</code> — re-grade it offline: <code>trajrl-validator verify ${esc(e.evidence.path)}</code></p>` : ""}
</section>`;
}

export function renderReport(
  entries: LeaderboardEntry[],
  meta: { title?: string; generatedAt?: string } = {},
): string {
  const models = [...new Set(entries.flatMap((e) => Object.keys(e.verdict.byModel)))].sort();
  const maxCost = Math.max(0, ...entries.flatMap((e) => e.verdict.scenarios.map((s) => s.costUsd)));
  const sorted = [...entries].sort(
    (a, b) => b.verdict.score - a.verdict.score || a.verdict.costUsd - b.verdict.costUsd,
  );
  const board =
    entries.length > 1
      ? `<section><h2>Leaderboard</h2><table><thead><tr><th>#</th><th>pack</th><th>score</th><th>qualified</th><th>$/episode</th><th>$/session</th></tr></thead><tbody>${sorted
          .map(
            (e, k) =>
              `<tr><td>${k + 1}</td><td>${esc(e.label)}</td><td>${e.verdict.score.toFixed(4)}</td><td>${e.verdict.qualified ? "yes" : "no"}</td><td>${fmtUsd(sessionCosts(e.verdict).perEpisode)}</td><td>${fmtUsd(sessionCosts(e.verdict).perSession)}</td></tr>`,
          )
          .join("")}</tbody></table></section>`
      : "";
  const p = entries[0]?.verdict.provenance;
  const prov = p
    ? `<footer>${esc(specLabel(entries[0]!.verdict.spec, p.suite))} · price table ${esc(p.priceTableHash.slice(0, 16))}… · LLM ${esc(p.llm.simulated ? "Engy simulator" : p.llm.baseUrl)} · cap ${fmtUsd(p.capUsd)} per episode · an episode is one scenario run, a session one pack over the whole set · ${esc(p.harness.name)} ${esc(p.harness.version)} · generated ${esc(meta.generatedAt ?? new Date().toISOString())}</footer>`
    : "";
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(meta.title ?? "trajrl-validator evaluation")}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#0f172a;padding:0 1rem}
h1{font-size:1.4rem}h2{font-size:1.15rem;margin-top:2rem}h2 small{color:#64748b;font-weight:normal;font-family:ui-monospace,monospace}
table{border-collapse:collapse;margin:.6rem 0;width:100%}th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e2e8f0}
th{background:#f8fafc}.kpi{font-size:1rem}.charts{display:flex;flex-wrap:wrap;gap:1.5rem}figure{margin:0}
figcaption{color:#475569;margin-bottom:.3rem}.lbl,.val,.lgd{font-size:12px;fill:#0f172a}.track{fill:#f1f5f9}
.sw{display:inline-block;width:10px;height:10px;margin-right:6px}footer{color:#64748b;margin-top:2rem;font-size:12px}
</style></head><body>
<h1>${esc(meta.title ?? "Evaluation report")}</h1>
${board}
${entries.map((e) => packSection(e, models, maxCost)).join("\n")}
${prov}
</body></html>
`;
}
