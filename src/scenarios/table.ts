/** The `scenarios list` table: pure formatting of a catalogue. */
import type { Catalogue, Scenario } from "./catalogue.js";
import { specNumbers, specsOf } from "./specs.js";

export interface ScenarioRow {
  name: string;
  category: string;
  difficulty: string;
  agent_timeout_sec: number;
  verifier_timeout_sec: number;
  deliverable: string;
  null_floor: number;
  specs: number[];
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
    specs: specsOf(catalogue.specs, s.name),
    digest: s.digest,
  }));
}

/** Fixed-width columns; the last line summarises the spec sets. */
export function formatScenarioTable(catalogue: Catalogue, only?: readonly Scenario[]): string {
  const header = [
    "NAME",
    "CATEGORY",
    "DIFFICULTY",
    "AGENT",
    "VERIFIER",
    "DELIVERABLE",
    "NULL FLOOR",
    "SPECS",
  ];
  const rows = scenarioRows(catalogue, only).map((r) => [
    r.name,
    r.category,
    r.difficulty,
    `${r.agent_timeout_sec}s`,
    `${r.verifier_timeout_sec}s`,
    r.deliverable,
    r.null_floor.toFixed(4),
    r.specs.join(",") || "-",
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  const specs = specNumbers(catalogue.specs)
    .map(
      (n) =>
        `${n} (${catalogue.specs.specs.get(n)!.length})${n === catalogue.specs.default ? " default" : ""}`,
    )
    .join(", ");
  return [line(header), ...rows.map(line), "", `${rows.length} scenarios; specs: ${specs}`].join("\n");
}
