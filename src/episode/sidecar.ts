/**
 * The policy sidecar of an episode: created on the agent network (alias `policy`) and joined to
 * the meter network, the miner's files unpacked from a stdin tar into a tmpfs (the root is
 * read-only, so the engine accepts no archive upload), then health-gated: GET /health polled
 * while watching for the container's exit, whichever comes first.
 */
import { request } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { InfraError } from "../errors.js";
import { type Pack, POLICY_DIR_TMPFS_BYTES, policyTarEntries } from "../pack/index.js";
import {
  type BuiltImage,
  type EpisodeContainer,
  type EpisodeEngine,
  type EpisodeTopology,
  hostAddress,
  type MeterLoss,
  packTar,
  SIDECAR_LIMITS,
  type TarEntry,
} from "../sandbox/index.js";
import { type Deadline, deadline } from "./deadline.js";
import type { EpisodeRun } from "./run-context.js";
import type { EpisodeFailure, SidecarSdk } from "./types.js";

export const POLICY_PORT = 8800;
export const POLICY_UID = 10001;

/** The policy files as a tar relative to /policy, laid out as upstream's harness leaves them (src/pack). */
export function policyEntries(pack: Pack): TarEntry[] {
  return policyTarEntries(pack);
}

const commandCache = new Map<string, string[]>();

/** The image's own entrypoint + command (what our stdin wrapper execs), inspected once per image. */
async function imageCommand(engine: EpisodeEngine, image: BuiltImage): Promise<string[]> {
  const hit = commandCache.get(image.id);
  if (hit) return hit;
  const cmd = await engine.imageCommand(image.ref);
  if (cmd.length === 0) throw new InfraError("sidecar_image_invalid", `${image.ref} has no command to run`);
  commandCache.set(image.id, cmd);
  return cmd;
}

export interface Sidecar {
  container: EpisodeContainer;
  name: string;
  /** Its address on the meter network. */
  meterIp: string;
  /** `host:port` where this process reaches its policy port (the meter network, or the topology's `reach`). */
  healthAt: string;
  /** The health probe: our runtime's GET /health, or upstream's GET /v1/models answering `data`. */
  health: { path: string; bodyIncludes?: string };
  /** Starts it and sends the policy files; resolves once both are done. */
  start(): Promise<void>;
  /** The policy's own log (upstream's POLICY_LOG), read while the sidecar still runs; "" when none. */
  policyLogTail(): Promise<string>;
  /** Why its meter went away, when it did (a remote engine's relay: src/sandbox `MeterLoss`). */
  meterLoss(): MeterLoss | undefined;
}

/**
 * A kill of the sidecar the episode did not send: infra (an operator, an engine shutdown, a lost
 * relay), unless its meter relay ran out of memory first — the relay carries this sidecar's
 * traffic alone, so that is the policy's own doing, as a sidecar killed at its own limit is.
 */
export function outsideKill(sidecar: Pick<Sidecar, "meterLoss">, message: string): EpisodeFailure {
  return sidecar.meterLoss() === "relay_oom"
    ? {
        class: "policy",
        code: "policy_relay_oom",
        message:
          "the policy's traffic filled its meter relay until the relay ran out of memory; the sidecar was stopped",
      }
    : { class: "infra", code: "sidecar_killed", message };
}

/** The image, command, user and files that make one of the two kinds of sidecar. */
export interface SidecarLaunch {
  cmd: string[];
  user: string;
  env: Record<string, string>;
  tmpfs: Record<string, string>;
  files: TarEntry[];
  health: Sidecar["health"];
  policyLog?: string;
}

/** Our sidecar image: its own command, uid 10001, the policy files in /policy. */
export async function builtinLaunch(run: EpisodeRun, image: BuiltImage): Promise<SidecarLaunch> {
  return {
    cmd: await imageCommand(run.engine, image),
    user: `${POLICY_UID}:${POLICY_UID}`,
    env: { PYTHONDONTWRITEBYTECODE: "1" },
    tmpfs: {
      "/tmp": "rw,nosuid,nodev,size=64m",
      "/policy": `rw,nosuid,nodev,noexec,size=${POLICY_DIR_TMPFS_BYTES},uid=${POLICY_UID},gid=${POLICY_UID},mode=0755`,
    },
    files: policyEntries(run.pack),
    health: { path: "/health" },
  };
}

export const BENCH_PYTHON = "/opt/hermes/.venv/bin/python";
const HERMES_ID = 10000;

/**
 * The bench image as the sidecar, as upstream starts it (`_start_policy_sidecar`): the SDK at
 * /policy/sdk, the miner's files in /policy, `python /policy/sdk/trajrl_policy.py` with the
 * image's Python, as hermes, HOME=/opt/data. Upstream starts as root to chown /policy and then
 * drops to hermes with gosu; here the files arrive owned by hermes and the process starts as
 * hermes, on a read-only root with tmpfs for /policy, /tmp and HOME: the policy sees the same
 * files, user, paths and environment.
 */
export function benchLaunch(run: EpisodeRun, sdk: SidecarSdk): SidecarLaunch {
  const own = { uid: HERMES_ID, gid: HERMES_ID };
  const sdkDirs = new Set<string>(["sdk"]);
  for (const f of sdk.files) {
    const parts = f.path.split("/");
    for (let i = 1; i < parts.length; i++) sdkDirs.add(`sdk/${parts.slice(0, i).join("/")}`);
  }
  return {
    cmd: [BENCH_PYTHON, `/policy/sdk/${sdk.entry}`],
    user: `${HERMES_ID}:${HERMES_ID}`,
    env: {
      POLICY_LOG: "/policy/policy.log",
      PYTHONPATH: "/policy/sdk:/policy",
      PYTHONUNBUFFERED: "1",
      PYTHONDONTWRITEBYTECODE: "1",
      HOME: "/opt/data",
    },
    tmpfs: {
      "/tmp": "rw,nosuid,nodev,size=64m",
      "/policy": `rw,nosuid,nodev,size=${POLICY_DIR_TMPFS_BYTES},uid=${HERMES_ID},gid=${HERMES_ID},mode=0755`,
      "/opt/data": `rw,nosuid,nodev,size=64m,uid=${HERMES_ID},gid=${HERMES_ID},mode=0700`,
    },
    files: [
      ...[...sdkDirs]
        .sort()
        .map((d): TarEntry => ({ name: `${d}/`, type: "directory", mode: 0o755, ...own })),
      ...sdk.files.map((f): TarEntry => ({ name: `sdk/${f.path}`, data: f.data, mode: 0o644, ...own })),
      // After the SDK: a pack file at sdk/trajrl_policy.py replaces it, as in upstream's tar.
      ...policyEntries(run.pack).map((e) => ({ ...e, ...own })),
    ],
    health: { path: "/v1/models", bodyIncludes: "data" },
    policyLog: "/policy/policy.log",
  };
}

/** Create the sidecar (not started): env of DESIGN.md, both networks, the policy tar ready. */
export async function createSidecar(
  run: EpisodeRun,
  opts: {
    image: BuiltImage;
    topo: EpisodeTopology;
    base: string;
    defaultModel: string;
    /** The kind's command, user, files and health probe (src/episode/episode-kind.ts). */
    launch: () => Promise<SidecarLaunch>;
  },
): Promise<Sidecar> {
  const { scope, token } = run;
  if (!scope || token === undefined) throw new InfraError("episode_state", "sidecar before topology");
  const { topo } = opts;
  const name = `${opts.base}-sidecar`;
  scope.trackContainer(name);
  const agentIp = hostAddress(topo.agentNet.subnet, 2);
  const meterIp = hostAddress(topo.meterNet.subnet, 2);
  const launch = await opts.launch();
  const container = await run.engine.create({
    name,
    image: opts.image.ref,
    // The root is read-only, so the engine accepts no archive upload: the policy files arrive
    // as a tar on stdin, unpacked into a tmpfs at /policy before the sidecar's command runs.
    entrypoint: [
      "/bin/sh",
      "-c",
      'umask 022 && tar -x -C /policy -f - && cd /policy && exec "$@"',
      "sidecar",
    ],
    cmd: launch.cmd,
    stdin: true,
    env: {
      POLICY_PORT: String(POLICY_PORT),
      UPSTREAM_URL: `http://meter:${topo.meterPort}/v1`,
      EPISODE_TOKEN: token,
      POLICY_DIR: "/policy",
      DEFAULT_MODEL: opts.defaultModel,
      ...launch.env,
    },
    user: launch.user,
    labels: scope.labels("sidecar"),
    limits: SIDECAR_LIMITS,
    network: { kind: "network", name: topo.agentNet.name, aliases: ["policy"], ipv4: agentIp },
    extraHosts: topo.sidecarExtraHosts,
    readOnlyRoot: true,
    tmpfs: launch.tmpfs,
    dropAllCaps: true,
    init: true,
  });
  const policyTar = await packTar(launch.files);
  const [stdin] = await Promise.all([
    container.openStdin(),
    run.engine.connect(topo.meterNet.name, container, meterIp),
  ]);
  const reached = topo.reach ? await topo.reach(meterIp, POLICY_PORT) : undefined;
  return {
    container,
    name,
    meterIp,
    healthAt: reached ? `${reached.host}:${reached.port}` : `${meterIp}:${POLICY_PORT}`,
    health: launch.health,
    meterLoss: () => topo.meterLoss?.(),
    start: async () => {
      await container.start();
      await stdin.send(policyTar);
    },
    policyLogTail: async () => {
      if (!launch.policyLog) return "";
      const r = await container
        .exec(["tail", "-c", "65536", launch.policyLog], {
          signal: AbortSignal.timeout(10_000),
        })
        .catch(() => undefined);
      return r?.exitCode === 0 ? r.stdout : "";
    },
  };
}

function httpOk(url: string, signal: AbortSignal, bodyIncludes?: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request(url, { method: "GET", signal, timeout: 2000, agent: false }, (res) => {
      if (bodyIncludes === undefined) {
        res.resume();
        return resolve((res.statusCode ?? 500) < 300);
      }
      // Upstream's probe is `curl -s -m 2 URL` answering with "data" anywhere in the body.
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => {
        if (body.length < 65536) body += c;
      });
      res.on("end", () => resolve(body.includes(bodyIncludes)));
      res.on("error", () => resolve(false));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(false));
    req.end();
  });
}

export type HealthOutcome = { kind: "healthy" } | { kind: "exited"; code: number } | { kind: "timeout" };

/** Poll GET /health while watching for the container's exit; whichever comes first. */
async function pollHealth(
  url: string,
  bodyIncludes: string | undefined,
  container: EpisodeContainer,
  dl: Deadline,
): Promise<HealthOutcome> {
  const done = new AbortController();
  const signal = AbortSignal.any([dl.signal, done.signal]);
  // The engine's wait can fail while the container runs on (a dropped connection under load): that
  // says nothing of the policy, so it is asked again. Only an exit, a health answer or the deadline
  // ends the gate (a failed wait once ended it as "aborted", an infra failure of nobody's making).
  const exited = (async (): Promise<HealthOutcome | undefined> => {
    while (!signal.aborted) {
      try {
        return { kind: "exited", code: await container.wait(signal) };
      } catch {
        if (signal.aborted) break;
        const info = await container.state().catch(() => undefined);
        if (info && !info.running) return { kind: "exited", code: info.exitCode };
        await sleep(250, undefined, { signal }).catch(() => undefined);
      }
    }
    return undefined;
  })();
  const healthy = (async (): Promise<HealthOutcome | undefined> => {
    while (!signal.aborted) {
      if (await httpOk(url, signal, bodyIncludes)) return { kind: "healthy" };
      await sleep(25, undefined, { signal }).catch(() => undefined);
    }
    return undefined;
  })();
  const first = await Promise.race([exited, healthy]);
  done.abort();
  if (first) return first;
  if (dl.expired) {
    // The deadline may have raced a crash: a container that is gone by now crashed.
    const info = await container.state().catch(() => undefined);
    if (info && !info.running) return { kind: "exited", code: info.exitCode };
    return { kind: "timeout" };
  }
  throw dl.signal.reason ?? new DOMException("aborted", "AbortError");
}

/** The sidecar's health gate; a policy that never gets healthy is recorded as the policy's failure. */
export async function awaitHealthy(
  run: EpisodeRun,
  sidecar: Sidecar,
  healthMs: number,
  signal: AbortSignal | undefined,
): Promise<{ healthy: boolean; policyLog: string }> {
  const hdl = deadline(healthMs, signal);
  let health: HealthOutcome;
  try {
    health = await pollHealth(
      `http://${sidecar.healthAt}${sidecar.health.path}`,
      sidecar.health.bodyIncludes,
      sidecar.container,
      hdl,
    );
  } finally {
    hdl.clear();
  }
  run.log.debug({ phase: `sidecar.${health.kind}` }, "episode.phase");
  if (health.kind === "healthy") return { healthy: true, policyLog: "" };
  const logs = await sidecar.container.logs(256 * 1024).catch(() => ({
    stdout: "",
    stderr: "",
    truncated: false,
  }));
  const policyLog = `${logs.stdout}${logs.stderr ? `\n--- stderr ---\n${logs.stderr}` : ""}`;
  // We never stop the sidecar while waiting for it: a kill then came from outside (the engine
  // stopping it on shutdown, an operator), not from the policy. The kill event precedes the exit.
  const exit = health.kind === "exited" ? { code: health.code } : undefined;
  const killedFromOutside =
    exit !== undefined && (await sleep(300).then(() => run.sandbox.engineWatch.killsOf(sidecar.name) > 0));
  run.fail(
    killedFromOutside
      ? outsideKill(
          sidecar,
          `the policy sidecar was killed from outside (exit ${exit?.code}) before it was healthy`,
        )
      : exit !== undefined
        ? {
            class: "policy",
            code: "policy_crashed",
            message: `the policy sidecar exited with status ${exit.code} before it was healthy`,
          }
        : {
            class: "policy",
            code: "policy_health_timeout",
            message: `the policy sidecar was not healthy within ${healthMs} ms`,
          },
  );
  const first = run.failures[0]!;
  await run.artifacts.write(
    "error.txt",
    `${first.code}: ${first.message}\n\n${logs.stderr || logs.stdout || "(no output)"}\n`,
  );
  return { healthy: false, policyLog };
}
