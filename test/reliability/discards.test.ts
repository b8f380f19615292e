/**
 * Discards a pack must not be able to cause, and the ones it may, told honestly: whole evaluations
 * through the real pipeline (meter, sandbox, episodes, SQLite) against the Engy simulator served as
 * the provider.
 *   - issue 36 item 6: a policy that leaves one long call in flight and answers its agent with 400s
 *     lost its episode, and the run was discarded anyway — the close's 503 read as the provider
 *     failing, and the usage summary, taken before the aborted call settled, said nothing was billed.
 *   - issue 31 item 6: a pack whose policy never makes a billable call is discarded under upstream's
 *     provider-failure rule, as upstream's is; the message says what the meter saw instead of
 *     sending the operator to a provider that was never called.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { type EngySim, startEngySim } from "../../src/engy-sim/index.js";
import { type Environment, openEnvironment } from "../../src/environment/index.js";
import { type EvaluationResult, evaluatePack } from "../../src/evaluation/index.js";
import { silentLogger } from "../../src/log.js";
import { packOf, REPO_ROOT, SCENARIOS_DIR } from "../helpers/episode.js";

const SCENARIO = "reproducible-tarball";
const HOSTILE = join(REPO_ROOT, "test/fixtures/hostile");

let sim: EngySim;
let env: Environment;

beforeAll(async () => {
  sim = await startEngySim({
    port: 0,
    seed: 11,
    scenariosDir: SCENARIOS_DIR,
    latencyScale: 0,
    log: silentLogger,
  });
  // kimi-k3 takes ten minutes to answer: the hostile policy's long call is still generating when
  // its episode ends.
  sim.setFaults({ rules: [{ fault: { kind: "stall", ms: 600_000 }, model: "kimi-k3", count: 1_000_000 }] });
  const config = loadConfig({
    DATA_DIR: mkdtempSync(join(tmpdir(), "discards-")),
    LLM_API_KEY: "sim-key",
    NETWORK: "local",
    OFFLINE_LLM_BASE_URL: sim.url,
    EVAL_CONCURRENCY: "1",
    SCENARIOS_DIR: SCENARIOS_DIR,
  });
  env = await openEnvironment(config, {
    log: silentLogger,
    meterRetry: { statusStepMs: 10, streamStepMs: 10 },
  });
}, 900_000);

afterAll(async () => {
  await env?.close();
  await sim?.close();
});

function run(name: string): Promise<EvaluationResult> {
  return evaluatePack(env, {
    pack: { ok: true, pack: packOf({ "policy.py": readFileSync(join(HOSTILE, name, "policy.py"), "utf8") }) },
    label: name,
    scenarios: [SCENARIO],
    source: "local",
    concurrency: 1,
    backoffScale: 0.01,
  });
}

describe("a pack cannot turn its own loss into no verdict (issue 36 item 6)", () => {
  it("one long call left in flight, the agent answered with 400: scored as the policy's fault, the aborted call billed", async () => {
    const r = await run("leaves-call-in-flight");
    console.log(JSON.stringify(r.kind === "verdict" ? r.verdict.scenarios : r));
    expect(r.kind).toBe("verdict");
    if (r.kind !== "verdict") return;
    const [s] = r.verdict.scenarios;
    expect(s!.attempts).toBe(1);
    expect(s!.failure).toMatchObject({ class: "policy", code: "policy_errors" });
    // The call the close aborted is booked at its reservation, in the summary as in its receipt.
    expect(s!.costUsd).toBeGreaterThan(0);
    expect(s!.byModel["kimi-k3"]).toMatchObject({ calls: 1 });
    expect(r.verdict.costUsd).toBe(s!.costUsd);
  }, 900_000);
});

describe("a provider-failure discard says what the meter saw (issue 31 item 6)", () => {
  it("every call refused for the allowlist: discarded as upstream's, the refusals named, no key to check", async () => {
    const r = await run("off-allowlist");
    expect(r).toMatchObject({ kind: "discarded", code: "llm_provider_failure" });
    if (r.kind !== "discarded") return;
    console.log(r.message);
    expect(r.message).toMatch(/0 forwarded to the provider, \d+ refused for the allowlist/);
    expect(r.message).toContain("The provider was never called");
    expect(r.message).not.toMatch(/key|credits/);
  }, 900_000);

  it("a policy sidecar that dies on its first request: its exit is named", async () => {
    const r = await run("crash-mid-run");
    expect(r).toMatchObject({ kind: "discarded", code: "llm_provider_failure" });
    if (r.kind !== "discarded") return;
    console.log(r.message);
    expect(r.message).toContain("0 forwarded to the provider");
    expect(r.message).toContain(
      "policy_crashed ×1 (the policy sidecar exited with status 3 while the agent ran)",
    );
    expect(r.message).not.toMatch(/key|credits/);
  }, 900_000);
});
