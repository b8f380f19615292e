/**
 * A separate process that runs one long episode (a silent agent) and turns SIGTERM into an abort,
 * the way the daemon does. Prints {"session": …} when ready and {"result": …} when done.
 * Used by test/integration/episode-signals.test.ts to kill it mid-episode.
 */
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runEpisode } from "../../src/episode/index.js";
import { packOf, shippedScenario, startEpisodeRig } from "./episode.js";

const scenarioName = process.argv[2] ?? "reproducible-tarball";
const rig = await startEpisodeRig();
const ac = new AbortController();
process.on("SIGTERM", () => ac.abort(new Error("SIGTERM")));
process.stdout.write(`${JSON.stringify({ session: rig.sandbox.session.id, pid: process.pid })}\n`);
const scenario = await shippedScenario(scenarioName);
const result = await runEpisode({
  sandbox: rig.sandbox,
  images: rig.images,
  meter: rig.meter,
  pack: packOf({ "policy.json": JSON.stringify({ kind: "pin", model: "kimi-k3" }) }),
  scenario,
  capUsd: 0.1,
  outDir: await mkdtemp(join(tmpdir(), "trajrl-child-")),
  defaultModel: "qwen3.8-27b",
  agentCommand: "sleep 3600",
  timeouts: { agentMs: 600_000, watchdogFirstCallMs: 600_000 },
  signal: ac.signal,
});
process.stdout.write(`${JSON.stringify({ result: { status: result.status, failure: result.failure } })}\n`);
await rig.close();
process.exit(0);
