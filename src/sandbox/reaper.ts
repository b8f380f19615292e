/**
 * Nothing an episode makes outlives it. Each episode works inside an EpisodeScope that removes
 * every container and network it made on every exit path; the Reaper sweeps what a crashed or
 * killed process left behind: objects of this process that belong to no live episode, objects
 * of a dead process on this host (a pid that is gone, or a pid started again since: the boot label),
 * objects of a daemon container the engine no longer has, and anything past its expiry.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "../log.js";
import { silentLogger } from "../log.js";
import { type Docker, dockerMessage, ignoreGone } from "./docker.js";
import { LABEL, labelsFor, processBoot, type Role, type SandboxSession } from "./labels.js";
import type { ContainerRuntime } from "./runtime.js";

export type ReapReason = "not_live" | "owner_dead" | "expired";

/**
 * Pure: should an object with these labels be removed by `session`'s reaper now? `ownerAlive` says
 * whether a pid on this host is still the process that made the object (its boot label, when set);
 * `containerGone` whether the engine no longer has a container (the owner's, when it ran in one).
 */
export function reapDecision(
  labels: Readonly<Record<string, string>>,
  session: SandboxSession,
  liveEpisodes: ReadonlySet<string>,
  nowUnix: number,
  ownerAlive: (pid: number, boot: string | undefined) => boolean,
  containerGone: (id: string) => boolean = () => false,
): ReapReason | undefined {
  const owner = labels[LABEL.session];
  if (owner === undefined) return undefined;
  if (owner === session.id) {
    const ep = labels[LABEL.episode];
    return ep !== undefined && liveEpisodes.has(ep) ? undefined : "not_live";
  }
  const expires = Number(labels[LABEL.expires]);
  if (Number.isFinite(expires) && expires < nowUnix) return "expired";
  const container = labels[LABEL.container];
  if (container !== undefined && container !== session.container && containerGone(container))
    return "owner_dead";
  const pid = Number(labels[LABEL.pid]);
  if (
    labels[LABEL.host] === session.host &&
    Number.isInteger(pid) &&
    pid > 0 &&
    !ownerAlive(pid, labels[LABEL.boot])
  )
    return "owner_dead";
  return undefined;
}

export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The pid is alive and, when the object names the start it belongs to, started then (not a reused pid). */
export function ownerAlive(pid: number, boot: string | undefined): boolean {
  if (!pidAlive(pid)) return false;
  if (boot === undefined) return true;
  const now = processBoot(pid);
  // /proc unreadable: the pid check is all there is.
  return now === undefined || now === boot;
}

export interface SweepResult {
  containers: string[];
  networks: string[];
}

/**
 * Remove a network even when endpoints are still attached (a daemon container joined as "meter").
 * Right after its containers were force-removed the engine may still count their endpoints for a
 * moment: retry briefly before giving up (the reaper tries again later).
 */
export async function removeNetworkForcefully(docker: Docker, idOrName: string): Promise<void> {
  const net = docker.getNetwork(idOrName);
  for (let attempt = 0; ; attempt++) {
    try {
      await net.remove();
      return;
    } catch (err) {
      const msg = dockerMessage(err);
      if ((err as { statusCode?: number }).statusCode === 404) return;
      if (!/active endpoints/i.test(msg) || attempt >= 3) throw err;
    }
    const info = (await net.inspect().catch(() => undefined)) as
      | { Containers?: Record<string, unknown> }
      | undefined;
    for (const id of Object.keys(info?.Containers ?? {})) {
      await ignoreGone(() => net.disconnect({ Container: id, Force: true }));
    }
    await sleep(200 * (attempt + 1));
  }
}

/** Everything one episode made, removed together. */
export class EpisodeScope {
  private readonly containers = new Set<string>();
  private readonly networks = new Set<string>();
  /** Networks made late in the episode (the grader's): left alone by releaseNetworks(). */
  private readonly lateNetworks = new Set<string>();
  private disposing: Promise<void> | undefined;
  /** Names of containers to detach from our networks before removing them (the daemon itself). */
  private readonly detach: Array<{ network: string; container: string }> = [];
  /** Run first on dispose (e.g. the meter relay's link); failures are ignored. */
  private readonly cleanups: Array<() => void | Promise<void>> = [];

  constructor(
    readonly docker: Docker,
    readonly session: SandboxSession,
    readonly episodeId: string,
    readonly expiresAtUnix: number,
    /** The runtime of this episode's code: the sandbox's episode runtime, runc when pinned. */
    readonly runtime: ContainerRuntime,
    private readonly onDisposed: (scope: EpisodeScope) => void,
    private readonly log: Logger,
  ) {}

  /** runc for a scenario that cannot run under gVisor (Sandbox.openScope): a label its containers carry. */
  pinnedRuntime: string | undefined;

  labels(role: Role): Record<string, string> {
    const labels = labelsFor(this.session, role, this.episodeId, this.expiresAtUnix);
    return this.pinnedRuntime ? { ...labels, [LABEL.runtime]: this.pinnedRuntime } : labels;
  }

  /** Record before creating: a crash between create and record must still be cleaned by name. */
  trackContainer(name: string): void {
    this.containers.add(name);
  }

  /** `late`: made after the episode's own networks (the grader's); releaseNetworks() leaves it alone. */
  trackNetwork(name: string, late = false): void {
    (late ? this.lateNetworks : this.networks).add(name);
  }

  /** Remove a tracked network now (its user is done with it); failures are left for dispose(). */
  async removeNetwork(name: string): Promise<void> {
    try {
      await removeNetworkForcefully(this.docker, name);
      this.networks.delete(name);
      this.lateNetworks.delete(name);
    } catch {
      // dispose() tries again and logs what it could not remove
    }
  }

  detachOnDispose(network: string, container: string): void {
    this.detach.push({ network, container });
  }

  /** Something of ours (not an engine object) that ends with the episode. */
  onDispose(fn: () => void | Promise<void>): void {
    this.cleanups.push(fn);
  }

  get disposed(): boolean {
    return this.disposing !== undefined;
  }

  /**
   * Remove the episode's networks now, once nothing on them is needed any more (the verifier runs
   * without a network): their teardown then overlaps the grading instead of following it. Those
   * that fail stay tracked for dispose(). Never throws.
   */
  async releaseNetworks(): Promise<void> {
    for (const d of this.detach.splice(0)) {
      await ignoreGone(() =>
        this.docker.getNetwork(d.network).disconnect({ Container: d.container, Force: true }),
      ).catch(() => undefined);
    }
    await Promise.all(
      [...this.networks].map(async (name) => {
        try {
          await removeNetworkForcefully(this.docker, name);
          this.networks.delete(name);
        } catch {
          // left for dispose(), which logs what it could not remove
        }
      }),
    );
  }

  /** Idempotent; never throws (failures are logged and left to the reaper). */
  dispose(): Promise<void> {
    this.disposing ??= (async () => {
      const failures: string[] = [];
      for (const fn of this.cleanups.splice(0)) await Promise.resolve(fn()).catch(() => undefined);
      await Promise.all(
        [...this.containers].map((name) =>
          ignoreGone(() => this.docker.getContainer(name).remove({ force: true, v: true })).catch((err) => {
            failures.push(`container ${name}: ${dockerMessage(err)}`);
          }),
        ),
      );
      for (const d of this.detach) {
        await ignoreGone(() =>
          this.docker.getNetwork(d.network).disconnect({ Container: d.container, Force: true }),
        ).catch(() => undefined);
      }
      await Promise.all(
        [...this.networks, ...this.lateNetworks].map((name) =>
          removeNetworkForcefully(this.docker, name).catch((err) => {
            failures.push(`network ${name}: ${dockerMessage(err)}`);
          }),
        ),
      );
      if (failures.length) this.log.warn({ episode: this.episodeId, failures }, "scope.dispose.incomplete");
      this.onDisposed(this);
    })();
    return this.disposing;
  }
}

export class Reaper {
  private readonly live = new Map<string, EpisodeScope>();
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<SweepResult> | undefined;

  /**
   * `ownerDocker`: the engine that runs the daemon's own container, asked whether an owner container
   * still exists (on another engine of the pool that container is never there: without it, owner
   * containers are not judged by their absence).
   */
  constructor(
    private readonly docker: Docker,
    readonly session: SandboxSession,
    private readonly log: Logger = silentLogger,
    private readonly ownerDocker: Docker | null = docker,
  ) {}

  /** Open a scope: the episode is live (its objects are safe from this reaper) until disposed. */
  openScope(episodeId: string, ttlMs: number, runtime: ContainerRuntime): EpisodeScope {
    const scope = new EpisodeScope(
      this.docker,
      this.session,
      episodeId,
      Date.now() / 1000 + ttlMs / 1000,
      runtime,
      (s) => {
        if (this.live.get(s.episodeId) === s) this.live.delete(s.episodeId);
      },
      this.log,
    );
    this.live.set(episodeId, scope);
    return scope;
  }

  liveEpisodes(): string[] {
    return [...this.live.keys()];
  }

  sweep(): Promise<SweepResult> {
    this.sweeping ??= this.doSweep().finally(() => {
      this.sweeping = undefined;
    });
    return this.sweeping;
  }

  /** Owner containers named by these labels that the engine no longer has. */
  private async goneContainers(
    labelSets: ReadonlyArray<Record<string, string> | undefined>,
  ): Promise<Set<string>> {
    const ids = new Set<string>();
    for (const l of labelSets) {
      const id = l?.[LABEL.container];
      if (id && id !== this.session.container) ids.add(id);
    }
    const gone = new Set<string>();
    const owner = this.ownerDocker;
    if (!owner) return gone;
    await Promise.all(
      [...ids].map(async (id) => {
        try {
          await owner.getContainer(id).inspect();
        } catch (err) {
          if ((err as { statusCode?: number }).statusCode === 404) gone.add(id);
        }
      }),
    );
    return gone;
  }

  private async doSweep(): Promise<SweepResult> {
    const now = Date.now() / 1000;
    const live = new Set(this.live.keys());
    const removed: SweepResult = { containers: [], networks: [] };
    const filters = { label: [LABEL.session] };
    const containers = await this.docker.listContainers({ all: true, filters });
    const networks = await this.docker.listNetworks({ filters });
    const gone = await this.goneContainers([...containers, ...networks].map((o) => o.Labels));
    const isGone = (id: string) => gone.has(id);
    await Promise.all(
      containers.map(async (c) => {
        const why = reapDecision(c.Labels ?? {}, this.session, live, now, ownerAlive, isGone);
        if (!why) return;
        try {
          await ignoreGone(() => this.docker.getContainer(c.Id).remove({ force: true, v: true }));
          removed.containers.push(c.Id);
          this.log.info(
            { container: c.Names?.[0], episode: c.Labels?.[LABEL.episode], why },
            "reaper.container",
          );
        } catch (err) {
          this.log.warn({ container: c.Id, err: dockerMessage(err) }, "reaper.container.failed");
        }
      }),
    );
    for (const n of networks) {
      const why = reapDecision(n.Labels ?? {}, this.session, live, now, ownerAlive, isGone);
      if (!why) continue;
      try {
        await removeNetworkForcefully(this.docker, n.Id);
        removed.networks.push(n.Id);
        this.log.info({ network: n.Name, episode: n.Labels?.[LABEL.episode], why }, "reaper.network");
      } catch (err) {
        this.log.warn({ network: n.Name, err: dockerMessage(err) }, "reaper.network.failed");
      }
    }
    return removed;
  }

  start(intervalMs: number): void {
    this.stop();
    this.timer = setInterval(() => {
      this.sweep().catch((err) => this.log.warn({ err: (err as Error).message }, "reaper.sweep.failed"));
    }, intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Shutdown path: remove everything every live episode made. */
  async disposeAll(): Promise<void> {
    await Promise.all([...this.live.values()].map((s) => s.dispose()));
  }
}
