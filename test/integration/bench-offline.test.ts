/**
 * The offline trajrl-bench in upstream's image contract, on the real engine and a real registry on
 * loopback (Debian's docker-registry, scripts/registry-up.sh): `bench build --push` for two
 * scenarios, the local copies removed, then everything used the way upstream's validator uses it
 * (trajectoryrl/utils/sandbox_harness.py): the base pulled again and probed with throw-away
 * containers (entrypoint empty, 2 GB, 1 CPU, JSON on stdout), a scenario image pulled by the
 * probe's image_repo and the bench tag, `hermes chat` + `hermes sessions export` run by upstream's
 * bash wrapper as hermes against a scripted model of this test, and upstream's deadline kill
 * (`pkill -KILL hermes`) that must end the chat and leave the wrapper to export the session.
 *
 * Network: the registry and the scripted model are on this machine (loopback, and the gateway of
 * this test's own internal network); containers get that network or none.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type Docker from "dockerode";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { AGENT_VERSION } from "../../agent/contract.js";
import { type BenchBuildResult, OfflineBench } from "../../src/bench/index.js";
import { execIn, getPath, packTar, putFiles, readLogs } from "../../src/sandbox/index.js";
import { loadCatalogue, type Scenario } from "../../src/scenarios/index.js";
import { VERSION } from "../../src/version.js";
import { runCli } from "../helpers/cli.js";
import { requireDocker } from "../helpers/docker.js";
import { REGISTRY } from "../helpers/registry.js";
import { type ScriptedModel, startScriptedModel } from "../helpers/scripted-model.js";

const ROOT = resolve(import.meta.dirname, "../..");
const RUN = randomBytes(4).toString("hex");
// A fixed namespace keeps the base's content hash (it names the scenario images) the same from run
// to run, so the build cache holds; each run pushes its own tag.
const NAMESPACE = "trajrl-bench-test";
const TARGET = `${REGISTRY}/${NAMESPACE}`;
const TAG = `t${RUN}`;
const SCENARIOS = ["access-log-regex", "binary-flag-hunt"];
// Not "trajrl.*": the sandbox reaper of concurrent tests must not mistake these for its own.
const LABELS = { "org.trajrl.test": "bench-offline" };
const TOKEN = `ep-${randomBytes(12).toString("hex")}`;
const GiB = 1024 ** 3;

// sandbox_harness.py `_run_episode`: the prompt and the wrapper, verbatim in effect.
const UPSTREAM_PROMPT =
  "Read /workspace/SKILL.md for your approach. Read /workspace/INSTRUCTION.md for the task. " +
  "The task's working directory is /app/. /app and /workspace/learned are writable scratch; " +
  "everything else is read-only. Solve the task. Do not modify SKILL.md.";
const shellQuote = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;
const WRAPPER =
  "set +e; " +
  `hermes chat -q ${shellQuote(UPSTREAM_PROMPT)} -m auto -t terminal,file,code_execution,memory --quiet --yolo; ` +
  "chat_rc=$?; " +
  "hermes sessions export /workspace/turns.jsonl 2>/workspace/turns_export.err; " +
  "export_rc=$?; " +
  'echo "export_rc=$export_rc" >> /workspace/turns_export.err; ' +
  "exit $chat_rc";
const POST_MORTEM =
  "hermes sessions export /workspace/turns.jsonl 2>>/workspace/turns_export.err; " +
  'echo "export_rc=$? path=post_mortem" >>/workspace/turns_export.err';

// What the probes must answer (upstream's contract; strict: nothing else).
const ScenariosProbe = z
  .object({
    version: z.string(),
    scenarios: z.array(z.string()),
    harness_name: z.string(),
    harness_version: z.string(),
  })
  .strict();
const ScenarioInfoProbe = z
  .object({
    version: z.string(),
    name: z.string(),
    image_repo: z.string(),
    instruction_md: z.string(),
    agent_output_path: z.string(),
    verifier_timeout_s: z.number().int(),
    agent_timeout_s: z.number().int(),
    tests_files_b64: z.record(z.string(), z.string()),
  })
  .strict();

let docker: Docker;
let built: BenchBuildResult;
let catalogue: Awaited<ReturnType<typeof loadCatalogue>>;
const goneAfterRemoval: Record<string, boolean> = {};
let netName: string;
let network: Docker.Network;
let gateway: string;
const containers: Docker.Container[] = [];
const models: ScriptedModel[] = [];
/** References this run made or pulled, removed at the end (children last in, first out). */
const localRefs: string[] = [];

async function pull(ref: string): Promise<void> {
  localRefs.push(ref);
  const stream = (await docker.pull(ref, { authconfig: {} })) as NodeJS.ReadableStream;
  const events = await new Promise<Array<{ error?: string }>>((ok, fail) =>
    docker.modem.followProgress(stream, (err, res) =>
      err ? fail(err) : ok(res as Array<{ error?: string }>),
    ),
  );
  const failed = events.find((e) => e.error);
  if (failed) throw new Error(`pull ${ref}: ${failed.error}`);
}

/** A pulled image back under its build-cache tag (the same id: the next build reuses it). */
async function recache(img: { ref: string; cacheRef: string }): Promise<void> {
  const [repo, tag] = img.cacheRef.split(":") as [string, string];
  await docker.getImage(img.ref).tag({ repo, tag });
}

async function present(ref: string): Promise<boolean> {
  try {
    await docker.getImage(ref).inspect();
    return true;
  } catch {
    return false;
  }
}

/** A throw-away container of `image` as upstream's `_docker_run_json` runs one: entrypoint empty, 2 GB, 1 CPU. */
async function probe(
  image: string,
  cmd: string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  const c = await docker.createContainer({
    Image: image,
    Entrypoint: [],
    Cmd: cmd,
    Labels: LABELS,
    HostConfig: { NetworkMode: "none", Memory: 2 * GiB, CpuQuota: 100_000 },
  });
  containers.push(c);
  await c.start();
  const { StatusCode } = (await c.wait()) as { StatusCode: number };
  const logs = await readLogs(c);
  await c.remove({ force: true });
  return { code: StatusCode, stdout: logs.stdout, stderr: logs.stderr };
}

/** A scenario container as upstream's `_run_episode` starts and prepares one, on this test's network. */
async function scenarioContainer(image: string, baseUrl: string): Promise<Docker.Container> {
  const c = await docker.createContainer({
    Image: image,
    Env: [`LLM_API_KEY=${TOKEN}`, `LLM_BASE_URL=${baseUrl}`, "LLM_MODEL=auto"],
    Labels: LABELS,
    HostConfig: { NetworkMode: netName, Memory: 4 * GiB, CpuQuota: 200_000 },
  });
  containers.push(c);
  await c.start();
  for (let i = 0; ; i++) {
    const r = await execIn(c, ["sh", "-c", "test -d /app && test -d /workspace"]).catch(() => undefined);
    if (r?.exitCode === 0) break;
    if (i > 60) throw new Error("scenario container did not come up");
    await new Promise((ok) => setTimeout(ok, 250));
  }
  await putFiles(c, "/workspace", [
    { name: "SKILL.md", data: Buffer.from("# Skill\nVerify before you stop.\n"), mode: 0o644 },
    { name: "INSTRUCTION.md", data: Buffer.from("Write /app/logstats.py.\n"), mode: 0o644 },
  ]);
  for (const cmd of [
    ["chown", "root:hermes", "/workspace/SKILL.md", "/workspace/INSTRUCTION.md"],
    ["chmod", "440", "/workspace/SKILL.md", "/workspace/INSTRUCTION.md"],
    ["mkdir", "-p", "/workspace/learned"],
    ["chown", "-R", "hermes:hermes", "/workspace/learned"],
    ["sh", "-c", "mkdir -p /opt/data && chown -R hermes:hermes /opt/data"],
  ])
    expect((await execIn(c, cmd)).exitCode, cmd.join(" ")).toBe(0);
  return c;
}

function runWrapper(c: Docker.Container) {
  return execIn(c, ["bash", "-c", WRAPPER], {
    user: "hermes",
    workingDir: "/workspace",
    env: {
      OPENROUTER_API_KEY: TOKEN,
      OPENAI_API_KEY: TOKEN,
      ANTHROPIC_API_KEY: TOKEN,
      HERMES_BUNDLED_SKILLS: "/nonexistent",
      HOME: "/opt/data",
    },
  });
}

async function catFile(c: Docker.Container, path: string): Promise<string> {
  const r = await execIn(c, ["cat", path]);
  expect(r.exitCode, `cat ${path}: ${r.stderr}`).toBe(0);
  return r.stdout;
}

/** upstream `_last_session_obj`. */
function lastSessionObj(blob: string): Record<string, unknown> | undefined {
  let last: Record<string, unknown> | undefined;
  for (const line of blob.split("\n")) {
    if (!line.trim()) continue;
    try {
      const v = JSON.parse(line);
      if (v && typeof v === "object" && !Array.isArray(v)) last = v;
    } catch {
      // skipped, as upstream does
    }
  }
  return last;
}

const scenario = (name: string): Scenario => catalogue.byName(name)!;

beforeAll(async () => {
  docker = await requireDocker();
  execFileSync("bash", [join(ROOT, "scripts/registry-up.sh")], { cwd: ROOT, stdio: "inherit" });
  catalogue = await loadCatalogue(join(ROOT, "scenarios"));
  const bench = new OfflineBench(docker, {
    repoRoot: ROOT,
    progress: (l) => process.stderr.write(`[bench-offline] ${l}\n`),
  });
  built = await bench.build({ target: TARGET, tag: TAG, scenarios: SCENARIOS, push: true });

  // The local copies go (scenario images first: they are the base's children), build cache tags
  // too, so whatever runs below comes from the registry.
  for (const img of [...built.scenarios, built.base])
    for (const ref of [img.ref, img.cacheRef]) await docker.getImage(ref).remove();
  for (const img of [...built.scenarios, built.base]) goneAfterRemoval[img.ref] = !(await present(img.ref));
  await pull(built.base.ref);
  await recache(built.base);

  netName = `bench-offline-test-${RUN}`;
  network = await docker.createNetwork({
    Name: netName,
    Internal: true,
    Labels: LABELS,
    CheckDuplicate: true,
  });
  const gw = (await network.inspect()).IPAM?.Config?.[0]?.Gateway;
  if (!gw) throw new Error(`network ${netName} has no gateway`);
  gateway = gw;
}, 1_200_000);

afterAll(async () => {
  await Promise.all(containers.map((c) => c.remove({ force: true, v: true }).catch(() => undefined)));
  await network?.remove().catch(() => undefined);
  for (const m of models) await m.close();
  // This run's references go; the images pulled back stay as the next run's build cache.
  for (const ref of localRefs.reverse())
    await docker
      .getImage(ref)
      .remove()
      .catch(() => undefined);
}, 120_000);

describe("bench build --push (real registry on loopback)", () => {
  it("pushes the base and one image per scenario; the registry serves each under its digest", async () => {
    expect(built.base.ref).toBe(`${TARGET}/sandbox-agent:${TAG}`);
    expect(built.scenarios.map((s) => s.ref)).toEqual(SCENARIOS.map((n) => `${TARGET}/scenario-${n}:${TAG}`));
    for (const img of [built.base, ...built.scenarios]) {
      expect(img.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
      const repo = img.ref.slice(REGISTRY.length + 1, img.ref.lastIndexOf(":"));
      const r = await request(`http://${REGISTRY}/v2/${repo}/manifests/${TAG}`, {
        method: "HEAD",
        headers: { accept: "application/vnd.docker.distribution.manifest.v2+json" },
      });
      await r.body.dump();
      expect(r.statusCode).toBe(200);
      expect(r.headers["docker-content-digest"]).toBe(img.digest);
    }
  });

  it("pulls the base back from the registry after the local copies were removed", async () => {
    expect(goneAfterRemoval).toEqual(
      Object.fromEntries([built.base, ...built.scenarios].map((i) => [i.ref, true])),
    );
    const info = await docker.getImage(built.base.ref).inspect();
    expect(info.RepoDigests).toContain(`${TARGET}/sandbox-agent@${built.base.digest}`);
    // The same image, bit for bit: the engine's id is the digest of its configuration.
    expect(info.Id).toBe(built.base.id);
    expect(info.Config.Entrypoint).toEqual(["/entrypoint.sh"]);
    expect(info.Config.Cmd).toEqual(["tail", "-f", "/dev/null"]);
  });

  it("can run the policy sidecar the way upstream starts it from this image (gosu hermes, the venv's python)", async () => {
    const r = await probe(built.base.ref, [
      "bash",
      "-c",
      "mkdir -p /policy && chown -R hermes:hermes /policy && cd /policy && " +
        "exec gosu hermes /opt/hermes/.venv/bin/python -c " +
        "'import os, aiohttp, httpx; print(os.getuid(), os.getcwd(), os.environ[\"HOME\"])'",
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe("10000 /policy /opt/data");
  });
});

describe("the probes (throw-away containers of the pulled base)", () => {
  it("`scenarios` lists the bench's scenarios, its version and the harness identity", async () => {
    const r = await probe(built.base.ref, ["python", "-m", "trajrl_bench.cli", "scenarios"]);
    expect(r.code, r.stderr).toBe(0);
    const p = ScenariosProbe.parse(JSON.parse(r.stdout));
    expect(p).toEqual({
      version: VERSION,
      scenarios: [...SCENARIOS].sort(),
      harness_name: "trajrl-agent",
      harness_version: AGENT_VERSION,
    });
  });

  it("`scenario-info` gives the instruction, deliverable, timeouts, image repo and every hidden test file", async () => {
    for (const name of SCENARIOS) {
      const s = scenario(name);
      const r = await probe(built.base.ref, [
        "python",
        "-m",
        "trajrl_bench.cli",
        "scenario-info",
        "--scenario",
        name,
      ]);
      expect(r.code, r.stderr).toBe(0);
      const p = ScenarioInfoProbe.parse(JSON.parse(r.stdout));
      expect(p).toMatchObject({
        version: VERSION,
        name,
        image_repo: `${TARGET}/scenario-${name}`,
        instruction_md: readFileSync(s.paths.instruction, "utf8"),
        agent_output_path: s.task.verifier.agent_output_path,
        verifier_timeout_s: s.task.verifier.timeout_sec,
        agent_timeout_s: s.task.agent.timeout_sec,
      });
      const files = readdirSync(s.paths.tests, { withFileTypes: true }).filter((e) => e.isFile());
      expect(Object.keys(p.tests_files_b64).sort()).toEqual(files.map((f) => f.name).sort());
      for (const f of files)
        expect(
          Buffer.from(p.tests_files_b64[f.name]!, "base64").equals(readFileSync(join(s.paths.tests, f.name))),
        ).toBe(true);
    }
  });

  it("an unknown scenario is a message on stderr and exit 1, and nothing on stdout", async () => {
    for (const name of ["no-such-scenario", "../../etc", "."]) {
      const r = await probe(built.base.ref, [
        "python",
        "-m",
        "trajrl_bench.cli",
        "scenario-info",
        "--scenario",
        name,
      ]);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe("");
      expect(r.stderr).toContain(`unknown scenario: ${name}`);
    }
  });
});

describe("a scenario image pulled from the registry", () => {
  let image: string;

  beforeAll(async () => {
    const r = await probe(built.base.ref, [
      "python",
      "-m",
      "trajrl_bench.cli",
      "scenario-info",
      "--scenario",
      "access-log-regex",
    ]);
    // upstream `_scenario_image_ref`: image_repo + ":" + the bench ref's tag.
    image = `${ScenarioInfoProbe.parse(JSON.parse(r.stdout)).image_repo}:${TAG}`;
    await pull(image);
    await recache(built.scenarios.find((s) => s.name === "access-log-regex")!);
  }, 300_000);

  it("is the pushed image, holds the scenario's /app, and keeps the scenario tree root-only", async () => {
    const info = await docker.getImage(image).inspect();
    const pushed = built.scenarios.find((s) => s.name === "access-log-regex")!;
    expect(info.RepoDigests).toContain(`${TARGET}/scenario-access-log-regex@${pushed.digest}`);
    const samples = readdirSync(join(scenario("access-log-regex").paths.environment, "samples")).sort();
    const ls = await probe(image, [
      "bash",
      "-c",
      "cd /app/samples && ls -1A | sort && stat -c %U:%G /app/samples",
    ]);
    expect(ls.code, ls.stderr).toBe(0);
    expect(ls.stdout.trim().split("\n")).toEqual([...samples, "hermes:hermes"]);
    const asHermes = await probe(image, [
      "gosu",
      "hermes",
      "cat",
      "/opt/trajrl-bench/scenarios/access-log-regex/tests/test.sh",
    ]);
    expect(asHermes.code).not.toBe(0);
    expect(asHermes.stderr).toMatch(/Permission denied/);
    const asRoot = await probe(image, ["cat", "/opt/trajrl-bench/scenarios/access-log-regex/tests/test.sh"]);
    expect(asRoot.stdout).toBe(readFileSync(scenario("access-log-regex").paths.testScript, "utf8"));
  });

  it("answers `hermes --version` with our agent's name in Hermes' first-line format", async () => {
    const r = await probe(image, ["gosu", "hermes", "hermes", "--version"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split("\n")[0]).toMatch(
      new RegExp(`^trajrl-agent v${AGENT_VERSION.replace(/\./g, "\\.")} \\(hermes-compatible; node v18\\.`),
    );
  });

  it("runs `hermes chat` as upstream does, then `hermes sessions export` writes the session in Hermes' format", async () => {
    const model = await startScriptedModel(
      [
        { toolCalls: [{ id: "c1", name: "read_file", arguments: '{"path": "/workspace/SKILL.md"}' }] },
        {
          toolCalls: [
            {
              id: "c2",
              name: "terminal",
              arguments: JSON.stringify({
                command:
                  "printf 'print(1)\\n' > /app/logstats.py; id -un; pwd; env | grep -c API_KEY; echo x >> /workspace/SKILL.md",
              }),
            },
          ],
        },
        { content: "Wrote /app/logstats.py." },
      ],
      { host: gateway },
    );
    models.push(model);
    const c = await scenarioContainer(image, model.url);
    const r = await runWrapper(c);
    expect(r.exitCode, r.stderr).toBe(0);
    // The transcript on stdout, as upstream keeps it (testee_transcript.txt).
    expect(r.stdout).toContain("→ terminal");
    expect(r.stdout).toContain("Wrote /app/logstats.py.");

    expect(model.requests).toHaveLength(3);
    for (const q of model.requests) {
      expect(q.headers.authorization).toBe(`Bearer ${TOKEN}`);
      expect(q.body.model).toBe("auto");
    }
    expect(model.requests[0]!.body.messages[1]).toEqual({ role: "user", content: UPSTREAM_PROMPT });
    const results = model.requests[2]!.body.messages.filter((m) => m.role === "tool").map((m) => m.content);
    expect(results[0]).toContain("Verify before you stop.");
    // Works in /app as hermes, sees no key, cannot change SKILL.md.
    expect(results[1]).toMatch(/^hermes\n\/app\n0\n.*Permission denied/s);

    expect(await catFile(c, "/app/logstats.py")).toBe("print(1)\n");
    expect(await catFile(c, "/workspace/turns_export.err")).toBe("export_rc=0\n");
    const blob = await catFile(c, "/workspace/turns.jsonl");
    expect(blob.trimEnd().split("\n")).toHaveLength(1);
    const s = lastSessionObj(blob) as {
      tool_call_count: number;
      end_reason: string;
      messages: Array<{
        role: string;
        content: string | null;
        tool_calls: unknown;
        finish_reason: string | null;
      }>;
    };
    expect(s).toMatchObject({ source: "cli", model: "auto", end_reason: "completed", tool_call_count: 2 });
    expect(s.messages.map((m) => [m.role, m.finish_reason])).toEqual([
      ["user", null],
      ["assistant", "tool_calls"],
      ["tool", null],
      ["assistant", "tool_calls"],
      ["tool", null],
      ["assistant", "stop"],
    ]);
    expect(s.messages[1]!.tool_calls).toEqual([
      {
        id: "c1",
        type: "function",
        function: { name: "read_file", arguments: '{"path": "/workspace/SKILL.md"}' },
      },
    ]);
  });

  it("upstream's deadline kill (`pkill -KILL hermes`) ends the chat; the wrapper survives and exports it", async () => {
    const model = await startScriptedModel(
      [
        { toolCalls: [{ id: "k1", name: "terminal", arguments: '{"command": "echo first turn"}' }] },
        { hang: true },
      ],
      { host: gateway },
    );
    models.push(model);
    const c = await scenarioContainer(image, model.url);
    const wrapper = runWrapper(c);
    // The second request arrives only after the first turn was stored.
    for (let i = 0; model.requests.length < 2; i++) {
      if (i > 200) throw new Error("hermes never sent its second request");
      await new Promise((ok) => setTimeout(ok, 100));
    }
    const ps = await execIn(c, ["ps", "-eo", "user:12,comm,args"]);
    const chatLines = ps.stdout
      .split("\n")
      .filter((l) => /\shermes\s+\/usr\/bin\/node .*hermes chat/.test(l));
    expect(chatLines, ps.stdout).toHaveLength(1);
    expect(chatLines[0]).toMatch(/^hermes\s/);
    expect(ps.stdout).toMatch(/\sbash\s+bash -c set \+e; hermes chat/);

    const kill = await execIn(c, ["pkill", "-KILL", "hermes"]);
    expect(kill.exitCode).toBe(0);
    const done = await wrapper;
    // The wrapper exits with the chat's status: killed by SIGKILL.
    expect(done.exitCode).toBe(137);
    expect(await catFile(c, "/workspace/turns_export.err")).toBe("export_rc=0\n");
    const blob = await catFile(c, "/workspace/turns.jsonl");
    const s = lastSessionObj(blob) as {
      ended_at: unknown;
      end_reason: unknown;
      tool_call_count: number;
      messages: Array<{ role: string; content: string | null }>;
    };
    expect(s).toMatchObject({ ended_at: null, end_reason: null, tool_call_count: 1 });
    expect(s.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool"]);
    expect(s.messages[2]!.content).toBe("first turn\n[exit code: 0]");
    expect((await execIn(c, ["pgrep", "-x", "hermes"])).exitCode).toBe(1);

    // upstream `_post_mortem_export`: as hermes in /workspace with no HOME given — the same session.
    const pm = await execIn(c, ["bash", "-c", POST_MORTEM], { user: "hermes", workingDir: "/workspace" });
    expect(pm.exitCode).toBe(0);
    expect(await catFile(c, "/workspace/turns.jsonl")).toBe(blob);
    expect(await catFile(c, "/workspace/turns_export.err")).toBe(
      "export_rc=0\nexport_rc=0 path=post_mortem\n",
    );
  });
});

describe("a bench someone else builds FROM the base, with a scenario tree of its own", () => {
  // Their scenario, in the Harbor shape; their image names via the documented ENV override.
  const THEIRS = `${REGISTRY}/trajrl-bench-test-thirdparty`;
  const TASK_TOML =
    '[agent]\ntimeout_sec = 60\n\n[verifier]\ntimeout_sec = 30\nagent_output_path = "/app/answer.txt"\n';
  const INSTRUCTION = "Write the number in /app/data/n.txt plus one to /app/answer.txt.\n";
  const TEST_SH = [
    "#!/bin/bash",
    "mkdir -p /logs/verifier",
    'got="$(cat /app/answer.txt 2>/dev/null | tr -d "[:space:]")"',
    "p=0",
    "[ -s /app/answer.txt ] && p=$((p+1))",
    '[ "$got" = "$(cat /tests/expected.txt)" ] && p=$((p+1))',
    'printf \'{"results":{"summary":{"tests":2,"passed":%d,"failed":%d}}}\\n\' "$p" "$((2-p))" > /logs/verifier/ctrf.json',
    '[ "$p" = 2 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt',
    "",
  ].join("\n");
  const ENV_DOCKERFILE =
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a Dockerfile's build argument
    "ARG AGENT_BASE\nFROM ${AGENT_BASE}\nRUN mkdir -p /app/data && echo 41 > /app/data/n.txt && chown -R hermes:hermes /app\n";
  let theirBase: string;
  let info: z.infer<typeof ScenarioInfoProbe>;

  async function buildImage(
    tag: string,
    files: Record<string, string>,
    buildargs: Record<string, string> = {},
  ) {
    const tar = await packTar(Object.entries(files).map(([name, data]) => ({ name, data, mode: 0o644 })));
    const stream = await docker.buildImage(tar as unknown as NodeJS.ReadableStream, {
      t: tag,
      buildargs,
      labels: LABELS,
      pull: false,
      rm: true,
      forcerm: true,
    });
    const events = await new Promise<Array<{ error?: string }>>((ok, fail) =>
      docker.modem.followProgress(stream, (err, res) =>
        err ? fail(err) : ok(res as Array<{ error?: string }>),
      ),
    );
    const failed = events.find((e) => e.error);
    if (failed) throw new Error(`build ${tag}: ${failed.error}`);
    localRefs.push(tag);
  }

  async function pushImage(ref: string): Promise<void> {
    const bench = new OfflineBench(docker, { repoRoot: ROOT });
    await bench.push(ref);
  }

  /** Upstream's verifier: a fresh container of the scenario image, test.sh at /, the rest in /tests. */
  async function verify(
    image: string,
    deliverable: Buffer | undefined,
  ): Promise<{ reward: string; ctrf: unknown }> {
    const c = await docker.createContainer({
      Image: image,
      Cmd: ["bash", "-c", "mkdir -p /logs/verifier && bash /test.sh"],
      Labels: LABELS,
      HostConfig: { NetworkMode: "none" },
    });
    containers.push(c);
    const files = info.tests_files_b64;
    await putFiles(c, "/", [
      { name: "test.sh", data: Buffer.from(files["test.sh"]!, "base64"), mode: 0o755 },
    ]);
    await putFiles(
      c,
      "/",
      Object.entries(files)
        .filter(([n]) => n !== "test.sh")
        .map(([n, b]) => ({ name: `tests/${n}`, data: Buffer.from(b, "base64"), mode: 0o644 })),
    );
    if (deliverable) await putFiles(c, "/app", [{ name: "answer.txt", data: deliverable, mode: 0o755 }]);
    await c.start();
    await c.wait();
    const reward = (await fileOf(c, "/logs/verifier/reward.txt")).trim();
    const ctrf = JSON.parse(await fileOf(c, "/logs/verifier/ctrf.json"));
    await c.remove({ force: true });
    return { reward, ctrf };
  }

  /** A file of a stopped container (the verifier has exited), through the archive API. */
  async function fileOf(c: Docker.Container, path: string): Promise<string> {
    const got = await getPath(c, path, 1024 * 1024);
    if (got.kind !== "file") throw new Error(`${path}: ${got.kind}`);
    return got.data.toString("utf8");
  }

  beforeAll(async () => {
    theirBase = `${THEIRS}/sandbox-agent:${TAG}`;
    await buildImage(theirBase, {
      Dockerfile: `FROM ${built.base.ref}\nENV TRAJRL_SCENARIO_IMAGE_PREFIX=${THEIRS}/scenario-\nCOPY scenarios/ /opt/trajrl-bench/scenarios/\nRUN chown -R root:root /opt/trajrl-bench && chmod -R 0700 /opt/trajrl-bench\n`,
      "scenarios/add-one/task.toml": TASK_TOML,
      "scenarios/add-one/instruction.md": INSTRUCTION,
      "scenarios/add-one/tests/test.sh": TEST_SH,
      "scenarios/add-one/tests/expected.txt": "42\n",
      "scenarios/add-one/environment/Dockerfile": ENV_DOCKERFILE,
    });
    await buildImage(
      `${THEIRS}/scenario-add-one:${TAG}`,
      { Dockerfile: ENV_DOCKERFILE },
      { AGENT_BASE: theirBase },
    );
    await pushImage(`${THEIRS}/scenario-add-one:${TAG}`);
    await pushImage(theirBase);
    await docker.getImage(`${THEIRS}/scenario-add-one:${TAG}`).remove();
    await docker.getImage(theirBase).remove();
    await pull(theirBase);
  }, 300_000);

  it("probes list their scenario beside ours and describe it from their tree", async () => {
    const list = ScenariosProbe.parse(
      JSON.parse((await probe(theirBase, ["python", "-m", "trajrl_bench.cli", "scenarios"])).stdout),
    );
    expect(list.scenarios).toEqual(["access-log-regex", "add-one", "binary-flag-hunt"]);
    const r = await probe(theirBase, [
      "python",
      "-m",
      "trajrl_bench.cli",
      "scenario-info",
      "--scenario",
      "add-one",
    ]);
    expect(r.code, r.stderr).toBe(0);
    info = ScenarioInfoProbe.parse(JSON.parse(r.stdout));
    expect(info).toMatchObject({
      name: "add-one",
      image_repo: `${THEIRS}/scenario-add-one`,
      instruction_md: INSTRUCTION,
      agent_output_path: "/app/answer.txt",
      verifier_timeout_s: 30,
      agent_timeout_s: 60,
    });
    expect(Object.keys(info.tests_files_b64).sort()).toEqual(["expected.txt", "test.sh"]);
  });

  it("runs the agent in their scenario image and is scored by their own tests", async () => {
    const image = `${info.image_repo}:${TAG}`;
    await pull(image);
    const model = await startScriptedModel(
      [
        { toolCalls: [{ id: "a1", name: "read_file", arguments: '{"path": "/workspace/INSTRUCTION.md"}' }] },
        {
          toolCalls: [
            {
              id: "a2",
              name: "terminal",
              arguments: '{"command": "echo $(( $(cat /app/data/n.txt) + 1 )) > /app/answer.txt"}',
            },
          ],
        },
        { content: "42 written." },
      ],
      { host: gateway },
    );
    models.push(model);
    const c = await scenarioContainer(image, model.url);
    expect((await runWrapper(c)).exitCode).toBe(0);
    const deliverable = Buffer.from(await catFile(c, info.agent_output_path));
    expect(deliverable.toString()).toBe("42\n");
    expect(await verify(image, deliverable)).toEqual({
      reward: "1",
      ctrf: { results: { summary: { tests: 2, passed: 2, failed: 0 } } },
    });
    // The tests decide: a wrong answer and no answer score what the tests say.
    expect((await verify(image, Buffer.from("41\n"))).ctrf).toEqual({
      results: { summary: { tests: 2, passed: 1, failed: 1 } },
    });
    expect(await verify(image, undefined)).toEqual({
      reward: "0",
      ctrf: { results: { summary: { tests: 2, passed: 0, failed: 2 } } },
    });
  });
});

describe("trajrl-validator bench build (the command)", () => {
  it("rebuilds nothing that is cached, pushes the same digests under a new tag, and prints the summary", async () => {
    const tag = `cli${RUN}`;
    const r = await runCli(
      ["bench", "build", "--push", TARGET, "--tag", tag, "--scenarios", SCENARIOS.join(","), "--json"],
      { env: { LOG_LEVEL: "warn" }, timeoutMs: 600_000 },
    );
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout) as BenchBuildResult;
    for (const img of [summary.base, ...summary.scenarios]) localRefs.push(img.ref);
    expect(summary).toMatchObject({ tag, pushed: true, version: VERSION });
    // The base came back from the registry under its cache tag: reused as is, same manifest.
    expect(summary.base).toMatchObject({
      ref: `${TARGET}/sandbox-agent:${tag}`,
      built: false,
      id: built.base.id,
      digest: built.base.digest,
    });
    const access = summary.scenarios.find((s) => s.name === "access-log-regex")!;
    expect(access).toMatchObject({ built: false, digest: built.scenarios[0]!.digest });
    expect(summary.scenarios.map((s) => s.ref)).toEqual(
      SCENARIOS.map((n) => `${TARGET}/scenario-${n}:${tag}`),
    );
    // Progress went to stderr, one line per step.
    expect(r.stderr).toContain(`bench: ${TARGET}/sandbox-agent:${tag} cached`);
    expect(r.stderr).toMatch(new RegExp(`bench: pushed ${TARGET}/sandbox-agent:${tag} sha256:[0-9a-f]{64}`));
  });
});
