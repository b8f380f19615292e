/**
 * Pure checks of the code base's shape over {path, text} records (test/unit/architecture.test.ts):
 * line counts, imports past a folder's index.ts, import cycles between folders.
 */
import { posix } from "node:path";

export interface SourceFile {
  /** Repository-relative, forward slashes (e.g. "src/pool/pool.ts"). */
  path: string;
  text: string;
}

export interface Edge {
  from: string;
  to: string;
  /** The importing file and the resolved target, both repository-relative. */
  file: string;
  target: string;
}

/** Files over `max` lines (a trailing newline does not count as a line), minus the exempt ones. */
export function oversized(
  files: readonly SourceFile[],
  max: number,
  exempt: ReadonlySet<string>,
): Array<{ path: string; lines: number }> {
  return files
    .filter((f) => !exempt.has(f.path))
    .map((f) => ({ path: f.path, lines: f.text.split("\n").length - (f.text.endsWith("\n") ? 1 : 0) }))
    .filter((f) => f.lines > max);
}

/** Relative module specifiers a TS file imports or re-exports, static or dynamic. */
export function relativeImports(text: string): string[] {
  const out: string[] = [];
  const re = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)["'](\.{1,2}\/[^"']+)["']/g;
  for (const m of text.matchAll(re)) out.push(m[1]!);
  return out;
}

/** The folder of a file under src/ ("pool" for src/pool/x.ts), or null for a file at src/ itself. */
export function folderOf(srcPath: string): string | null {
  const parts = srcPath.split("/");
  return parts.length > 2 ? parts[1]! : null;
}

/** Every import between two different folders of src/ (a root file is a node of its own: "src/x.ts"). */
export function crossFolderEdges(files: readonly SourceFile[]): Edge[] {
  const edges: Edge[] = [];
  for (const f of files) {
    for (const spec of relativeImports(f.text)) {
      const target = posix.normalize(posix.join(posix.dirname(f.path), spec));
      if (!target.startsWith("src/")) continue;
      const from = folderOf(f.path) ?? f.path;
      const to = folderOf(target) ?? target.replace(/\.js$/, ".ts");
      if (from !== to) edges.push({ from, to, file: f.path, target });
    }
  }
  return edges;
}

/**
 * Imports from a file inside a folder of src/ into another folder past that folder's index.ts.
 * (src/cli.ts, the entry point at the root, registers the commands of src/cli/ and is not inside a folder.)
 */
export function deepImports(files: readonly SourceFile[]): Edge[] {
  return crossFolderEdges(files).filter(
    (e) => folderOf(e.file) !== null && folderOf(e.target) !== null && e.target !== `src/${e.to}/index.js`,
  );
}

/** Strongly connected groups of more than one folder (Tarjan), each sorted, in a stable order. */
export function folderCycles(edges: readonly Pick<Edge, "from" | "to">[]): string[][] {
  const adj = new Map<string, Set<string>>();
  for (const e of edges) {
    if (!adj.has(e.from)) adj.set(e.from, new Set());
    if (!adj.has(e.to)) adj.set(e.to, new Set());
    adj.get(e.from)!.add(e.to);
  }
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of adj.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const group: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        group.push(w);
      } while (w !== v);
      if (group.length > 1) groups.push(group.sort());
    }
  };
  for (const v of [...adj.keys()].sort()) if (!index.has(v)) visit(v);
  return groups.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

/** The src folders (by name) whose entries lack a README.md. */
export function foldersWithoutReadme(folders: ReadonlyMap<string, readonly string[]>): string[] {
  return [...folders].filter(([, entries]) => !entries.includes("README.md")).map(([name]) => name);
}

/** The text of a Markdown document's `## Layout` section (up to the next `## ` heading); "" when absent. */
export function layoutSection(readme: string): string {
  const start = readme.search(/^## Layout\s*$/m);
  if (start < 0) return "";
  const rest = readme.slice(start + "## Layout".length);
  const end = rest.search(/^## /m);
  return end < 0 ? rest : rest.slice(0, end);
}

/** The src folders the layout does not name as `src/NAME/`. */
export function foldersMissingFromLayout(layout: string, folders: readonly string[]): string[] {
  return folders.filter((name) => !layout.includes(`src/${name}/`));
}
