/**
 * Human output of evaluations: the live progress view (a redrawn block on a TTY, plain lines otherwise),
 * the end-of-run tables and leaderboard. Pure string building; the caller owns the stream.
 *
 * Money is named for what it covers, here, in the HTML report and on the status page alike: an
 * **episode** is one scenario run for one pack (`$/episode`); a **session** is one pack over a
 * whole spec or suite, as the subnet counts it (`$/session`, the verdict's total).
 */
import { specLabel } from "../scenarios/index.js";
import { textSpendBar } from "../spend-bar.js";
import { termText } from "../terminal-text.js";
import type { EpisodePhase, EvaluationEvent, Verdict } from "./types.js";

const PHASE_LABEL: Record<EpisodePhase, string> = {
  queued: "queued",
  starting: "starting",
  running: "running",
  verifying: "verifying",
  done: "done",
  failed: "failed",
  retrying: "retrying",
};

export const fmtUsd = (usd: number) => (usd < 1 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`);
export const fmtSecs = (ms: number) => `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)}s`;

/** A verdict's cost per session (its total) and per episode (the mean over its scenarios). */
export function sessionCosts(v: Pick<Verdict, "costUsd" | "scenarios">): {
  perSession: number;
  perEpisode: number;
} {
  return { perSession: v.costUsd, perEpisode: v.costUsd / Math.max(1, v.scenarios.length) };
}

function pad(s: string, n: number): string {
  return s.length >= n ? s : s + " ".repeat(n - s.length);
}
function padLeft(s: string, n: number): string {
  return s.length >= n ? s : " ".repeat(n - s.length) + s;
}

/** Fixed-width columns; every cell one line of escaped text (a pack's or a scenario's name comes from outside). */
export function table(headers: string[], cells: string[][], rightAlign: Set<number> = new Set()): string {
  const rows = cells.map((r) => r.map(termText));
  const widths = headers.map((h, k) => Math.max(h.length, ...rows.map((r) => (r[k] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((c, k) => (rightAlign.has(k) ? padLeft(c, widths[k]!) : pad(c, widths[k]!)))
      .join("  ")
      .trimEnd();
  return [line(headers), line(widths.map((w) => "─".repeat(w))), ...rows.map(line)].join("\n");
}

interface Row {
  phase: EpisodePhase;
  attempt: number;
  spentUsd: number;
  capUsd: number;
  elapsedMs: number;
  startedAt?: number;
  quality?: number;
  note?: string;
}

/** Tracks events of one or more evaluations; renders the live block or a plain line per change. */
export class ProgressView {
  private readonly rows = new Map<string, Row>();
  private lastLines = 0;
  private timer: NodeJS.Timeout | undefined;
  private title = "";

  constructor(
    private readonly stream: NodeJS.WritableStream & { isTTY?: boolean; columns?: number },
    private readonly interactive = Boolean(stream.isTTY),
  ) {}

  /** `title`: blank lines to set it apart, then one line that may name a pack (escaped). */
  start(title: string, scenarios: string[]): void {
    const lead = /^\n*/.exec(title)![0];
    this.title = lead + termText(title.slice(lead.length));
    this.rows.clear();
    for (const s of scenarios)
      this.rows.set(s, { phase: "queued", attempt: 0, spentUsd: 0, capUsd: 0, elapsedMs: 0 });
    this.lastLines = 0;
    if (this.interactive) {
      this.draw();
      this.timer = setInterval(() => this.draw(), 500);
      this.timer.unref();
    } else {
      this.stream.write(`${this.title}\n`);
    }
  }

  onEvent(e: EvaluationEvent): void {
    const prev = this.rows.get(e.scenario);
    const row: Row = {
      phase: e.phase,
      attempt: e.attempt,
      spentUsd: e.spentUsd,
      capUsd: e.capUsd,
      elapsedMs: e.elapsedMs,
      ...(e.phase === "starting"
        ? { startedAt: performance.now() - e.elapsedMs }
        : prev?.startedAt !== undefined
          ? { startedAt: prev.startedAt }
          : {}),
      ...(e.quality !== undefined ? { quality: e.quality } : {}),
      ...(e.failure ? { note: `${e.failure.class}:${e.failure.code}` } : {}),
    };
    this.rows.set(e.scenario, row);
    if (this.interactive) this.draw();
    else if (!prev || prev.phase !== e.phase) {
      const q = e.quality !== undefined ? ` quality=${e.quality.toFixed(4)}` : "";
      const f = e.failure ? ` failure=${e.failure.class}:${e.failure.code}` : "";
      this.stream.write(
        `  ${termText(e.scenario)}: ${PHASE_LABEL[e.phase]} (attempt ${e.attempt}, ${fmtSecs(e.elapsedMs)}, ${fmtUsd(e.spentUsd)} of ${fmtUsd(e.capUsd)})${q}${f}\n`,
      );
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (this.interactive) this.draw();
  }

  /** The live block: one line per scenario, redrawn in place. */
  renderBlock(now = performance.now()): string[] {
    const lines = [this.title];
    for (const [name, r] of this.rows) {
      const live = r.phase === "running" || r.phase === "starting" || r.phase === "verifying";
      const elapsed = live && r.startedAt !== undefined ? now - r.startedAt : r.elapsedMs;
      const bar = textSpendBar(r.spentUsd, r.capUsd);
      const q = r.quality !== undefined ? `q=${r.quality.toFixed(2)}` : "";
      const retry = r.attempt > 1 ? ` (try ${r.attempt})` : "";
      lines.push(
        `  ${pad(termText(name), 26)} ${pad(PHASE_LABEL[r.phase] + retry, 18)} ${padLeft(r.phase === "queued" ? "" : fmtSecs(elapsed), 6)}  ${bar} ${padLeft(fmtUsd(r.spentUsd), 8)}  ${q}${r.note ? ` ${r.note}` : ""}`,
      );
    }
    return lines;
  }

  private draw(): void {
    const lines = this.renderBlock();
    const up = this.lastLines > 0 ? `\x1b[${this.lastLines}F` : "";
    this.stream.write(`${up}${lines.map((l) => `\x1b[2K${l}`).join("\n")}\n`);
    this.lastLines = lines.length;
  }
}

export function verdictTable(v: Verdict): string {
  const rows = v.scenarios.map((s) => [
    s.scenario,
    s.quality.toFixed(4),
    `${s.passed}/${s.tests}`,
    fmtUsd(s.costUsd),
    fmtSecs(s.timings.totalMs),
    s.failure ? `${s.failure.class}:${s.failure.code}` : "",
  ]);
  const c = sessionCosts(v);
  const head = `pack ${v.packHash.slice(0, 12)}  ${specLabel(v.spec, v.provenance.suite)}  score ${v.score.toFixed(4)}  qualified ${v.qualified ? "yes" : "no"}  $/session ${fmtUsd(c.perSession)}  $/episode ${fmtUsd(c.perEpisode)}`;
  return `${head}\n${table(["scenario", "quality", "tests", "$/episode", "time", "failure"], rows, new Set([1, 2, 3, 4]))}`;
}

export interface LeaderboardEntry {
  label: string;
  verdict: Verdict;
  /** The verdict's evidence archive (src/evidence), when it was written. */
  evidence?: { id: string; path: string };
}

/** Best score first; ties broken by lower cost. `$/episode` = the mean over its scenarios; `$/session` = the pack's total. */
export function leaderboard(entries: LeaderboardEntry[]): string {
  const sorted = [...entries].sort(
    (a, b) => b.verdict.score - a.verdict.score || a.verdict.costUsd - b.verdict.costUsd,
  );
  const rows = sorted.map((e, k) => {
    const n = Math.max(1, e.verdict.scenarios.length);
    const c = sessionCosts(e.verdict);
    const models = Object.entries(e.verdict.byModel)
      .sort((a, b) => b[1].costUsd - a[1].costUsd)
      .slice(0, 3)
      .map(([m]) => m)
      .join(",");
    return [
      String(k + 1),
      e.label,
      `${e.verdict.score.toFixed(4)} / ${n}`,
      e.verdict.qualified ? "yes" : "no",
      fmtUsd(c.perEpisode),
      fmtUsd(c.perSession),
      models,
    ];
  });
  return table(
    ["#", "pack", "score", "qualified", "$/episode", "$/session", "top models by spend"],
    rows,
    new Set([0, 2, 4, 5]),
  );
}
