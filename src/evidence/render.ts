/**
 * What `verify` prints for people: per evidence, who signed it, the checks, and one row per
 * scenario (posted, the report's score, re-graded, result); for several evidence of one pack, a
 * comparison scenario by scenario. Pure.
 */
import type { ScenarioResult, ScenarioRow, VerifyReport } from "./verify.js";

const f4 = (x: number | null | undefined) => (x === null || x === undefined ? "–" : x.toFixed(4));

function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => c.padEnd(widths[i]!))
      .join("  ")
      .trimEnd();
  return [line(head), line(widths.map((w) => "─".repeat(w))), ...rows.map(line)].join("\n");
}

const RESULT_LABEL: Record<ScenarioResult, string> = {
  reproduced: "reproduced",
  differs: "DIFFERS",
  not_reproducible: "not reproducible",
  not_graded: "not graded",
  not_checked: "not re-graded",
};

function signerLine(r: VerifyReport): string {
  if (!r.signer) return "unsigned";
  return r.signer.kind === "hotkey"
    ? `signed by ${r.signer.ss58} (the validator's hotkey, as the evidence says)`
    : `signed by ${r.signer.ss58} (a local key: an eval without a wallet; it shows the files are unchanged, not who ran it)`;
}

function whatLine(r: VerifyReport): string {
  const what = r.suite !== null ? `suite ${r.suite}` : `spec ${r.spec}`;
  const ev = r.evaluation;
  const where = ev
    ? `${ev.source === "epoch" ? `epoch ${ev.epoch_id}` : "local"}${ev.id ? ` · evaluation ${ev.id}` : ""}`
    : "";
  return `pack ${r.packHash?.slice(0, 12) ?? "?"} · ${what}${where ? ` · ${where}` : ""}`;
}

export function summaryOf(r: VerifyReport): string {
  const n = (k: ScenarioResult) => r.scenarios.filter((s) => s.result === k).length;
  const failed = r.checks.filter((c) => c.status === "failed").map((c) => c.name);
  const head = r.ok
    ? "OK: every check that could run agrees"
    : `FAILED: ${[...new Set(failed)].join(", ") || "a re-grade differs"}`;
  return `${head} (${n("reproduced")} reproduced, ${n("differs")} differ, ${n("not_reproducible")} not reproducible, ${n("not_graded")} not graded)`;
}

export function renderReport(r: VerifyReport): string {
  const checks = r.checks.map(
    (c) =>
      `  ${c.status === "ok" ? "ok  " : c.status === "failed" ? "FAIL" : "skip"}  ${c.name.padEnd(9)}  ${c.detail}`,
  );
  const rows = r.scenarios.map((s) => [
    s.scenario,
    f4(s.posted),
    f4(s.report),
    s.regraded.length ? s.regraded.map((q) => q.toFixed(4)).join(" ") : "–",
    RESULT_LABEL[s.result],
    s.why,
  ]);
  return [
    `evidence ${r.id ?? "?"}  (${r.source})`,
    signerLine(r),
    whatLine(r),
    ...checks,
    ...(rows.length ? ["", table(["scenario", "posted", "report", "re-graded", "result", "why"], rows)] : []),
    "",
    summaryOf(r),
  ].join("\n");
}

/** Why two validators' scores of one scenario differ, from what each evidence shows. */
function verdictOf(a: ScenarioRow | undefined, b: ScenarioRow | undefined): string {
  if (!a || !b) return "only one evidence has it";
  if (a.posted === b.posted) return "same score";
  const ok = (s: ScenarioRow) => s.result === "reproduced" || s.result === "not_checked";
  if (a.deliverable !== null && a.deliverable === b.deliverable)
    return "same deliverable, different scores: a grader or a validator is wrong";
  if (ok(a) && ok(b)) return "different deliverables, each graded as posted: the agents' runs differed";
  return `${ok(a) ? "B" : "A"}'s score does not reproduce`;
}

/** Several evidence of one pack, scenario by scenario (A, B, … in the order given). */
export function renderComparison(reports: readonly VerifyReport[]): string {
  const labels = reports.map((_, i) => String.fromCharCode(65 + i));
  const names = [...new Set(reports.flatMap((r) => r.scenarios.map((s) => s.scenario)))];
  const rows = names.map((n) => {
    const cells = reports.map((r) => r.scenarios.find((s) => s.scenario === n));
    return [
      n,
      ...cells.flatMap((s) => [
        f4(s?.posted),
        s?.regraded.length ? f4(s.regraded[0]) : "–",
        s?.deliverable?.slice(0, 8) ?? "–",
      ]),
      reports.length === 2 ? verdictOf(cells[0], cells[1]) : "",
    ];
  });
  const head = [
    "scenario",
    ...labels.flatMap((l) => [`${l} posted`, `${l} re-graded`, `${l} deliverable`]),
    reports.length === 2 ? "why they differ" : "",
  ];
  const legend = reports.map((r, i) => `${labels[i]} = ${r.source} (${r.signer?.ss58 ?? "unsigned"})`);
  const packs = new Set(reports.map((r) => r.packHash));
  const note = packs.size > 1 ? ["", "NOTE: these evidence are of different packs"] : [];
  return [
    `comparison of pack ${reports[0]?.packHash?.slice(0, 12) ?? "?"}`,
    ...legend,
    "",
    table(head, rows),
    ...note,
  ].join("\n");
}
