/**
 * The shape of the code base, checked on every run (issue 21): no source file over 500 lines, no
 * import that reaches into another folder past its index.ts, and no import cycle between folders
 * (cli → daemon → evaluation → episode → sandbox/meter → pack/chain, leaf utilities at src/*.ts).
 * Every import counts: value, type-only, re-export and dynamic `import()`.
 *
 * Docs (issue 32): every src folder has a README.md, and the root README's Layout section names
 * every src folder.
 *
 * The checks are pure functions over {path, text} records (test/helpers/architecture.ts); they are
 * tested on small synthetic trees first (so each can fail), then run on src/ and sidecar/.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, posix, relative, sep } from "node:path";
import { describe, expect, it } from "vitest";
import {
  crossFolderEdges,
  deepImports,
  folderCycles,
  foldersMissingFromLayout,
  foldersWithoutReadme,
  layoutSection,
  oversized,
  relativeImports,
  type SourceFile,
} from "../helpers/architecture.js";

const MAX_LINES = 500;
/**
 * Generated files, exempt from the line limit: the single-file policy SDK is bundled from
 * sidecar/trajrl_policy/ by `npm run sdk:bundle` (scripts/sdk-bundle.ts); its parts are checked.
 */
const GENERATED = new Set(["sidecar/sdk/trajrl_policy.py"]);
const CODE = /\.(ts|mts|js|mjs|py|css|html)$/;

// ------------------------------------------------------------------ the repository

const ROOT = join(dirname(new URL(import.meta.url).pathname), "..", "..");

function readTree(dir: string): SourceFile[] {
  const out: SourceFile[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) {
        if (e.name !== "node_modules" && e.name !== "__pycache__" && !e.name.startsWith(".")) walk(p);
      } else if (CODE.test(e.name)) {
        out.push({ path: relative(ROOT, p).split(sep).join("/"), text: readFileSync(p, "utf8") });
      }
    }
  };
  walk(join(ROOT, dir));
  return out;
}

const src = readTree("src").filter((f) => f.path.endsWith(".ts"));

/** Every folder directly under src/, with the names of its entries. */
function srcFolders(): Map<string, string[]> {
  const dirs = readdirSync(join(ROOT, "src"), { withFileTypes: true }).filter((e) => e.isDirectory());
  return new Map(dirs.map((d) => [d.name, readdirSync(join(ROOT, "src", d.name))]));
}

describe("architecture checks (synthetic trees)", () => {
  it("counts lines and honours the exemption", () => {
    const files = [
      { path: "src/a/big.ts", text: "x\n".repeat(501) },
      { path: "src/a/ok.ts", text: "x\n".repeat(500) },
      { path: "gen/big.py", text: "x\n".repeat(900) },
    ];
    expect(oversized(files, 500, new Set(["gen/big.py"]))).toEqual([{ path: "src/a/big.ts", lines: 501 }]);
    expect(oversized(files, 500, new Set()).map((f) => f.path)).toEqual(["src/a/big.ts", "gen/big.py"]);
  });

  it("reads value, type, re-export and dynamic imports", () => {
    const text = [
      'import { a } from "../a/index.js";',
      'import type { B } from "../b/b.js";',
      'export { c } from "./c.js";',
      'export * from "../d/index.js";',
      'const e = await import("../e/e.js");',
      'import "./side-effect.js";',
      'import { f } from "node:fs";',
    ].join("\n");
    expect(relativeImports(text)).toEqual([
      "../a/index.js",
      "../b/b.js",
      "./c.js",
      "../d/index.js",
      "../e/e.js",
      "./side-effect.js",
    ]);
  });

  const tree: SourceFile[] = [
    { path: "src/cli.ts", text: 'import { run } from "./cli/run.js";' },
    { path: "src/log.ts", text: "export const log = 1;" },
    {
      path: "src/cli/run.ts",
      text: 'import { d } from "../daemon/index.js";\nimport { log } from "../log.js";',
    },
    { path: "src/daemon/index.ts", text: 'export * from "./d.js";' },
    { path: "src/daemon/d.ts", text: 'import type { T } from "../store/types.js";' },
    { path: "src/store/index.ts", text: 'export * from "./types.js";' },
    { path: "src/store/types.ts", text: 'import type { D } from "../daemon/index.js";' },
    { path: "src/store/migrations/m1.ts", text: 'import { x } from "../../daemon/index.js";' },
  ];

  it("finds a deep import across folders, not an import through an index or within a folder", () => {
    expect(deepImports(tree).map((e) => `${e.file} -> ${e.target}`)).toEqual([
      "src/daemon/d.ts -> src/store/types.js",
    ]);
  });

  it("finds a cycle between folders, type-only imports included", () => {
    expect(folderCycles(crossFolderEdges(tree))).toEqual([["daemon", "store"]]);
    const acyclic = tree.filter((f) => f.path !== "src/store/types.ts" && !f.path.includes("migrations"));
    expect(folderCycles(crossFolderEdges(acyclic))).toEqual([]);
  });

  it("finds a cycle through a root file", () => {
    const files: SourceFile[] = [
      { path: "src/config.ts", text: 'import { p } from "./pool/index.js";' },
      { path: "src/pool/index.ts", text: 'import { c } from "../config.js";' },
    ];
    expect(folderCycles(crossFolderEdges(files))).toEqual([["pool", "src/config.ts"]]);
  });
});

describe("docs checks (synthetic)", () => {
  it("finds a folder without a README", () => {
    const folders = new Map([
      ["a", ["index.ts", "README.md"]],
      ["b", ["index.ts", "readme.txt"]],
    ]);
    expect(foldersWithoutReadme(folders)).toEqual(["b"]);
  });

  it("reads the Layout section alone and finds the folders it does not name", () => {
    const readme = [
      "# x",
      "src/c/ is named before the section",
      "## Layout",
      "src/a/   one",
      "src/bb/  two",
      "## Next",
      "src/c/ is named after it",
    ].join("\n");
    const layout = layoutSection(readme);
    expect(layout).toContain("src/a/");
    expect(layout).not.toContain("src/c/");
    expect(foldersMissingFromLayout(layout, ["a", "b", "bb", "c"])).toEqual(["b", "c"]);
    expect(layoutSection("# no layout here")).toBe("");
  });
});

describe("architecture of this repository", () => {
  it("reads src/", () => {
    expect(src.length).toBeGreaterThan(100);
    expect(crossFolderEdges(src).length).toBeGreaterThan(100);
  });

  it(`has no source file over ${MAX_LINES} lines in src/ or sidecar/ (generated: ${[...GENERATED].join(", ")})`, () => {
    for (const g of GENERATED) expect(readTree(posix.dirname(g)).some((f) => f.path === g)).toBe(true);
    const files = [...readTree("src"), ...readTree("sidecar")];
    expect(oversized(files, MAX_LINES, GENERATED)).toEqual([]);
  });

  it("imports another folder only through its index.ts", () => {
    expect(deepImports(src).map((e) => `${e.file} -> ${e.target}`)).toEqual([]);
  });

  it("has no import cycle between folders", () => {
    const edges = crossFolderEdges(src);
    const cycles = folderCycles(edges).map((group) =>
      edges
        .filter((e) => group.includes(e.from) && group.includes(e.to))
        .map((e) => `${e.file} -> ${e.target}`)
        .join("; "),
    );
    expect(cycles).toEqual([]);
  });

  it("has a README.md in every src folder", () => {
    const folders = srcFolders();
    expect(folders.size).toBeGreaterThan(10);
    expect(foldersWithoutReadme(folders)).toEqual([]);
  });

  it("names every src folder in the root README's Layout section", () => {
    const layout = layoutSection(readFileSync(join(ROOT, "README.md"), "utf8"));
    expect(layout.length).toBeGreaterThan(0);
    expect(foldersMissingFromLayout(layout, [...srcFolders().keys()])).toEqual([]);
  });
});
