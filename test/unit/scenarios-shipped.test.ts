/**
 * Every shipped scenario keeps the contract that `scenarios check` and episodes rely on, checked
 * without Docker: it parses, has every file, its image context cannot leak the solution or the
 * tests, and its grader is the shared harness. (The Docker proof is `scenarios check`.)
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { PUBLISHED_SPECS } from "../../src/bench/index.js";
import {
  type Catalogue,
  loadCatalogue,
  MAX_AGENT_TIMEOUT_SEC,
  MAX_VERIFIER_TIMEOUT_SEC,
} from "../../src/scenarios/index.js";

const ROOT = new URL("../../scenarios/", import.meta.url).pathname;
const HARNESS = join(ROOT, "_harness");

function walk(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...walk(p));
    else out.push(p);
  }
  return out;
}

/** Distinctive lines (long enough not to be boilerplate) of the files under `dir`. */
function distinctiveLines(dir: string): Set<string> {
  const lines = new Set<string>();
  for (const f of walk(dir)) {
    for (const l of readFileSync(f, "utf8").split("\n")) {
      const t = l.trim();
      if (t.length >= 40 && !t.startsWith("#!")) lines.add(t);
    }
  }
  return lines;
}

let catalogue: Catalogue;
beforeAll(async () => {
  catalogue = await loadCatalogue(ROOT);
});

describe("the shipped catalogue", () => {
  it("has at least 10 scenarios in named sets, never spec numbers: `builtin` is all of them and the default, `quick` three", () => {
    expect(catalogue.length).toBeGreaterThanOrEqual(10);
    expect(catalogue.suites.default).toBe("builtin");
    expect([...catalogue.suites.suites.keys()].sort()).toEqual(["builtin", "quick"]);
    expect([...catalogue.suites.suites.get("builtin")!].sort()).toEqual(catalogue.map((s) => s.name));
    expect(catalogue.suites.suites.get("quick")).toEqual([
      "binary-flag-hunt",
      "access-log-regex",
      "git-lost-commit-recovery",
    ]);
    // No subnet spec can name one of them: the subnet's scenarios are trajrl-bench's.
    for (const [, spec] of PUBLISHED_SPECS.specs)
      for (const s of catalogue) expect(spec.scenarios, s.name).not.toContain(s.name);
  });

  it("the harness copies in every tests/ folder are identical to scenarios/_harness", () => {
    const harness = readFileSync(join(HARNESS, "harness.py"), "utf8");
    const testSh = readFileSync(join(HARNESS, "test.sh"), "utf8");
    for (const s of catalogue) {
      expect(readFileSync(join(s.paths.tests, "harness.py"), "utf8"), s.name).toBe(harness);
      expect(readFileSync(s.paths.testScript, "utf8"), s.name).toBe(testSh);
    }
  });

  it("no scenario file is one that .gitignore would drop", () => {
    for (const f of walk(ROOT))
      expect(f, f).not.toMatch(/\.(log|sqlite|sqlite-wal|sqlite-shm|pyc)$|__pycache__/);
  });
});

describe.each(
  readdirSync(ROOT).filter(
    (n) => !n.startsWith("_") && !n.startsWith(".") && statSync(join(ROOT, n)).isDirectory(),
  ),
)("scenario %s", (name) => {
  const s = () => catalogue.byName(name)!;

  it("parses, within the protocol's timeouts, with a recorded null floor and cheat floors", () => {
    expect(s(), name).toBeDefined();
    const t = s().task;
    expect(t.agent.timeout_sec).toBeLessThanOrEqual(MAX_AGENT_TIMEOUT_SEC);
    expect(t.verifier.timeout_sec).toBeLessThanOrEqual(MAX_VERIFIER_TIMEOUT_SEC);
    // scenarios check compares at 4 decimals: the recorded floor must be exactly that precise.
    expect(Math.round(t.metadata.null_floor * 1e4) / 1e4).toBe(t.metadata.null_floor);
    expect(Object.keys(t.metadata.cheat_floors).length).toBeGreaterThanOrEqual(2);
    expect(t.metadata.cheat_floors.empty_script ?? t.metadata.cheat_floors.empty_file).toBe(
      t.metadata.null_floor,
    );
  });

  it("has the reference solution, a partial solution, a grader and a design note", () => {
    const p = s().paths;
    expect(p.solveScript).not.toBeNull();
    expect(p.partialScript).not.toBeNull();
    expect(p.design).not.toBeNull();
    for (const f of ["grade.py", "harness.py", "test.sh"])
      expect(statSync(join(p.tests, f)).isFile()).toBe(true);
    const design = readFileSync(p.design!, "utf8").toLowerCase();
    expect(design).toContain("null floor");
    expect(design).toContain("cheat");
  });

  it("instruction, solutions and grader agree on the one deliverable path", () => {
    const out = s().task.verifier.agent_output_path;
    expect(s().instruction).toContain(out);
    expect(readFileSync(s().paths.solveScript!, "utf8")).toContain(`cat > ${out} <<'EOF'`);
    expect(readFileSync(s().paths.partialScript!, "utf8")).toContain(`cat > ${out} <<'EOF'`);
    expect(readFileSync(join(s().paths.tests, "grade.py"), "utf8")).toContain(`DELIVERABLE = "${out}"`);
  });

  it("declares the harness channel and exactly as many tests as its grader registers", () => {
    const t = s().task;
    expect(t.verifier.report).toBe("harness");
    const grader = readFileSync(join(s().paths.tests, "grade.py"), "utf8");
    const registered = grader.match(/^@G\.test\(/gm)?.length ?? 0;
    expect(registered).toBeGreaterThanOrEqual(3);
    expect(t.metadata.tests).toBe(registered);
  });

  it("its grader never hands git a repository the deliverable touched with git's own trust switches", () => {
    // Rule 1 of "Graders never let root act on what the deliverable controls" (scenarios/README.md):
    // what can be checked without Docker. `scenarios check`'s hostile probe checks the rest.
    for (const f of walk(s().paths.tests).filter((x) => x.endsWith(".py"))) {
      const text = readFileSync(f, "utf8");
      expect(text, f).not.toMatch(/safe\.directory/);
      if (/\bgit\b/.test(text) && /subprocess/.test(text) && !f.endsWith("harness.py"))
        for (const k of ["GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL", "core.hooksPath", "core.fsmonitor"])
          expect(text, `${f} runs git without ${k}`).toContain(k);
    }
  });

  it("builds FROM the agent base passed as AGENT_BASE", () => {
    const lines = readFileSync(s().paths.dockerfile, "utf8")
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith("#"));
    expect(lines[0]).toBe("ARG AGENT_BASE=trajrl/agent-base:latest");
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a Dockerfile line, not a template
    expect(lines[1]).toBe("FROM ${AGENT_BASE}");
    expect(lines.filter((l) => l.startsWith("FROM "))).toHaveLength(1);
  });

  it("never puts the solution or the tests into the image context", () => {
    const env = s().paths.environment;
    const files = walk(env).map((f) => relative(env, f));
    for (const f of files)
      expect(f).not.toMatch(/(^|\/)(solution|tests)(\/|$)|solve\.sh$|partial\.sh$|grade\.py$|test\.sh$/);
    const dockerfile = readFileSync(s().paths.dockerfile, "utf8");
    expect(dockerfile).not.toMatch(/\b(solution|tests)\//);
    // Not one distinctive line of the reference or partial solution in anything the image sees.
    const secret = distinctiveLines(s().paths.solution);
    const graderFiles = new Set(walk(s().paths.tests).map((f) => readFileSync(f, "latin1")));
    for (const f of walk(env)) {
      const text = readFileSync(f, "latin1");
      expect(graderFiles.has(text), `${f} is a copy of a grader file`).toBe(false);
      for (const line of text.split("\n"))
        expect(secret.has(line.trim()), `${f}: ${line.trim()}`).toBe(false);
    }
  });
});
