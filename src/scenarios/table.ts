/** The `scenarios list` table: pure formatting of a catalogue. */
import { termText } from "../terminal-text.js";
import type { Catalogue, Scenario } from "./catalogue.js";
import { suiteNames, suitesOf } from "./suites.js";

export interface ScenarioRow {
  name: string;
  category: string;
  difficulty: string;
  agent_timeout_sec: number;
  verifier_timeout_sec: number;
  deliverable: string;
  null_floor: number;
  suites: string[];
  digest: string;
}

export function scenarioRows(catalogue: Catalogue, only?: readonly Scenario[]): ScenarioRow[] {
  return (only ?? catalogue).map((s) => ({
    name: s.name,
    category: s.task.metadata.category,
    difficulty: s.task.metadata.difficulty,
    agent_timeout_sec: s.task.agent.timeout_sec,
    verifier_timeout_sec: s.task.verifier.timeout_sec,
    deliverable: s.task.verifier.agent_output_path,
    null_floor: s.task.metadata.null_floor,
    suites: suitesOf(catalogue.suites, s.name),
    digest: s.digest,
  }));
}

/** Fixed-width columns; the last line summarises the suites. */
export function formatScenarioTable(catalogue: Catalogue, only?: readonly Scenario[]): string {
  const header = [
    "NAME",
    "CATEGORY",
    "DIFFICULTY",
    "AGENT",
    "VERIFIER",
    "DELIVERABLE",
    "NULL FLOOR",
    "SUITES",
  ];
  // A bench's scenarios come from its registry: every cell one line of escaped text.
  const rows = scenarioRows(catalogue, only).map((r) =>
    [
      r.name,
      r.category,
      r.difficulty,
      `${r.agent_timeout_sec}s`,
      `${r.verifier_timeout_sec}s`,
      r.deliverable,
      r.null_floor.toFixed(4),
      r.suites.join(",") || "-",
    ].map(termText),
  );
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  const suites = suiteNames(catalogue.suites)
    .map(
      (n) =>
        `${n} (${catalogue.suites.suites.get(n)!.length})${n === catalogue.suites.default ? " default" : ""}`,
    )
    .join(", ");
  return [line(header), ...rows.map(line), "", `${rows.length} scenarios; suites: ${suites}`].join("\n");
}
