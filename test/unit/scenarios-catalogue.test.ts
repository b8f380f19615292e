import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  type Catalogue,
  deliverablePathProblem,
  digestOf,
  formatScenarioTable,
  loadCatalogue,
  parseSuites,
  parseTaskToml,
  resolveSuite,
  selectScenarios,
  specLabel,
  suitesOf,
  UnknownSuiteError,
} from "../../src/scenarios/index.js";

const TASK = `version = "1.0"

[metadata]
difficulty = "easy"
category = "demo"
null_floor = 0.25

[metadata.cheat_floors]
empty = 0.25

[agent]
timeout_sec = 120

[verifier]
timeout_sec = 60
agent_output_path = "/app/out.py"
`;

function errorOf(fn: () => unknown): Error & { code?: string } {
  try {
    fn();
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error("expected an error");
}

describe("parseTaskToml", () => {
  it("parses a full task.toml, keeping snake_case names", () => {
    const t = parseTaskToml(TASK, "task.toml");
    expect(t.agent.timeout_sec).toBe(120);
    expect(t.verifier).toEqual({ timeout_sec: 60, agent_output_path: "/app/out.py", report: "harness" });
    expect(t.metadata).toEqual({
      difficulty: "easy",
      category: "demo",
      tags: [],
      null_floor: 0.25,
      cheat_floors: { empty: 0.25 },
      tests: undefined,
    });
    expect(t.version).toBe("1.0");
  });

  it("defaults agent 600 s and verifier 300 s; tolerates Harbor's extra keys", () => {
    const t = parseTaskToml(
      `[metadata]\ndifficulty = "hard"\ncategory = "x"\nnull_floor = 0\nauthor_email = "a@b"\n` +
        `[verifier]\nagent_output_path = "/app/a"\n[environment]\ncpus = 2\n`,
      "t.toml",
    );
    expect(t.agent.timeout_sec).toBe(600);
    expect(t.verifier.timeout_sec).toBe(300);
  });

  it("reads the declared test count and the report channel; refuses what is neither", () => {
    const base = `[metadata]\ndifficulty = "easy"\ncategory = "x"\nnull_floor = 0\n`;
    const t = parseTaskToml(
      `${base}tests = 6\n[verifier]\nagent_output_path = "/app/a"\nreport = "files"\n`,
      "t.toml",
    );
    expect(t.metadata.tests).toBe(6);
    expect(t.verifier.report).toBe("files");
    const e = errorOf(() =>
      parseTaskToml(
        `${base}tests = 0\n[verifier]\nagent_output_path = "/app/a"\nreport = "stdout"\n`,
        "t.toml",
      ),
    );
    expect(e.message).toContain("metadata.tests: must be positive");
    expect(e.message).toContain("verifier.report");
  });

  it("names the file and every bad field in one error", () => {
    const e = errorOf(() =>
      parseTaskToml(
        `[metadata]\ndifficulty = "impossible"\ncategory = "x"\n[agent]\ntimeout_sec = 900\n[verifier]\ntimeout_sec = 0\n`,
        "/s/demo/task.toml",
      ),
    );
    expect(e.code).toBe("scenario_invalid");
    expect(e.message).toMatch(/^\/s\/demo\/task\.toml: /);
    for (const field of [
      "metadata.difficulty",
      "metadata.null_floor: required",
      "agent.timeout_sec: must be at most 600",
      "verifier.timeout_sec: must be positive",
      "verifier.agent_output_path: required",
    ])
      expect(e.message).toContain(field);
  });

  it("rejects deliverable paths that are relative, directories or inside the grader's files", () => {
    for (const [path, why] of [
      ["app/out.py", "absolute"],
      ["/app/", "directory"],
      ["/", "directory"],
      ["/app/../etc/x", "'..'"],
      ["/app/./x", "'.'"],
      ["/app//x", "normalised"],
      ["/tests/grade.py", "verifier"],
      ["/logs/verifier/ctrf.json", "verifier"],
    ] as const) {
      const e = errorOf(() =>
        parseTaskToml(TASK.replace('"/app/out.py"', JSON.stringify(path)), "task.toml"),
      );
      expect(e.message, path).toContain("verifier.agent_output_path");
      expect(e.message, path).toContain(why);
    }
  });

  it("reports TOML syntax errors with the file name", () => {
    const e = errorOf(() => parseTaskToml("[metadata\n", "/x/task.toml"));
    expect(e.code).toBe("scenario_invalid");
    expect(e.message).toMatch(/^\/x\/task\.toml: not valid TOML/);
  });

  it("null floors and cheat floors are fractions", () => {
    expect(
      errorOf(() => parseTaskToml(TASK.replace("null_floor = 0.25", "null_floor = 1.5"), "t")).message,
    ).toContain("metadata.null_floor: must be in [0, 1]");
    expect(errorOf(() => parseTaskToml(TASK.replace("empty = 0.25", "empty = -1"), "t")).message).toContain(
      "metadata.cheat_floors.empty",
    );
  });
});

describe("deliverablePathProblem", () => {
  it("accepts every normalised absolute file path outside /tests and /logs", () => {
    const segment = fc
      .stringMatching(/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,12}$/)
      .filter((s) => s !== "." && s !== "..");
    fc.assert(
      fc.property(fc.array(segment, { minLength: 1, maxLength: 5 }), (segs) => {
        const p = `/${segs.join("/")}`;
        const inside = segs[0] === "tests" || segs[0] === "logs";
        expect(deliverablePathProblem(p) === undefined).toBe(!inside);
      }),
    );
  });
});

describe("parseSuites", () => {
  const known = new Set(["a", "b", "c"]);
  it("maps suite names to scenario names in order; the default is listed first", () => {
    const s = parseSuites(
      '{"default": "full", "suites": {"quick": ["b"], "full": ["c", "a"]}}',
      "suites.json",
      known,
    );
    expect(s.default).toBe("full");
    expect(s.suites.get("full")).toEqual(["c", "a"]);
    expect(s.suites.get("quick")).toEqual(["b"]);
    expect(suitesOf(s, "b")).toEqual(["quick"]);
    expect(suitesOf(s, "a")).toEqual(["full"]);
  });

  it("rejects numbers as names (a spec number is the subnet's), the reserved name, unknown names, an undefined default, duplicates and empty suites", () => {
    const cases: [string, RegExp][] = [
      ['{"default": "27", "suites": {"27": ["a"]}}', /suites\.27: .*spec number belongs to the subnet/],
      ['{"default": 27, "suites": {"x": ["a"]}}', /default: /],
      [
        '{"default": "x", "suites": {"x": ["a"], "Quick": ["b"]}}',
        /suites\.Quick: a suite name is a lowercase word/,
      ],
      ['{"default": "x", "suites": {"x": ["a"], "custom": ["b"]}}', /"custom" is reserved/],
      ['{"default": "x", "suites": {"x": ["a", "zzz"]}}', /suites\.x: unknown scenario zzz/],
      ['{"default": "y", "suites": {"x": ["a"]}}', /default: suite "y" is not defined/],
      ['{"default": "x", "suites": {"x": ["a", "a"]}}', /listed twice/],
      ['{"default": "x", "suites": {"x": []}}', /at least one scenario/],
      ['{"default": 1, "specs": {"1": ["a"]}}', /suites: /],
      ["{not json", /not JSON/],
    ];
    for (const [text, want] of cases) {
      const e = errorOf(() => parseSuites(text, "/s/suites.json", known));
      expect(e.code, text).toBe("suites_invalid");
      expect(e.message, text).toMatch(/^\/s\/suites\.json: /);
      expect(e.message, text).toMatch(want);
    }
  });

  it("labels a verdict by its suite when it has one, else by its subnet spec", () => {
    expect(specLabel(0, "quick")).toBe("suite quick");
    expect(specLabel(27, undefined)).toBe("spec 27");
    expect(specLabel(27, null)).toBe("spec 27");
  });
});

describe("digestOf", () => {
  const e = (path: string, sha = "a".repeat(64), executable = false) =>
    ({ path, kind: "file", executable, sha256: sha }) as const;
  it("does not depend on listing order but on paths, contents and the execute bit", () => {
    const base = digestOf([e("tests/a"), e("environment/Dockerfile")]);
    expect(digestOf([e("environment/Dockerfile"), e("tests/a")])).toBe(base);
    expect(digestOf([e("tests/a", "b".repeat(64)), e("environment/Dockerfile")])).not.toBe(base);
    expect(digestOf([e("tests/a", undefined, true), e("environment/Dockerfile")])).not.toBe(base);
    expect(digestOf([e("tests/b"), e("environment/Dockerfile")])).not.toBe(base);
    expect(base).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe("loadCatalogue", () => {
  let root: string;

  async function scenario(name: string, opts: { solve?: boolean; task?: string; skip?: string } = {}) {
    const d = join(root, name);
    const files: Record<string, string> = {
      "task.toml": opts.task ?? TASK,
      "instruction.md": `Write /app/out.py for ${name}.\n`,
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a Dockerfile line, not a template
      "environment/Dockerfile": "ARG AGENT_BASE=trajrl/agent-base:latest\nFROM ${AGENT_BASE}\n",
      "tests/test.sh": "#!/usr/bin/env bash\necho grading\n",
      "DESIGN.md": "null floor 0.25\n",
    };
    if (opts.solve !== false) {
      files["solution/solve.sh"] = "echo solved > /app/out.py\n";
      files["solution/partial.sh"] = "echo half > /app/out.py\n";
    }
    for (const [rel, text] of Object.entries(files)) {
      if (rel === opts.skip) continue;
      await mkdir(join(d, rel, ".."), { recursive: true });
      await writeFile(join(d, rel), text);
    }
    return d;
  }

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), "trajrl-scenarios-"));
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  async function twoScenarios(): Promise<Catalogue> {
    await scenario("zeta");
    await scenario("alpha", { solve: false });
    await mkdir(join(root, "_harness"));
    await writeFile(join(root, "_harness", "notes.txt"), "shared tooling, not a scenario\n");
    await writeFile(join(root, "README.md"), "# scenarios\n");
    await writeFile(
      join(root, "suites.json"),
      '{"default": "both", "suites": {"both": ["zeta", "alpha"], "one": ["alpha"]}}',
    );
    return loadCatalogue(root);
  }

  it("loads every scenario folder in name order, skipping _ and . folders and plain files", async () => {
    const cat = await twoScenarios();
    expect(cat.map((s) => s.name)).toEqual(["alpha", "zeta"]);
    expect(cat.dir).toBe(root);
    const zeta = cat.byName("zeta")!;
    expect(zeta.dir).toBe(join(root, "zeta"));
    expect(zeta.instruction).toBe("Write /app/out.py for zeta.\n");
    expect(zeta.task.verifier.agent_output_path).toBe("/app/out.py");
    expect(zeta.paths.dockerfile).toBe(join(root, "zeta", "environment", "Dockerfile"));
    expect(zeta.paths.testScript).toBe(join(root, "zeta", "tests", "test.sh"));
    expect(zeta.paths.solveScript).toBe(join(root, "zeta", "solution", "solve.sh"));
    expect(zeta.paths.partialScript).toBe(join(root, "zeta", "solution", "partial.sh"));
    expect(zeta.paths.design).toBe(join(root, "zeta", "DESIGN.md"));
    expect(cat.byName("alpha")!.paths.solveScript).toBeNull();
    expect(cat.byName("nope")).toBeUndefined();
  });

  it("resolves suites in the suite's order; undefined means the default", async () => {
    const cat = await twoScenarios();
    expect(resolveSuite(cat, undefined)).toMatchObject({ suite: "both" });
    expect(resolveSuite(cat, "both").scenarios.map((s) => s.name)).toEqual(["zeta", "alpha"]);
    expect(resolveSuite(cat, "one").scenarios.map((s) => s.name)).toEqual(["alpha"]);
  });

  it("an unknown suite is a typed input error naming the known ones", async () => {
    const cat = await twoScenarios();
    const e = errorOf(() => resolveSuite(cat, "27"));
    expect(e).toBeInstanceOf(UnknownSuiteError);
    expect(e.code).toBe("unknown_suite");
    expect((e as UnknownSuiteError).known).toEqual(["both", "one"]);
    expect(e.message).toBe('no suite "27" in suites.json (known: both, one)');
  });

  it("selects scenarios by name and rejects unknown names", async () => {
    const cat = await twoScenarios();
    expect(selectScenarios(cat, []).map((s) => s.name)).toEqual(["alpha", "zeta"]);
    expect(selectScenarios(cat, ["zeta", "alpha", "zeta"]).map((s) => s.name)).toEqual(["zeta", "alpha"]);
    const e = errorOf(() => selectScenarios(cat, ["zeta", "omega"]));
    expect(e.code).toBe("unknown_scenario");
    expect(e.message).toContain("omega");
  });

  it("the digest follows environment/, tests/ and task.toml, not the instruction or solution", async () => {
    await scenario("one");
    await writeFile(join(root, "suites.json"), '{"default": "all", "suites": {"all": ["one"]}}');
    const d0 = (await loadCatalogue(root))[0]!.digest;
    expect(d0).toMatch(/^[0-9a-f]{64}$/);
    await writeFile(join(root, "one", "instruction.md"), "Reworded.\n");
    await writeFile(join(root, "one", "solution", "solve.sh"), "echo other > /app/out.py\n");
    await mkdir(join(root, "one", "tests", "__pycache__"));
    await writeFile(join(root, "one", "tests", "__pycache__", "grade.cpython-311.pyc"), "bytecode");
    expect((await loadCatalogue(root))[0]!.digest).toBe(d0);
    await writeFile(join(root, "one", "tests", "test.sh"), "#!/usr/bin/env bash\necho stricter\n");
    const d1 = (await loadCatalogue(root))[0]!.digest;
    expect(d1).not.toBe(d0);
    await chmod(join(root, "one", "tests", "test.sh"), 0o755);
    const d2 = (await loadCatalogue(root))[0]!.digest;
    expect(d2).not.toBe(d1);
    await writeFile(join(root, "one", "environment", "data.txt"), "input\n");
    expect((await loadCatalogue(root))[0]!.digest).not.toBe(d2);
  });

  it("a missing required file is an error naming it", async () => {
    for (const [skip, what] of [
      ["tests/test.sh", "grader"],
      ["environment/Dockerfile", "image"],
      ["instruction.md", "what the agent is told"],
      ["task.toml", "task definition"],
    ] as const) {
      await rm(root, { recursive: true, force: true });
      await mkdir(root);
      await scenario("broken", { skip });
      await writeFile(join(root, "suites.json"), '{"default": "all", "suites": {"all": ["broken"]}}');
      const err = await loadCatalogue(root).then(
        () => undefined,
        (e: Error & { code?: string }) => e,
      );
      expect(err?.code, skip).toBe("scenario_invalid");
      expect(err?.message, skip).toContain(join(root, "broken", skip));
      expect(err?.message, skip).toContain(what);
    }
  });

  it("a bad task.toml fails the whole catalogue with the file and field", async () => {
    await scenario("bad", {
      task: TASK.replace('agent_output_path = "/app/out.py"', 'agent_output_path = "out"'),
    });
    await writeFile(join(root, "suites.json"), '{"default": "all", "suites": {"all": ["bad"]}}');
    await expect(loadCatalogue(root)).rejects.toThrow(
      `${join(root, "bad", "task.toml")}: verifier.agent_output_path: must be an absolute path`,
    );
  });

  it("rejects folder names that cannot name an image, a missing suites.json and a missing directory", async () => {
    await scenario("Bad_Name");
    await writeFile(join(root, "suites.json"), '{"default": "all", "suites": {"all": ["Bad_Name"]}}');
    await expect(loadCatalogue(root)).rejects.toThrow(/folder name must be lowercase/);
    await rm(join(root, "Bad_Name"), { recursive: true });
    await scenario("fine");
    await rm(join(root, "suites.json"));
    await expect(loadCatalogue(root)).rejects.toThrow(/suites\.json: missing/);
    await expect(loadCatalogue(join(root, "nowhere"))).rejects.toMatchObject({
      code: "scenarios_dir_unreadable",
    });
  });

  it("formats the list table with timeouts, deliverable, null floor and suites", async () => {
    const cat = await twoScenarios();
    const lines = formatScenarioTable(cat).split("\n");
    expect(lines[0]).toMatch(
      /^NAME\s+CATEGORY\s+DIFFICULTY\s+AGENT\s+VERIFIER\s+DELIVERABLE\s+NULL FLOOR\s+SUITES$/,
    );
    expect(lines[1]).toMatch(/^alpha\s+demo\s+easy\s+120s\s+60s\s+\/app\/out\.py\s+0\.2500\s+both,one$/);
    expect(lines[2]).toMatch(/^zeta\s+.*\s+both$/);
    expect(lines.at(-1)).toBe("2 scenarios; suites: both (2) default, one (1)");
  });

  it("escapes what a scenario's task.toml says in the list table (issue 36 item 9)", async () => {
    // A TOML \u escape: the category holds ESC ] 0 ; … BEL (the window title), a screen clear and a line break.
    const task = TASK.replace('category = "demo"', 'category = "d\\u001b]0;pwned\\u0007\\u001b[2J\\nfake"');
    await scenario("alpha", { task });
    await writeFile(join(root, "suites.json"), '{"default": "one", "suites": {"one": ["alpha"]}}');
    const table = formatScenarioTable(await loadCatalogue(root));
    expect(table).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    expect(table).toContain("d\\u001b]0;pwned\\u0007\\u001b[2J\\nfake");
    expect(table.split("\n")).toHaveLength(4); // the header, one row, a blank line, the summary
  });
});
