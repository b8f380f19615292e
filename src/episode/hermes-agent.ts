/**
 * The agent of a trajrl-bench episode: Hermes inside the scenario image, started exactly as
 * upstream's validator starts it (sandbox_harness.py `_run_episode`): the container runs the image's
 * own entrypoint and command (`tail -f /dev/null`), SKILL.md and INSTRUCTION.md are dropped into
 * /workspace (root:hermes 0440), `/workspace/learned` and `/opt/data` handed to hermes, then
 * `hermes chat … --quiet --yolo` runs as hermes in /workspace with HOME=/opt/data, wrapped with
 * `hermes sessions export /workspace/turns.jsonl`. At the deadline (or the watchdog) the chat
 * process is killed by name (`pkill -KILL hermes`), the wrapper survives and exports; if the export
 * left nothing, a post-mortem export runs. The model endpoint is the policy sidecar with the
 * episode's token as key: never the provider key, and the agent network reaches nothing else.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { InfraError } from "../errors.js";
import {
  type BuiltImage,
  type ContainerSpec,
  type EpisodeContainer,
  type EpisodeScope,
  type EpisodeTopology,
  type ExecResult,
  hostAddress,
  SCENARIO_LIMITS,
} from "../sandbox/index.js";
import type { AgentProcess } from "./agent.js";
import type { EpisodeRun } from "./run-context.js";
import { POLICY_PORT } from "./sidecar.js";

export const HERMES_UID = 10000;
/** Upstream's prompt, verbatim (the policy sees it as the session's first user message). */
export const HARNESS_PROMPT =
  "Read /workspace/SKILL.md for your approach. " +
  "Read /workspace/INSTRUCTION.md for the task. " +
  "The task's working directory is /app/. " +
  "/app and /workspace/learned are writable scratch; " +
  "everything else is read-only. " +
  "Solve the task. Do not modify SKILL.md.";

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** The bash wrapper upstream runs: chat, then the session export, exit with the chat's status. */
export const HERMES_COMMAND =
  "set +e; " +
  `hermes chat -q ${shellQuote(HARNESS_PROMPT)} ` +
  "-m auto " +
  "-t terminal,file,code_execution,memory " +
  "--quiet --yolo; " +
  "chat_rc=$?; " +
  "hermes sessions export /workspace/turns.jsonl " +
  "2>/workspace/turns_export.err; " +
  "export_rc=$?; " +
  'echo "export_rc=$export_rc" >> /workspace/turns_export.err; ' +
  "exit $chat_rc";

/** How long the wrapper gets, after the chat is killed, to run its own export. */
const EXPORT_GRACE_MS = 60_000;
/** Capabilities the image's root entrypoint and our root steps need (chown, chmod, pkill). */
const ROOT_STEP_CAPS = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETUID", "SETGID"];

export interface HermesAgent extends AgentProcess {
  /** What `hermes chat` printed (the transcript), once it ended. */
  transcript(): string;
  /** The chat's exit status (null when killed before it reported one). */
  chatExit(): number | null;
}

/** Our own steps in the container (set-up, kills) are short: none may hold the episode. */
const ROOT_STEP_MS = 60_000;

async function rootSh(c: EpisodeContainer, script: string, what: string): Promise<void> {
  const r = await c.exec(["sh", "-c", script], { user: "0:0", signal: AbortSignal.timeout(ROOT_STEP_MS) });
  if (r.exitCode !== 0)
    throw new InfraError(
      "scenario_setup_failed",
      `${what} failed (exit ${r.exitCode}): ${r.stderr.trim().slice(-300)}`,
    );
}

/** Create and start the scenario container and set up /workspace; Hermes is not started yet. */
export async function createHermesAgent(
  run: EpisodeRun,
  opts: { image: BuiltImage; topo: EpisodeTopology; base: string; disk: { limitBytes: number } },
): Promise<HermesAgent> {
  const { scope, token } = run;
  if (!scope || token === undefined) throw new InfraError("episode_state", "agent before topology");
  const name = `${opts.base}-agent`;
  scope.trackContainer(name);
  const c = await run.engine.create(hermesContainerSpec(name, token, scope, opts));
  await c.start();
  await awaitEntrypoint(c, opts.image.ref);
  await prepareWorkspace(c, run);
  return hermesProcess(c, name, token);
}

/** The scenario container as upstream runs it: the image's own entrypoint, the sidecar as its model. */
function hermesContainerSpec(
  name: string,
  token: string,
  scope: EpisodeScope,
  opts: { image: BuiltImage; topo: EpisodeTopology; disk: { limitBytes: number } },
): ContainerSpec {
  return {
    name,
    image: opts.image.ref,
    env: {
      LLM_API_KEY: token,
      LLM_BASE_URL: `http://policy:${POLICY_PORT}/v1`,
      LLM_MODEL: "auto",
    },
    labels: scope.labels("agent"),
    limits: SCENARIO_LIMITS,
    network: {
      kind: "network",
      name: opts.topo.agentNet.name,
      ipv4: hostAddress(opts.topo.agentNet.subnet, 3),
    },
    dropAllCaps: true,
    capAdd: ROOT_STEP_CAPS,
    storageBytes: opts.disk.limitBytes,
    init: true,
  };
}

/** The image's entrypoint (config, ownership) runs before its command: wait until exec works. */
async function awaitEntrypoint(c: EpisodeContainer, imageRef: string): Promise<void> {
  for (let i = 0; ; i++) {
    const r = await c
      .exec(["sh", "-c", "test -d /app && test -d /workspace"], {
        user: "0:0",
        signal: AbortSignal.timeout(ROOT_STEP_MS),
      })
      .catch(() => undefined);
    if (r?.exitCode === 0) break;
    if (i >= 30)
      throw new InfraError("scenario_start_failed", `${imageRef} did not come up with /app and /workspace`);
    await sleep(200 + Math.min(i * 100, 1000));
  }
}

/** SKILL.md and INSTRUCTION.md root:hermes 0440; /workspace/learned and /opt/data handed to hermes. */
async function prepareWorkspace(c: EpisodeContainer, run: EpisodeRun): Promise<void> {
  await c.write("/workspace", [
    { name: "SKILL.md", data: run.pack.skillMd, mode: 0o440 },
    { name: "INSTRUCTION.md", data: run.scenario.instruction, mode: 0o440 },
  ]);
  await rootSh(
    c,
    "chown root:hermes /workspace/SKILL.md /workspace/INSTRUCTION.md && " +
      "chmod 440 /workspace/SKILL.md /workspace/INSTRUCTION.md && " +
      "mkdir -p /workspace/learned && chown -R hermes:hermes /workspace/learned && " +
      "mkdir -p /opt/data && chown -R hermes:hermes /opt/data",
    "preparing /workspace",
  );
}

/** Hermes as the episode drives it: `release` execs the chat, `stop`/`kill` end it by name or user. */
function hermesProcess(c: EpisodeContainer, name: string, token: string): HermesAgent {
  let chat: Promise<ExecResult> | undefined;
  let result: ExecResult | undefined;
  return {
    container: c,
    name,
    release: async () => {
      chat = c
        .exec(["bash", "-c", HERMES_COMMAND], {
          user: "hermes",
          workingDir: "/workspace",
          env: {
            OPENROUTER_API_KEY: token,
            OPENAI_API_KEY: token,
            ANTHROPIC_API_KEY: token,
            HERMES_BUNDLED_SKILLS: "/nonexistent",
            HOME: "/opt/data",
          },
          outputCap: 4 * 1024 * 1024,
        })
        .then((r) => {
          result = r;
          return r;
        });
      chat.catch(() => undefined);
    },
    exited: (signal: AbortSignal) => chatExited(chat, signal),
    // Kill the chat by process name so the wrapper survives to export the session, then give the
    // wrapper its time to do so.
    stop: async () => {
      await c
        .exec(["pkill", "-KILL", "hermes"], {
          user: "0:0",
          signal: AbortSignal.timeout(ROOT_STEP_MS),
        })
        .catch(() => undefined);
      if (chat)
        await Promise.race([chat.catch(() => undefined), sleep(EXPORT_GRACE_MS)]).catch(() => undefined);
    },
    // Every process of the agent user at once (the chat, the wrapper, whatever its tools left
    // running); the container itself stays up for the post-mortem export.
    kill: async () => {
      await c
        .exec(["pkill", "-KILL", "-u", String(HERMES_UID)], {
          user: "0:0",
          signal: AbortSignal.timeout(ROOT_STEP_MS),
        })
        .catch(() => undefined);
      if (chat) await Promise.race([chat.catch(() => undefined), sleep(10_000)]).catch(() => undefined);
    },
    transcript: () => result?.stdout ?? "",
    chatExit: () => result?.exitCode ?? null,
  };
}

/** The chat's exit status once it ends; rejects when `signal` aborts first. */
function chatExited(chat: Promise<ExecResult> | undefined, signal: AbortSignal): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    if (!chat) return reject(new InfraError("episode_state", "hermes was never started"));
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    chat.then(
      (r) => {
        signal.removeEventListener("abort", onAbort);
        resolve(r.exitCode);
      },
      (err) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}

/** Re-run the export from the persistent session store (upstream's `_post_mortem_export`). */
export async function postMortemExport(c: EpisodeContainer): Promise<void> {
  await c
    .exec(
      [
        "bash",
        "-c",
        "hermes sessions export /workspace/turns.jsonl 2>>/workspace/turns_export.err; " +
          'echo "export_rc=$? path=post_mortem" >>/workspace/turns_export.err',
      ],
      { user: "hermes", workingDir: "/workspace", signal: AbortSignal.timeout(EXPORT_GRACE_MS) },
    )
    .catch(() => undefined);
}
