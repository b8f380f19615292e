/**
 * The SDK as one file. Upstream's benchmark places its runtime as ONE file at
 * /policy/sdk/trajrl_policy.py and runs it as a script; ours is written as the package
 * sidecar/trajrl_policy/ (one module per concern) and joined here into sidecar/sdk/trajrl_policy.py,
 * which is what every sidecar runs. The join is pure and deterministic: the package docstring, one
 * merged import block, then each section's body in order. A section imports the sections before it
 * with `from .name import a, b` (dropped here: the bundle is one namespace), so a name defined twice,
 * or imported from a section that comes later, is an error rather than a silent shadowing.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { InfraError } from "../errors.js";
import { SIDECAR_DIR } from "./paths.js";

/** The package's modules, in bundle order (each imports only those before it). */
export const SDK_SECTIONS = ["settings", "transcript", "render", "context", "kinds", "server"] as const;
/** The package the bundle is made of. */
export const SDK_SOURCE_DIR = join(SIDECAR_DIR, "trajrl_policy");

export interface SdkSource {
  /** Module name without ".py" ("__init__" for the package face, whose docstring heads the bundle). */
  name: string;
  text: string;
}

interface ParsedSection {
  name: string;
  doc: string;
  /** Absolute imports, each normalised to one line. */
  imports: string[];
  /** Relative imports: module → names. */
  relative: Map<string, string[]>;
  body: string;
}

function fail(message: string): never {
  throw new InfraError("sdk_bundle_invalid", `SDK bundle: ${message}`, { retryable: false });
}

/** A leading triple-quoted docstring, and what follows it. */
function splitDocstring(name: string, text: string): { doc: string; rest: string } {
  if (!text.startsWith('"""')) fail(`${name}.py must start with a """docstring"""`);
  const end = text.indexOf('"""', 3);
  if (end < 0) fail(`${name}.py: unterminated docstring`);
  return { doc: text.slice(3, end).trim(), rest: text.slice(end + 3) };
}

const IMPORT = /^(?:import|from)\s/;

function parseSection(name: string, text: string): ParsedSection {
  const { doc, rest } = splitDocstring(name, text.replace(/\r\n/g, "\n"));
  const lines = rest.split("\n");
  const imports: string[] = [];
  const relative = new Map<string, string[]>();
  let i = 0;
  for (; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim() === "" || line.startsWith("#")) continue;
    if (!IMPORT.test(line)) break;
    let stmt = line;
    if (line.includes("(") && !line.includes(")")) {
      while (!lines[i]!.includes(")")) {
        i++;
        if (i >= lines.length) fail(`${name}.py: unterminated import`);
        stmt += ` ${lines[i]!.trim()}`;
      }
    }
    stmt = stmt
      .replace(/[()]/g, "")
      .replace(/\s*#.*$/, "")
      .replace(/,\s*$/, "")
      .replace(/\s+/g, " ")
      .trim();
    if (stmt === "from __future__ import annotations") continue;
    const rel = /^from \.(\w+) import (.+)$/.exec(stmt);
    if (rel) {
      const names = rel[2]!.split(",").map((n) => n.trim());
      relative.set(rel[1]!, [...(relative.get(rel[1]!) ?? []), ...names]);
      continue;
    }
    if (stmt.startsWith("from .")) fail(`${name}.py: unsupported relative import: ${stmt}`);
    imports.push(stmt);
  }
  const body = lines.slice(i).join("\n").trim();
  for (const l of body.split("\n"))
    if (IMPORT.test(l)) fail(`${name}.py: a module-level import after the first statement: ${l}`);
  return { name, doc, imports, relative, body };
}

/** Names a body defines at module level (functions, classes, assignments). */
function definedNames(body: string): string[] {
  const out: string[] = [];
  for (const line of body.split("\n")) {
    const def = /^(?:async\s+def|def|class)\s+([A-Za-z_]\w*)/.exec(line);
    if (def) {
      out.push(def[1]!);
      continue;
    }
    const assign = /^([A-Za-z_]\w*)\s*(?::[^=\n]*)?=(?!=)/.exec(line);
    if (assign) out.push(assign[1]!);
  }
  return out;
}

/** Names an absolute import brings into the namespace, each with where it comes from. */
function importedNames(stmt: string): Array<[name: string, source: string]> {
  const from = /^from (\S+) import (.+)$/.exec(stmt);
  const parts = from ? from[2]!.split(",") : stmt.replace(/^import /, "").split(",");
  return parts.map((p) => {
    const t = p.trim();
    const as = / as (\w+)$/.exec(t);
    const name = as ? as[1]! : t.split(".")[0]!;
    return [name, `import of ${from ? `${from[1]}.${t.split(" ")[0]}` : t.split(" ")[0]}`];
  });
}

/** `import a` lines, then `from m import x, y` merged per module; everything sorted. */
function mergeImports(all: readonly string[]): string[] {
  const plain = new Set<string>();
  const from = new Map<string, Set<string>>();
  for (const stmt of all) {
    const m = /^from (\S+) import (.+)$/.exec(stmt);
    if (!m) {
      for (const part of stmt.replace(/^import /, "").split(",")) plain.add(`import ${part.trim()}`);
      continue;
    }
    const names = from.get(m[1]!) ?? new Set<string>();
    for (const n of m[2]!.split(",")) names.add(n.trim());
    from.set(m[1]!, names);
  }
  const byModule = [...from.keys()].sort();
  return [
    ...[...plain].sort(),
    ...byModule.map((mod) => `from ${mod} import ${[...from.get(mod)!].sort().join(", ")}`),
  ];
}

function commentBlock(text: string): string {
  return text
    .split("\n")
    .map((l) => (l.trim() === "" ? "#" : `# ${l}`))
    .join("\n");
}

/**
 * The single file from the package's sources: `sources` holds `__init__` (its docstring heads the file)
 * and every section of SDK_SECTIONS. Throws InfraError `sdk_bundle_invalid` when the sections do not
 * join cleanly (a name defined twice, an import from a later or unknown section, an import mid-module).
 */
export function bundleSdk(sources: readonly SdkSource[]): string {
  const byName = new Map(sources.map((s) => [s.name, s.text]));
  const init = byName.get("__init__");
  if (init === undefined) fail("no __init__ source");
  const { doc } = splitDocstring("__init__", init);
  const sections = SDK_SECTIONS.map((name) => {
    const text = byName.get(name);
    if (text === undefined) fail(`no ${name} source`);
    return parseSection(name, text);
  });
  const owner = new Map<string, string>();
  const claim = (n: string, by: string) => {
    const prior = owner.get(n);
    if (prior !== undefined && prior !== by) fail(`${n} is defined by both ${prior} and ${by}`);
    owner.set(n, by);
  };
  const imports = sections.flatMap((s) => s.imports);
  for (const stmt of new Set(imports)) for (const [n, source] of importedNames(stmt)) claim(n, source);
  sections.forEach((s, idx) => {
    for (const n of definedNames(s.body)) claim(n, `${s.name}.py`);
    for (const [mod, names] of s.relative) {
      const at = SDK_SECTIONS.indexOf(mod as (typeof SDK_SECTIONS)[number]);
      if (at < 0 || at >= idx) fail(`${s.name}.py imports from .${mod}, which is not an earlier section`);
      for (const n of names)
        if (owner.get(n) !== `${mod}.py`)
          fail(`${s.name}.py imports ${n} from .${mod}, which does not define it`);
    }
  });
  const out = [
    "#!/usr/bin/env python3",
    `"""${doc}\n"""`,
    "# Generated from sidecar/trajrl_policy/ by src/policy/sdk-bundle.ts (npm run sdk:bundle): edit those.",
    "from __future__ import annotations",
    "",
    ...mergeImports(imports),
  ];
  for (const s of sections) {
    out.push(
      "",
      "",
      `# ${"-".repeat(96)}`,
      `# ${s.name}`,
      commentBlock(s.doc),
      `# ${"-".repeat(96)}`,
      "",
      s.body,
    );
  }
  return `${out.join("\n")}\n`;
}

/** The package's sources as they are on disk. */
export function readSdkSources(dir = SDK_SOURCE_DIR): SdkSource[] {
  return ["__init__", ...SDK_SECTIONS].map((name) => ({
    name,
    text: readFileSync(join(dir, `${name}.py`), "utf8"),
  }));
}

/** What sidecar/sdk/trajrl_policy.py must contain: the bundle of the package as it is now. */
export function buildSdkSingleFile(dir = SDK_SOURCE_DIR): string {
  return bundleSdk(readSdkSources(dir));
}
