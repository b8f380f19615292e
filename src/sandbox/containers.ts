import type Dockerode from "dockerode";
import { InfraError, isAbortError } from "../errors.js";
import { type ContainerSpec, createOptions } from "./container-spec.js";
import {
  callDeadline,
  type Docker,
  dockerMessage,
  dockerStatus,
  engine,
  engineTimeouts,
  ignoreGone,
  isNotFound,
} from "./docker.js";
import { type ContainerRuntime, containerRuntime } from "./runtime.js";

/** Engines (clients) known to refuse `StorageOpt.size`: asked once, then created without it. */
const noStorageOpt = new WeakSet<object>();
const STORAGE_OPT_REFUSED = /storage-?opt|storage option|quota/i;

/**
 * Create `spec`'s container. `episodeRuntime`: the runtime episode code gets on this engine (the
 * sandbox's, resolved at its start); the container's role decides whether it applies or runc does
 * (runtime.ts `containerRuntime`). A helper that always runs under runc passes `RUNC_RUNTIME`.
 */
export async function createContainer(
  docker: Docker,
  episodeRuntime: ContainerRuntime,
  spec: ContainerSpec,
): Promise<Dockerode.Container> {
  const what = `creating container ${spec.name}`;
  const runtime = containerRuntime(spec.labels, episodeRuntime);
  if (spec.storageBytes !== undefined && !noStorageOpt.has(docker.modem)) {
    try {
      return await docker.createContainer(createOptions(spec, runtime));
    } catch (err) {
      if (dockerStatus(err) === undefined || !STORAGE_OPT_REFUSED.test(dockerMessage(err)))
        return engine("container_create_failed", what, () => Promise.reject(err));
      noStorageOpt.add(docker.modem);
    }
  }
  const { storageBytes: _, ...rest } = spec;
  return engine("container_create_failed", what, () => docker.createContainer(createOptions(rest, runtime)));
}

/** Attach a created container to a second network (the engine takes one network at create time). */
export async function connectNetwork(
  docker: Docker,
  network: string,
  container: string,
  aliases: readonly string[] = [],
  ipv4?: string,
): Promise<void> {
  await engine("network_connect_failed", `connecting ${container} to ${network}`, () =>
    docker.getNetwork(network).connect({
      Container: container,
      EndpointConfig: { Aliases: [...aliases], ...(ipv4 ? { IPAMConfig: { IPv4Address: ipv4 } } : {}) },
    }),
  );
}

export async function startContainer(c: Dockerode.Container): Promise<void> {
  await engine("container_start_failed", `starting container ${c.id.slice(0, 12)}`, () => c.start());
}

/**
 * Resolve with the exit code once the container is not running; reject with the signal's reason
 * when aborted first (the container keeps running: the caller decides to kill it).
 */
export async function waitExit(c: Dockerode.Container, signal?: AbortSignal): Promise<number> {
  signal?.throwIfAborted();
  const res = (await engine("container_wait_failed", `waiting for ${c.id.slice(0, 12)}`, () =>
    c.wait({ condition: "not-running", ...(signal ? { abortSignal: signal } : {}) }),
  )) as { StatusCode?: number };
  return typeof res?.StatusCode === "number" ? res.StatusCode : -1;
}

/**
 * Ask nicely (SIGTERM, so the agent can write its summary), then SIGKILL after `graceMs`.
 * Resolves when the container has stopped. A container already gone or stopped is fine.
 */
export async function stopContainer(c: Dockerode.Container, graceMs: number): Promise<void> {
  try {
    await c.kill({ signal: "SIGTERM" });
  } catch (err) {
    if (isNotFound(err) || /is not running/i.test(dockerMessage(err))) return;
    throw new InfraError("container_kill_failed", `signalling ${c.id.slice(0, 12)}: ${dockerMessage(err)}`, {
      cause: err,
    });
  }
  const grace = AbortSignal.timeout(Math.max(1, graceMs));
  try {
    await waitExit(c, grace);
    return;
  } catch (err) {
    if (!isAbortError(err) && !grace.aborted) throw err;
  }
  await ignoreGone(() => c.kill({ signal: "SIGKILL" }));
  await waitExit(c, AbortSignal.timeout(30_000)).catch(() => undefined);
}

export async function removeContainer(docker: Docker, idOrName: string): Promise<void> {
  await engine("container_remove_failed", `removing container ${idOrName}`, () =>
    ignoreGone(() => docker.getContainer(idOrName).remove({ force: true, v: true })),
  );
}

/**
 * The engine refuses archive uploads into a read-only root filesystem (and a tmpfs is not visible
 * to it), so files for a read-only container travel on its stdin: attach before start, then
 * `send` once started. The container's command reads them (e.g. `tar -x -C /policy`); stdin
 * closes after the one attach (StdinOnce), which ends that read.
 */
export async function attachStdin(c: Dockerode.Container): Promise<{ send(data: Buffer): Promise<void> }> {
  const { copyMs } = engineTimeouts(c);
  const attach = callDeadline(copyMs);
  let stream: NodeJS.ReadWriteStream & { destroy?: () => void };
  try {
    stream = (await engine("container_attach_failed", `attaching to ${c.id.slice(0, 12)}`, () =>
      c.attach({
        stream: true,
        stdin: true,
        stdout: false,
        stderr: false,
        hijack: true,
        abortSignal: attach.signal,
      }),
    )) as NodeJS.ReadWriteStream & { destroy?: () => void };
  } catch (err) {
    if (attach.timedOut())
      throw new InfraError(
        "docker_timeout",
        `attaching to ${c.id.slice(0, 12)}: no answer within ${copyMs} ms`,
      );
    throw err;
  } finally {
    attach.clear();
  }
  stream.on("error", () => undefined);
  return {
    // Bounded too: a container that never reads its stdin must not hold the episode.
    send: (data: Buffer) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          stream.destroy?.();
          reject(
            new InfraError(
              "docker_timeout",
              `writing stdin of ${c.id.slice(0, 12)}: not taken within ${copyMs} ms`,
            ),
          );
        }, copyMs);
        stream.write(data, (err) => {
          if (err) {
            clearTimeout(timer);
            return reject(new InfraError("container_stdin_failed", `writing stdin: ${err.message}`));
          }
          stream.end(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }),
  };
}

export async function inspectContainer(c: Dockerode.Container): Promise<Dockerode.ContainerInspectInfo> {
  return engine("container_inspect_failed", `inspecting ${c.id.slice(0, 12)}`, () => c.inspect());
}
