/**
 * Episodes on the subnet's runtime (trajrl-bench: the sidecar from the bench image, Hermes in the
 * scenario image, upstream's verifier on `tests_files_b64`), built offline from this project's
 * bench (no registry: the images are used where they were built) with the real meter and the Engy
 * simulator on loopback. Upstream's two outcomes (issue 27 item 8): a sidecar that never starts
 * scores the scenario 0 and the verifier never runs; an agent that wrote nothing is still graded
 * (the tests run on what it left) after the policy-stall watchdog stopped it, and an empty
 * deliverable scores the scenario's null floor.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OfflineBench } from "../../src/bench/index.js";
import { probeScenarioInfo } from "../../src/bench/probes.js";
import { loadConfig } from "../../src/config.js";
import type { EpisodeResult, EpisodeScenario, RunEpisodeOptions } from "../../src/episode/index.js";
import { outcomeOf } from "../../src/evaluation/index.js";
import { sdkSingleFile } from "../../src/policy/index.js";
import { round4 } from "../../src/precision.js";
import type { BuiltImage } from "../../src/sandbox/index.js";
import {
  type EpisodeRig,
  packOf,
  REPO_ROOT,
  runTestEpisode,
  shippedScenario,
  startEpisodeRig,
} from "../helpers/episode.js";

const GIT = "git-lost-commit-recovery"; // null floor 1/6: a floor that is not 0
// The bench test's namespace: the same content hashes, so the images are shared with it.
const TARGET = `127.0.0.1:${process.env.TRAJRL_REGISTRY_PORT ?? "5000"}/trajrl-bench-test`;

let rig: EpisodeRig;
let out: string;
let base: BuiltImage;
let scenarioImage: BuiltImage;
let scenario: EpisodeScenario;
let nullFloor: number;

const asBuilt = (i: { ref: string; id: string }): BuiltImage => ({
  ref: i.ref,
  id: i.id,
  hash: "",
  built: false,
  buildMs: 0,
});

beforeAll(async () => {
  rig = await startEpisodeRig();
  out = await mkdtemp(join(tmpdir(), "trajrl-episode-bench-"));
  const built = await new OfflineBench(rig.sandbox.docker, { repoRoot: REPO_ROOT }).build({
    target: TARGET,
    tag: "episode-bench",
    scenarios: [GIT],
    push: false,
  });
  base = asBuilt(built.base);
  scenarioImage = asBuilt(built.scenarios[0]!);
  // What upstream's harness reads of a scenario: the probe of the bench image.
  const info = await probeScenarioInfo(rig.sandbox.docker, rig.sandbox.session, base.ref, GIT);
  scenario = {
    name: GIT,
    dir: "",
    instruction: info.instruction_md,
    task: {
      agent: { timeout_sec: info.agent_timeout_s ?? 600 },
      verifier: { timeout_sec: info.verifier_timeout_s, agent_output_path: info.agent_output_path },
    },
    testFiles: Object.fromEntries(
      Object.entries(info.tests_files_b64).map(([f, b64]) => [f, Buffer.from(b64, "base64")]),
    ),
  };
  nullFloor = (await shippedScenario(GIT)).task.metadata?.null_floor as number;
}, 1_200_000);

afterAll(async () => {
  await rig?.close();
  if (out) await rm(out, { recursive: true, force: true });
});

async function episode(over: Partial<RunEpisodeOptions>): Promise<EpisodeResult> {
  // The SDK file placed as the registry bench places it (src/environment).
  const sdk = sdkSingleFile();
  const { r } = await runTestEpisode(rig, {
    images: { sidecar: async () => base, scenario: async () => scenarioImage },
    runtime: {
      kind: "bench",
      sdk: { entry: sdk.name, files: [{ path: sdk.name, data: sdk.content }] },
      verifierNetwork: "none",
    },
    scenario,
    defaultModel: "qwen3.8-27b",
    runsDir: out,
    ...over,
  });
  return r;
}

describe("episodes on the bench runtime", () => {
  it("a sidecar that fails to start scores the scenario 0, and the verifier never runs", async () => {
    const r = await episode({
      pack: packOf({ "policy.py": 'raise RuntimeError("policy exploded at import")\n' }),
      timeouts: { healthMs: 60_000 },
    });
    expect(r).toMatchObject({ status: "scored", quality: 0, tests: 0, passed: 0, verifier: null });
    expect(r.failure).toMatchObject({ class: "policy", code: "policy_crashed" });
    expect(r.agent).toMatchObject({ exit_code: null, killed_by: null, tool_calls: 0 });
    expect(r.timings.verify_ms).toBe(0);
    expect(r.usage?.calls).toBe(0);
    // What the evaluation makes of it: a final 0, no setup time, an agent that never ran.
    expect(outcomeOf(r)).toMatchObject({
      status: "scored",
      quality: 0,
      agent: { exitCode: null, killedBy: null },
      judge: { policySetupS: null, policyStalled: false },
    });
  }, 600_000);

  it("an agent that wrote nothing is still graded (its policy stalled): the tests decide, on the empty workspace", async () => {
    // A policy that answers health and never a model call: the watchdog stops the agent.
    const hang = [
      "import http.server, os, time",
      "class H(http.server.BaseHTTPRequestHandler):",
      "    def do_GET(self):",
      '        body = b\'{"object": "list", "data": [{"id": "auto"}]}\'',
      "        self.send_response(200); self.send_header('content-type', 'application/json'); self.end_headers(); self.wfile.write(body)",
      "    def do_POST(self):",
      "        time.sleep(3600)",
      "    def log_message(self, *a):",
      "        pass",
      'http.server.ThreadingHTTPServer(("0.0.0.0", int(os.environ["POLICY_PORT"])), H).serve_forever()',
      "",
    ].join("\n");
    const r = await episode({
      pack: packOf({ "policy.py": hang }),
      timeouts: { agentMs: 300_000, watchdogFirstCallMs: 5_000, watchdogPollMs: 200, stopGraceMs: 2_000 },
    });
    expect(r.agent.killed_by).toBe("watchdog_no_call");
    expect(r.failure).toMatchObject({ class: "policy", code: "policy_stalled" });
    expect(r.notes).toContain("agent_output_missing");
    expect(r.status).toBe("scored");
    // Graded, not skipped: the verifier ran its six tests without a deliverable (recover.sh cannot
    // run, so none passes) and its report is the score.
    expect(r.verifier).not.toBeNull();
    expect(r).toMatchObject({ tests: 6, passed: 0, quality: 0 });
    expect(outcomeOf(r)).toMatchObject({
      judge: { policyStalled: true },
      agent: { killedBy: "watchdog_no_call" },
    });
  }, 900_000);

  it("a pack of SKILL.md alone runs as pin on the locked testee, whatever the operator set", async () => {
    const { llm } = loadConfig({ LLM_API_KEY: "k", DEFAULT_MODEL: "kimi-k3", LLM_MODEL: "glm-5.3-flash" });
    const r = await episode({
      pack: packOf({}),
      defaultModel: llm.defaultModel,
      timeouts: { agentMs: 60_000 },
    });
    expect(r.usage?.calls).toBeGreaterThan(0);
    expect(Object.keys(r.by_model)).toEqual(["qwen3.8-27b"]);
    expect(r.failure?.class ?? "policy").toBe("policy");
  }, 600_000);

  it("an agent that left an empty deliverable is graded at the scenario's null floor", async () => {
    // A raw policy that plays the model without calling one: one tool call that leaves an empty
    // recover.sh, then "done" (its answers are unmetered: reported, never scored, on the subnet).
    const scripted = [
      "import http.server, json, os",
      "TOOL = {'index': 0, 'id': 'c1', 'type': 'function', 'function': {'name': 'terminal', 'arguments': json.dumps({'command': ': > /app/recover.sh'})}}",
      "class H(http.server.BaseHTTPRequestHandler):",
      "    protocol_version = 'HTTP/1.1'",
      "    def do_GET(self):",
      '        body = b\'{"object": "list", "data": [{"id": "auto"}]}\'',
      "        self.send_response(200); self.send_header('content-type', 'application/json'); self.send_header('content-length', str(len(body))); self.end_headers(); self.wfile.write(body)",
      "    def do_POST(self):",
      "        req = json.loads(self.rfile.read(int(self.headers.get('content-length', '0'))) or b'{}')",
      "        done = any(m.get('role') == 'tool' for m in req.get('messages', []))",
      "        msg = {'role': 'assistant', 'content': 'done.'} if done else {'role': 'assistant', 'content': None, 'tool_calls': [TOOL]}",
      "        finish = 'stop' if done else 'tool_calls'",
      "        if req.get('stream'):",
      "            chunks = [{'choices': [{'index': 0, 'delta': msg, 'finish_reason': None}]}, {'choices': [{'index': 0, 'delta': {}, 'finish_reason': finish}]}]",
      "            body = ''.join('data: ' + json.dumps(dict(c, id='x', object='chat.completion.chunk', created=0, model='auto')) + '\\n\\n' for c in chunks) + 'data: [DONE]\\n\\n'",
      "            ctype = 'text/event-stream'",
      "        else:",
      "            body = json.dumps({'id': 'x', 'object': 'chat.completion', 'created': 0, 'model': 'auto', 'choices': [{'index': 0, 'message': msg, 'finish_reason': finish}]})",
      "            ctype = 'application/json'",
      "        data = body.encode()",
      "        self.send_response(200); self.send_header('content-type', ctype); self.send_header('content-length', str(len(data))); self.end_headers(); self.wfile.write(data)",
      "    def log_message(self, *a):",
      "        pass",
      'http.server.ThreadingHTTPServer(("0.0.0.0", int(os.environ["POLICY_PORT"])), H).serve_forever()',
      "",
    ].join("\n");
    const r = await episode({
      pack: packOf({ "policy.py": scripted }),
      timeouts: { agentMs: 300_000, watchdogFirstCallMs: 240_000 },
    });
    expect(r.failure).toBeNull();
    expect(r.agent).toMatchObject({ killed_by: null, tool_calls: 1 });
    expect(r.status).toBe("scored");
    expect(r.tests).toBe(6);
    expect(round4(r.quality)).toBe(nullFloor);
    expect(nullFloor).toBeGreaterThan(0);
  }, 600_000);
});
