/**
 * The one seam between an episode and the container engine (Inspect AI's SandboxEnvironment is
 * the model): create a container from a ContainerSpec, start, stop, wait, exec, read and write
 * paths, open its stdin, read its logs, watch and measure its writable layer, kill it, connect it
 * to a network, remove it, and read an image's command. The episode (its agent, sidecar, graders)
 * speaks only to these; this file is the Docker
 * implementation (dockerode through the helpers beside it). Which OCI runtime a container gets
 * (runc or gVisor, src/sandbox/runtime.ts) is decided below the seam: the engine carries the
 * episode runtime it was made with, and each spec's role label applies it or runc.
 * A Kubernetes backend implements EpisodeEngine and EpisodeContainer (docs/kubernetes.md).
 */
import { type FetchedPath, getPath, putFiles, statPath } from "./container-files.js";
import {
  type CapturedLogs,
  type ExecOptions,
  type ExecResult,
  execIn,
  readLogs,
} from "./container-output.js";
import type { ContainerSpec } from "./container-spec.js";
import {
  attachStdin,
  connectNetwork,
  createContainer,
  inspectContainer,
  removeContainer,
  startContainer,
  stopContainer,
  waitExit,
} from "./containers.js";
import type { Container, Docker } from "./docker.js";
import { type LayerUse, type LayerWatch, layerBytes, watchLayer } from "./layer-watch.js";
import type { ContainerRuntime } from "./runtime.js";
import type { PathStat } from "./tar.js";

/** What the episode reads of a container's state. */
export interface ContainerState {
  running: boolean;
  exitCode: number;
  oomKilled: boolean;
}

/** One container of an episode, as the episode drives it. */
export interface EpisodeContainer {
  readonly name: string;
  readonly id: string;
  start(): Promise<void>;
  /** SIGKILL at once, without waiting for the exit (a grader past a bound). */
  kill(): Promise<void>;
  /** Stop with `graceMs` before the kill (0: at once); what it wrote stays readable. */
  stop(graceMs: number): Promise<void>;
  /** Resolves with the exit status when it ends; rejects when `signal` aborts first. */
  wait(signal?: AbortSignal): Promise<number>;
  state(): Promise<ContainerState>;
  exec(argv: readonly string[], opts?: ExecOptions): Promise<ExecResult>;
  /** A path's stat, undefined when it does not exist. */
  stat(path: string): Promise<PathStat | undefined>;
  /** A regular file's bytes up to `cap`; anything else is described, never streamed. */
  read(path: string, cap: number): Promise<FetchedPath>;
  write(dir: string, entries: Parameters<typeof putFiles>[2]): Promise<void>;
  /** The container's stdin (created with `stdin: true`), attached before it starts. */
  openStdin(): Promise<{ send(data: Buffer): Promise<void> }>;
  logs(capBytes: number): Promise<CapturedLogs>;
  /**
   * Watch the writable layer until `signal`: resolves with the use once it passes a bound,
   * undefined when the watch ends first; `seen` holds the last measurement.
   */
  watchLayer(
    bounds: Omit<LayerWatch, "docker">,
    signal: AbortSignal,
    seen?: LayerUse,
  ): Promise<LayerUse | undefined>;
  /** What its writable layer holds now, in bytes as the engine counts them; undefined when unknown. */
  layerBytes(): Promise<number | undefined>;
}

/** The engine as an episode uses it. */
export interface EpisodeEngine {
  create(spec: ContainerSpec): Promise<EpisodeContainer>;
  /** Attach a created container to a second network at a fixed address. */
  connect(network: string, container: EpisodeContainer, ipv4: string, aliases?: string[]): Promise<void>;
  /** Remove a container by name, whatever its state; a missing one is no error. */
  remove(name: string): Promise<void>;
  /** An image's own entrypoint followed by its command (what it runs when given none). */
  imageCommand(ref: string): Promise<string[]>;
}

/** The Docker implementation of the seam, on one engine client, under `runtime` (the sandbox's). */
export function dockerEpisodeEngine(docker: Docker, runtime: ContainerRuntime): EpisodeEngine {
  return {
    create: async (spec) =>
      dockerEpisodeContainer(docker, spec.name, await createContainer(docker, runtime, spec)),
    connect: (network, container, ipv4, aliases = []) =>
      connectNetwork(docker, network, container.id, aliases, ipv4),
    remove: (name) => removeContainer(docker, name),
    imageCommand: (ref) => dockerImageCommand(docker, ref),
  };
}

/** The image's `Config.Entrypoint` then `Config.Cmd`, from one inspect. */
async function dockerImageCommand(docker: Docker, ref: string): Promise<string[]> {
  const info = await docker.getImage(ref).inspect();
  return [...(info.Config?.Entrypoint ?? []), ...(info.Config?.Cmd ?? [])];
}

/** A dockerode container behind the EpisodeContainer interface. */
export function dockerEpisodeContainer(docker: Docker, name: string, c: Container): EpisodeContainer {
  return {
    name,
    id: c.id,
    start: () => startContainer(c),
    kill: async () => {
      await c.kill({ signal: "SIGKILL" });
    },
    stop: (graceMs) => stopContainer(c, graceMs),
    wait: (signal) => waitExit(c, signal),
    state: async () => {
      const info = await inspectContainer(c);
      return {
        running: Boolean(info.State.Running),
        exitCode: info.State.ExitCode,
        oomKilled: Boolean(info.State.OOMKilled),
      };
    },
    exec: (argv, opts) => execIn(c, argv, opts),
    stat: (path) => statPath(c, path),
    read: (path, cap) => getPath(c, path, cap),
    write: (dir, entries) => putFiles(c, dir, entries),
    openStdin: () => attachStdin(c),
    logs: (capBytes) => readLogs(c, capBytes),
    watchLayer: (bounds, signal, seen) => watchLayer(c, { ...bounds, docker }, signal, seen),
    layerBytes: () => layerBytes(c),
  };
}
