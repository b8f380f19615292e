/**
 * What the simulator knows of the project's scenarios: instruction.md (to recognise a task from
 * what the agent read) and solution/*.sh (what a model that "knows how" would run). It never
 * reads tests/.
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { sha256Hex } from "../hash.js";

export interface SimScenario {
  name: string;
  /** instruction.md with whitespace runs collapsed to one space, trimmed. */
  normalised: string;
  /** Stable digest of the normalised instruction (16 hex). */
  digest: string;
  /** Distinctive normalised lines (≥ 12 chars), for matching through line numbers or wrapping. */
  lines: string[];
  /** solution/solve.sh, if present. */
  solve: string | undefined;
  /** solution/partial.sh, if present. */
  partial: string | undefined;
  /** The marker a correct adviser note carries: `hint: <name>/<hintDigest>`. */
  hintDigest: string;
}

export function normaliseText(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

export function makeScenario(
  name: string,
  instruction: string,
  solve?: string,
  partial?: string,
): SimScenario {
  const normalised = normaliseText(instruction);
  const lines = [
    ...new Set(
      instruction
        .split("\n")
        .map(normaliseText)
        .filter((l) => l.length >= 12),
    ),
  ];
  return {
    name,
    normalised,
    digest: sha256Hex(normalised).slice(0, 16),
    lines,
    solve,
    partial,
    hintDigest: sha256Hex(`${name}\n${solve ?? ""}`).slice(0, 12),
  };
}

async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

/** Every `<dir>/<name>/instruction.md` (+ solution/solve.sh, partial.sh). A missing dir → none. */
export async function loadScenarios(dir: string): Promise<SimScenario[]> {
  let names: string[];
  try {
    const entries = await readdir(dir, { withFileTypes: true });
    names = entries
      .filter((e) => e.isDirectory())
      .map((e) => e.name)
      .sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
  const out: SimScenario[] = [];
  for (const name of names) {
    const instruction = await readOptional(join(dir, name, "instruction.md"));
    if (instruction === undefined || normaliseText(instruction) === "") continue;
    out.push(
      makeScenario(
        name,
        instruction,
        await readOptional(join(dir, name, "solution", "solve.sh")),
        await readOptional(join(dir, name, "solution", "partial.sh")),
      ),
    );
  }
  return out;
}

/** Texts to search in one message: the content itself and, when it is JSON, its string values. */
function candidateTexts(content: string): string[] {
  const out = [content];
  const t = content.trimStart();
  if (t.startsWith("{") || t.startsWith("[") || t.startsWith('"')) {
    try {
      const strings: string[] = [];
      const walk = (v: unknown): void => {
        if (typeof v === "string") strings.push(v);
        else if (Array.isArray(v)) v.forEach(walk);
        else if (v && typeof v === "object") Object.values(v).forEach(walk);
      };
      walk(JSON.parse(content));
      if (strings.length) out.push(strings.join("\n"));
    } catch {
      // not JSON: the raw text is all there is
    }
  }
  return out;
}

/** Does one normalised view of a message show this scenario's instruction? Whole text, or ≥ 80 % of its distinctive lines. */
function viewShows(norm: string, s: SimScenario): boolean {
  if (norm.includes(s.normalised)) return true;
  if (s.lines.length === 0 || !norm.includes(s.lines[0]!)) return false;
  let hit = 0;
  for (const l of s.lines) if (norm.includes(l)) hit++;
  return hit >= Math.ceil(0.8 * s.lines.length);
}

export function showsInstruction(text: string, s: SimScenario): boolean {
  return candidateTexts(text).some((c) => viewShows(normaliseText(c), s));
}

/** The first scenario whose instruction appears in one of the texts (tool results, user messages). */
export function recogniseScenario(
  texts: readonly string[],
  scenarios: readonly SimScenario[],
): SimScenario | undefined {
  if (scenarios.length === 0) return undefined;
  for (const text of texts) {
    if (text.length < 12) continue;
    // Normalise each view once, then try every scenario on it.
    for (const view of candidateTexts(text).map(normaliseText))
      for (const s of scenarios) if (viewShows(view, s)) return s;
  }
  return undefined;
}
