/** The status summary for a terminal (`trajrl-validator status`): the page's content as plain text. Pure. */
import { specLabel } from "../scenarios/index.js";
import { textSpendBar } from "../spend-bar.js";
import type { EngineView } from "../status/index.js";
import { termText } from "../terminal-text.js";
import { ago, duration, score, shortHash, shortKey, usd, weightShares, weightsReasonText } from "./format.js";
import type { StatusSnapshot } from "./snapshot.js";

function table(headers: string[], cells: string[][], right: ReadonlySet<number> = new Set()): string[] {
  const rows = cells.map((r) => r.map(termText));
  const widths = headers.map((h, k) => Math.max(h.length, ...rows.map((r) => (r[k] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((c, k) => (right.has(k) ? c.padStart(widths[k]!) : c.padEnd(widths[k]!)))
      .join("  ")
      .trimEnd();
  return [line(headers), ...rows.map(line)].map((l) => `  ${l}`);
}

/** The pool's engines as table lines (`status`, `engines`). */
export function engineTable(engines: readonly EngineView[], now: number): string[] {
  return table(
    ["engine", "url", "state", "running", "scored/failed", "failures", "images", "runtime", "last error"],
    engines.map((e) => [
      `${e.name}${e.primary ? " (builds)" : ""}`,
      e.url,
      `${e.state}${e.draining ? " · draining" : ""} (${ago(e.since, now)})`,
      `${e.running}/${e.slots ?? "–"}`,
      `${e.episodes.scored}/${e.episodes.failed}`,
      Object.entries(e.failures)
        .map(([code, n]) => `${code} ${n}`)
        .join(", ") || "–",
      `${e.images.present}${e.images.copies ? ` (copied ${e.images.copies})` : ""}`,
      e.runtime?.name ?? "–",
      e.lastError ? `${e.lastError.code}: ${e.lastError.message.slice(0, 80)}` : "–",
    ]),
    new Set([3, 4, 6]),
  );
}

/** The chain and platform state: the epoch, the seated winner, the last weights, the outbox. */
function chainLines(s: StatusSnapshot): string[] {
  const out: string[] = [];
  const e = s.epoch;
  out.push(
    e
      ? `EPOCH        ${e.epochId} · challenger ${shortKey(e.challengerHotkey)} · pack ${shortHash(e.packHash)} · spec ${e.specNumber ?? "–"} · ${e.decision} · seen ${ago(e.seenAt, s.now)}`
      : `EPOCH        ${s.source === "database" ? "unknown (needs the daemon)" : "none seen yet"}`,
  );
  const w = s.winner;
  out.push(
    w
      ? `WINNER       ${w.hotkey ? `${shortKey(w.hotkey)}${w.uid === null ? "" : ` uid ${w.uid}`}` : "empty seat"} · score ${score(w.score)} · pack ${shortHash(w.packHash)} · cache ${w.fresh ? "fresh" : "STALE"} (${ago(w.fetchedAt, s.now)})`
      : "WINNER       none cached",
  );
  const lw = s.weights.last;
  out.push(
    lw
      ? `WEIGHTS      ${lw.outcome}${lw.errorName ? ` (${lw.errorName})` : ""} · ${weightShares(lw.uids, lw.weights)}${lw.includedBlock === null ? "" : ` · block ${lw.includedBlock}`} · ${ago(lw.finishedAt ?? lw.at, s.now)}`
      : "WEIGHTS      no attempt yet",
  );
  if (lw?.reason) out.push(`             ${weightsReasonText(lw.reason)}`);
  const c = s.outbox.counts;
  out.push(
    `OUTBOX       pending ${c.pending ?? 0} · delivered ${c.delivered ?? 0} · abandoned ${c.abandoned ?? 0}`,
  );
  return out;
}

/** The first line (version, network, health, the worst alarm), the note, the health reasons and the alarms. */
function headerLines(s: StatusSnapshot, opts: { note?: string }): string[] {
  const out: string[] = [];
  const health = s.health
    ? s.health.state === "healthy"
      ? "healthy"
      : `${s.health.state.toUpperCase()} (${[...new Set(s.health.reasons.map((r) => r.check))].join(", ")})`
    : "";
  // The worst alarm (errors first, then the oldest: deriveAlarms' order) belongs in the header.
  const worst = s.alarms[0];
  const alarm = worst
    ? `${worst.severity === "error" ? "ALARM" : "alarm"} ${worst.code} (${ago(worst.since, s.now)})${s.alarms.length > 1 ? ` +${s.alarms.length - 1}` : ""}`
    : "";
  out.push(
    [
      `trajrl-validator v${s.version}${s.votesAs ? ` (votes as trajectoryRL ${s.votesAs})` : ""}`,
      `${s.node.network} netuid ${s.node.netuid}`,
      s.node.simulated ? "simulated LLM" : s.node.llmBaseUrl,
      s.startedAt === null ? "" : `up ${duration(s.now - s.startedAt)}`,
      health,
      alarm,
    ]
      .filter(Boolean)
      .join(" · "),
  );
  if (opts.note) out.push(opts.note);
  if (s.health) for (const r of s.health.reasons) out.push(`  ! ${r.check}: ${r.message}`);

  out.push("", s.alarms.length ? "ALARMS" : "ALARMS       none");
  for (const a of s.alarms)
    out.push(`  ${a.severity.padEnd(5)}  ${a.code}  ${a.message}  (since ${ago(a.since, s.now)})`);
  return out;
}

/** The evaluation running now, one row per scenario. */
function runningLines(s: StatusSnapshot): string[] {
  const out: string[] = [];
  const ev = s.evaluation;
  if (ev) {
    const done = ev.scenarios.filter((x) => x.phase === "done" || x.phase === "failed").length;
    out.push(
      `RUNNING      ${ev.label} · ${ev.evaluationId} · ${specLabel(ev.spec, ev.suite)} · ${done}/${ev.scenarios.length} done · spent ${usd(ev.spentUsd)} · ${duration(s.now - ev.startedAt)}`,
    );
    out.push(
      ...table(
        ["scenario", "phase", "try", "elapsed", "spend vs cap", "", "quality"],
        ev.scenarios.map((p) => [
          p.scenario,
          p.failure ? `${p.phase} (${p.failure.code})` : p.phase,
          p.attempt ? String(p.attempt) : "–",
          p.phase === "queued" ? "–" : duration(p.elapsedMs),
          textSpendBar(p.spentUsd, p.capUsd),
          `${usd(p.spentUsd)} / ${usd(p.capUsd)}`,
          p.quality === undefined ? "–" : score(p.quality),
        ]),
        new Set([2, 3, 6]),
      ),
    );
  } else out.push(`RUNNING      ${s.source === "database" ? "unknown (needs the daemon)" : "idle"}`);
  return out;
}

/** The recent verdicts, each with what it was scored on. */
function verdictLines(s: StatusSnapshot): string[] {
  const out: string[] = [];
  out.push("", "RECENT VERDICTS");
  if (s.verdicts.length === 0) out.push("  none yet");
  else
    out.push(
      ...table(
        ["when", "pack", "what", "status", "score", "$/episode", "$/session", "cost by model"],
        s.verdicts.map((v) => [
          ago(v.createdAt, s.now),
          shortHash(v.packHash),
          `${v.label ?? (v.epochId !== null ? `epoch ${v.epochId}` : v.source)} · ${specLabel(v.spec, v.suite)}`,
          v.rejected ? `rejected ${v.rejection?.code ?? ""}`.trim() : v.status,
          v.score === null ? "–" : `${score(v.score)}/${v.scenarios.length}`,
          usd(v.costPerEpisodeUsd),
          usd(v.costUsd),
          Object.entries(v.costByModel)
            .sort(([, a], [, b]) => b - a)
            .slice(0, 3)
            .map(([m, x]) => `${m} ${usd(x)}`)
            .join(", ") || "–",
        ]),
        new Set([4, 5, 6]),
      ),
    );
  return out;
}

/** The daemon's loops, when it has any. */
function loopLines(s: StatusSnapshot): string[] {
  const out: string[] = [];
  if (s.loops.length) {
    out.push("", "LOOPS");
    out.push(
      ...table(
        ["loop", "last ok", "ticks", "failures", "state"],
        s.loops.map((l) => [
          l.name,
          ago(l.lastOkAt, s.now),
          String(l.ticks),
          String(l.failures),
          l.stale
            ? "STALE"
            : l.lastError && (l.lastOkAt ?? 0) < l.lastError.at
              ? `failing: ${l.lastError.code}`
              : "ok",
        ]),
        new Set([2, 3]),
      ),
    );
  }
  return out;
}

/** The meter's counts per model since start. */
function meterLines(s: StatusSnapshot): string[] {
  const out: string[] = [];
  const models = Object.entries(s.counters.meter);
  if (models.length) {
    out.push("", "METER (since start)");
    out.push(
      ...table(
        ["model", "calls", "spend", "clamped", "refused"],
        models.map(([m, t]) => [
          m,
          String(t.calls),
          usd(t.usd),
          String(t.clamps),
          String(t.refusals.cap + t.refusals.allowlist),
        ]),
        new Set([1, 2, 3, 4]),
      ),
    );
  }
  return out;
}

export function renderText(s: StatusSnapshot, opts: { note?: string } = {}): string {
  const out: string[] = [];
  out.push(...headerLines(s, opts));
  out.push("", ...chainLines(s), "", ...runningLines(s));
  const engines = s.engines ?? [];
  if (engines.length > 1 || engines.some((x) => x.state !== "ready" || x.draining || x.slots !== null)) {
    out.push("", "ENGINES");
    out.push(...engineTable(engines, s.now));
  }

  out.push(...verdictLines(s), ...loopLines(s), ...meterLines(s));
  // Text from outside (labels, alarm messages, scenario names) must not drive the terminal: each
  // line is escaped whole (src/terminal-text.ts), a line break inside one included.
  return `${out.map(termText).join("\n")}\n`;
}
