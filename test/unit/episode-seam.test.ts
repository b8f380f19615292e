/**
 * The episode speaks to the container engine through one seam (issue 32, item 2): nothing in
 * src/episode imports dockerode, calls one of src/sandbox's Docker-level helpers or reaches for the
 * sandbox's engine client; and the built-in suite vs registry bench difference is chosen in one
 * place (episode-kind.ts), not branched on elsewhere.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";

const EPISODE = join(dirname(new URL(import.meta.url).pathname), "..", "..", "src", "episode");
const files = readdirSync(EPISODE)
  .filter((f) => f.endsWith(".ts"))
  .map((f) => ({ name: f, text: readFileSync(join(EPISODE, f), "utf8") }));

/** src/sandbox's helpers that drive Docker itself: the episode reaches them through EpisodeEngine. */
const DOCKER_HELPERS = [
  "attachStdin",
  "connectNetwork",
  "createContainer",
  "execIn",
  "getPath",
  "imageIdOf",
  "inspectContainer",
  "layerBytes",
  "pullImage",
  "putFiles",
  "readLogs",
  "removeContainer",
  "startContainer",
  "statPath",
  "stopContainer",
  "waitExit",
  "watchLayer",
];

/** The names a file imports from ../sandbox/index.js (value and type imports). */
function sandboxImports(text: string): string[] {
  const names: string[] = [];
  for (const m of text.matchAll(/import\s+(?:type\s+)?\{([^}]*)\}\s+from\s+"\.\.\/sandbox\/index\.js"/g))
    for (const part of m[1]!.split(",")) {
      const name = part.trim().replace(/^type\s+/, "");
      if (name) names.push(name);
    }
  return names;
}

describe("the episode's seam to the container engine", () => {
  it("reads the files it checks", () => {
    expect(files.map((f) => f.name)).toEqual(
      expect.arrayContaining(["verifier.ts", "bench-verifier.ts", "sidecar.ts", "scenario-check.ts"]),
    );
    expect(sandboxImports('import { type A, b } from "../sandbox/index.js";')).toEqual(["A", "b"]);
  });

  it("no file imports dockerode or a Docker-level helper", () => {
    const found = files.flatMap((f) => [
      ...(/from\s+"dockerode"/.test(f.text) ? [`${f.name}: dockerode`] : []),
      ...sandboxImports(f.text)
        .filter((n) => DOCKER_HELPERS.includes(n))
        .map((n) => `${f.name}: ${n}`),
    ]);
    expect(found).toEqual([]);
  });

  it("no file uses the sandbox's Docker client (its calls' deadline is set by Sandbox.create)", () => {
    const uses = files.flatMap((f) =>
      f.text
        .split("\n")
        .filter((l) => /\.docker\b/.test(l) && !/^\s*(\*|\/\/)/.test(l))
        .map((l) => `${f.name}: ${l.trim()}`),
    );
    expect(uses).toEqual([]);
  });

  it("the kind of episode is asked in one place: where its strategy is chosen", () => {
    const branches = files.flatMap((f) =>
      f.text
        .split("\n")
        .filter((l) => /kind [!=]== "bench"/.test(l))
        .map((l) => `${f.name}: ${l.trim()}`),
    );
    expect(branches).toEqual(['episode-kind.ts: return runtime.kind === "bench"']);
  });
});
