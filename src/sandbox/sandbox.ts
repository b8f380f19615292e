/**
 * The sandbox as one object: the engine connection, this process's session, the address pool,
 * the firewall and the reaper. Episodes open a scope, build their topology in it, and dispose it.
 */
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { InfraError } from "../errors.js";
import type { Logger } from "../log.js";
import { silentLogger } from "../log.js";
import { EPISODE_DNS_UPSTREAM } from "./container-spec.js";
import { connectNetwork, createContainer, startContainer, waitExit } from "./containers.js";
import { DNS_CVE, engineDnsVerdict } from "./dns.js";
import { boundEngineCalls, type Container, connectDocker, type Docker, engine } from "./docker.js";
import { installEngineFirewall } from "./engine-firewall.js";
import { EngineWatch } from "./engine-watch.js";
import { dockerEpisodeEngine, type EpisodeEngine } from "./episode-engine.js";
import { installFirewall, METER_EPISODE_PORT } from "./firewall.js";
import { containerIdFromMountinfo, LABEL, newSession, type SandboxSession, uniqueName } from "./labels.js";
import { attachRelay } from "./meter-link.js";
import { type EpisodeNetwork, NetworkPool } from "./networks.js";
import { type EpisodeScope, Reaper } from "./reaper.js";
import {
  chooseEpisodeRuntime,
  type EpisodeRuntimeSetting,
  engineRuntimes,
  pinnedRuntime,
  type ResolvedRuntime,
  RUNC_RUNTIME,
} from "./runtime.js";
import { cidrSize, intToIp, parseCidr } from "./subnet.js";

/**
 * This process's own container, when it runs in one (labels.ts reads the bind mounts Docker makes).
 * Falls back to the hostname (Docker's default is the id).
 */
export function ownContainerId(mountinfo?: string): string {
  let text = mountinfo;
  if (text === undefined) {
    try {
      text = readFileSync("/proc/self/mountinfo", "utf8");
    } catch {
      text = "";
    }
  }
  return containerIdFromMountinfo(text) ?? hostname();
}

/**
 * The daemon's own container takes the last host address of the meter network: the episode
 * places the sidecar at fixed low addresses (.2, .3), and a dynamic join would race them for .2.
 */
export function daemonAddressOn(subnet: string): string {
  const c = parseCidr(subnet);
  return intToIp(c.base + cidrSize(c) - 2);
}

export interface SandboxOptions {
  docker?: Docker;
  socketPath?: string;
  /** EPISODE_SUBNET_POOL */
  poolCidr?: string;
  /** "iptables" (default) installs the host firewall for episode bridges; "off" is an explicit operator choice. */
  firewall?: "iptables" | "off";
  /** DAEMON_IN_CONTAINER: the meter runs in this process's own container, which joins each meter network. */
  daemonInContainer?: boolean;
  /** The daemon's own container (id or name); default: the hostname Docker gives a container. */
  selfContainer?: string;
  /** Periodic sweep of leftovers (ms); 0 disables the timer (a start-up sweep always runs). */
  reapIntervalMs?: number;
  log?: Logger;
  /**
   * An engine other than the daemon's own (the pool's remote engines): the meter is reached through
   * a relay container of `relayImage` on each episode's meter network (src/sandbox/meter-link.ts), and
   * the episode firewall is installed on the engine's host through its API ("iptables" then means
   * that; "off" skips it). The image must be on the engine.
   */
  remote?: { relayImage: string };
  /** The engine running the daemon's own container, for the reaper (default: this engine; null: none). */
  ownerDocker?: Docker | null;
  /**
   * EPISODE_RUNTIME: the OCI runtime of the containers that run miners' and models' code
   * (src/sandbox/runtime.ts), resolved against the engine's runtimes at every start. No default:
   * every sandbox names it (`runc` where only graders or helpers run).
   */
  episodeRuntime: EpisodeRuntimeSetting;
}

/** What the sandbox reads of an episode's scenario (src/episode's EpisodeScenario has it). */
export interface ScenarioRuntimeNeeds {
  name: string;
  task: { metadata?: { not_under_gvisor?: string | undefined } | undefined };
}

/** Loopback addresses taken by remote episodes' meter listeners in this process. */
const loopbackInUse = new Set<string>();

/**
 * A loopback address of this host for one remote episode's meter listener (127.214.0.0/16: Linux
 * routes all of 127/8 to lo). The relay's link dials it; nothing outside this host can.
 */
export function allocateLoopback(): string {
  for (let i = 0; i < 1000; i++) {
    const a = `127.214.${Math.floor(Math.random() * 256)}.${1 + Math.floor(Math.random() * 254)}`;
    if (!loopbackInUse.has(a)) {
      loopbackInUse.add(a);
      return a;
    }
  }
  throw new InfraError("loopback_exhausted", "no free loopback address for a meter listener");
}

export const RELAY_LIMITS = { cpus: 0.5, memoryBytes: 256 * 1024 * 1024, pidsLimit: 64 };

/** A relay whose link ended: out of memory (the engine's word, once it has stopped), or otherwise lost. */
async function relayLoss(c: Container): Promise<MeterLoss> {
  await waitExit(c, AbortSignal.timeout(10_000)).catch(() => undefined);
  const info = await c.inspect().catch(() => undefined);
  return info?.State?.OOMKilled ? "relay_oom" : "relay_lost";
}

/**
 * Why an episode on another engine lost its meter: its relay ran out of memory (it carries that
 * episode's sidecar alone, so only the policy's own traffic can fill it: the policy's fault), or
 * the relay or the link to it went otherwise (infra).
 */
export type MeterLoss = "relay_oom" | "relay_lost";

export interface EpisodeTopology {
  agentNet: EpisodeNetwork;
  meterNet: EpisodeNetwork;
  /** Where the meter must listen (port METER_EPISODE_PORT) for the sidecar's meter:8790. */
  meterBindHost: string;
  meterPort: number;
  /** ExtraHosts entries for the sidecar (host mode: meter → the meter network's gateway). */
  sidecarExtraHosts: string[];
  /**
   * Where this process reaches `ip:port` of the meter network (the sidecar's health), when not
   * directly: on a remote engine, a loopback listener the relay carries. Absent: directly.
   */
  reach?: (ip: string, port: number) => Promise<{ host: string; port: number }>;
  /** Set once the episode's meter relay is gone (remote engines only), before its sidecar is stopped. */
  meterLoss?: () => MeterLoss | undefined;
}

export class Sandbox {
  readonly session: SandboxSession;
  readonly networks: NetworkPool;
  readonly reaper: Reaper;
  /** Tells episodes whether the engine restarted under them. */
  readonly engineWatch: EngineWatch;
  readonly log: Logger;
  readonly poolCidr: string;
  /** The engine client (the connection itself; the episode runtime is carried beside it, not by it). */
  readonly docker: Docker;
  /** The episode runtime resolved at the last start, and the seam made for it. */
  private resolved: { runtime: ResolvedRuntime; engine: EpisodeEngine } | undefined;

  private constructor(
    docker: Docker,
    private readonly opts: SandboxOptions,
  ) {
    this.docker = docker;
    this.log = opts.log ?? silentLogger;
    this.session = newSession();
    this.poolCidr = opts.poolCidr ?? "10.213.0.0/16";
    this.networks = new NetworkPool(docker, { poolCidr: this.poolCidr, log: this.log });
    this.reaper = new Reaper(
      docker,
      this.session,
      this.log,
      opts.ownerDocker === undefined ? docker : opts.ownerDocker,
    );
    this.engineWatch = new EngineWatch(docker, this.log, `${LABEL.session}=${this.session.id}`);
  }

  /** Connect, install the firewall, sweep leftovers of dead processes, start the periodic reaper. */
  static async open(opts: SandboxOptions): Promise<Sandbox> {
    const sb = Sandbox.create(opts);
    await sb.start();
    return sb;
  }

  /** The object alone, no I/O (the pool opens engines that may not answer yet, and keeps their session). */
  static create(opts: SandboxOptions): Sandbox {
    // Every plain engine call of the sandbox and its episodes has a deadline (idempotent: a client
    // already bounded, by connectDocker or the pool, keeps its figures).
    const docker = boundEngineCalls(opts.docker ?? connectDocker(opts.socketPath));
    return new Sandbox(docker, opts);
  }

  private started = false;

  /**
   * The engine answers, the firewall is in place, leftovers are swept; then the periodic reaper and
   * the engine watch run. Again after an outage (the pool's probe): the same session, so what this
   * process left there during the outage is its own and goes at this sweep.
   */
  async start(): Promise<void> {
    await engine("docker_unavailable", "no Docker engine answers", () => this.docker.ping());
    if (!this.started) await this.warnOnDnsLeak();
    await this.resolveEpisodeRuntime();
    const opts = this.opts;
    if ((opts.firewall ?? "iptables") === "iptables") {
      if (opts.remote)
        await installEngineFirewall(this.docker, {
          image: opts.remote.relayImage,
          session: this.session,
          log: this.log,
        });
      else await installFirewall({ poolCidr: this.poolCidr, meterPort: METER_EPISODE_PORT, log: this.log });
    } else if (!this.started) {
      this.log.info("firewall.off");
    }
    const swept = await this.reaper.sweep();
    if (swept.containers.length || swept.networks.length)
      this.log.info(
        { containers: swept.containers.length, networks: swept.networks.length },
        "reaper.startup",
      );
    if (this.started) return;
    this.started = true;
    const every = opts.reapIntervalMs ?? 60_000;
    if (every > 0) this.reaper.start(every);
    await this.engineWatch.start();
  }

  /** The episode runtime resolved at the last start (undefined before the first). */
  get episodeRuntime(): ResolvedRuntime | undefined {
    return this.resolved?.runtime;
  }

  /**
   * The seam episodes drive their containers through (episode-engine.ts), on `docker` under the
   * episode runtime of the last start. A sandbox never started has no runtime, so no engine.
   */
  get episodeEngine(): EpisodeEngine {
    return this.current().engine;
  }

  private current(): { runtime: ResolvedRuntime; engine: EpisodeEngine } {
    if (this.resolved) return this.resolved;
    throw new InfraError(
      "sandbox_not_started",
      "the sandbox has not resolved its episode runtime yet (Sandbox.start)",
    );
  }

  /**
   * Replace the episode runtime until the next start resolves EPISODE_RUNTIME again: a benchmark
   * measuring another registration of gVisor (benchmarks/runtime.ts `--gvisor runsc-kvm`).
   */
  useEpisodeRuntime(runtime: ResolvedRuntime): void {
    this.resolved = { runtime, engine: dockerEpisodeEngine(this.docker, runtime) };
  }

  /** EPISODE_RUNTIME against the engine's runtimes (again at every start: an engine can change). */
  private async resolveEpisodeRuntime(): Promise<void> {
    const setting = this.opts.episodeRuntime;
    const available = setting === "runc" ? [] : await engineRuntimes(this.docker);
    const choice = chooseEpisodeRuntime(setting, available);
    const changed = this.resolved?.runtime.name !== choice.name;
    this.useEpisodeRuntime(choice);
    if (!changed) return;
    if (choice.fallback)
      this.log.warn({ setting, runtime: choice.name, reason: choice.fallback }, "sandbox.episode_runtime");
    else this.log.info({ setting, runtime: choice.name }, "sandbox.episode_runtime");
  }

  /** Engines known to leak DNS from internal networks are named; episodes get --dns 127.0.0.1 anyway. */
  private async warnOnDnsLeak(): Promise<void> {
    const version = await this.docker
      .version()
      .then((v) => v.Version)
      .catch(() => undefined);
    if (version === undefined) return;
    const v = engineDnsVerdict(version);
    if (v.affected)
      this.log.warn(
        { engineVersion: version, cve: DNS_CVE, reason: v.reason, upstream: EPISODE_DNS_UPSTREAM },
        "sandbox.engine_dns_leak",
      );
  }

  /**
   * `scenario`: the episode's scenario. One that declared it cannot run under gVisor (task.toml
   * `[metadata] not_under_gvisor`) has its containers run under runc (runtime.ts `pinnedRuntime`).
   */
  openScope(episodeId: string, ttlMs: number, scenario?: ScenarioRuntimeNeeds): EpisodeScope {
    const { runtime } = this.current();
    const reason = scenario?.task.metadata?.not_under_gvisor;
    const pinned = pinnedRuntime(runtime, scenario?.name ?? "", reason);
    const scope = this.reaper.openScope(episodeId, ttlMs, pinned ? RUNC_RUNTIME : runtime);
    if (pinned) {
      scope.pinnedRuntime = pinned;
      this.log.warn(
        { episode: episodeId, scenario: scenario?.name, runtime: pinned, reason },
        "sandbox.scenario_not_under_gvisor",
      );
    }
    return scope;
  }

  /** The runtime of a scenario's episode code (what `openScope` gives it); `scenarios check` reports it. */
  runtimeFor(scenario: ScenarioRuntimeNeeds): string {
    const reason = scenario.task.metadata?.not_under_gvisor;
    const { runtime } = this.current();
    return pinnedRuntime(runtime, scenario.name, reason) ?? runtime.name;
  }

  /**
   * The two internal networks of an episode and how the sidecar reaches the meter:
   * host mode binds the meter on the meter network's gateway (the bridge's IP on the host) and
   * gives the sidecar `meter` as an extra host; container mode joins our container to the
   * network with the alias `meter`.
   */
  async createTopology(scope: EpisodeScope): Promise<EpisodeTopology> {
    const base = `trajrl-${uniqueName(scope.episodeId)}`;
    const agentName = `${base}-agent`;
    const meterName = `${base}-meter`;
    scope.trackNetwork(agentName);
    scope.trackNetwork(meterName);
    const [agentNet, meterNet] = await Promise.all([
      this.networks.create("agent", agentName, scope.labels("net-agent")),
      this.networks.create("meter", meterName, scope.labels("net-meter")),
    ]);
    if (this.opts.remote) return this.relayTopology(scope, base, agentNet, meterNet);
    if (!this.opts.daemonInContainer) {
      return {
        agentNet,
        meterNet,
        meterBindHost: meterNet.gateway,
        meterPort: METER_EPISODE_PORT,
        sidecarExtraHosts: [`meter:${meterNet.gateway}`],
      };
    }
    const self = this.opts.selfContainer ?? ownContainerId();
    scope.detachOnDispose(meterName, self);
    await connectNetwork(this.docker, meterName, self, ["meter"], daemonAddressOn(meterNet.subnet));
    const info = await engine("container_inspect_failed", `inspecting own container ${self}`, () =>
      this.docker.getContainer(self).inspect(),
    );
    const ip = info.NetworkSettings?.Networks?.[meterName]?.IPAddress;
    if (!ip)
      throw new InfraError(
        "meter_network_join_failed",
        `own container ${self} got no address on ${meterName}`,
      );
    return { agentNet, meterNet, meterBindHost: ip, meterPort: METER_EPISODE_PORT, sidecarExtraHosts: [] };
  }

  /**
   * A remote engine's topology: the relay container joins the meter network as `meter` (the last
   * host address, as the daemon's own container does in container mode) and carries the sidecar's
   * connections to a loopback address of this host, where the episode's meter listener binds.
   */
  private async relayTopology(
    scope: EpisodeScope,
    base: string,
    agentNet: EpisodeNetwork,
    meterNet: EpisodeNetwork,
  ): Promise<EpisodeTopology> {
    const bindHost = allocateLoopback();
    scope.onDispose(() => {
      loopbackInUse.delete(bindHost);
    });
    const name = `${base}-relay`;
    scope.trackContainer(name);
    const c = await createContainer(this.docker, RUNC_RUNTIME, {
      name,
      image: this.opts.remote!.relayImage,
      cmd: ["node", "/opt/trajrl/relay.cjs"],
      env: { RELAY_PORT: String(METER_EPISODE_PORT) },
      user: "65534:65534",
      labels: scope.labels("relay"),
      limits: RELAY_LIMITS,
      network: {
        kind: "network",
        name: meterNet.name,
        aliases: ["meter"],
        ipv4: daemonAddressOn(meterNet.subnet),
      },
      readOnlyRoot: true,
      dropAllCaps: true,
      stdin: true,
      logDriver: "none",
    });
    let loss: MeterLoss | undefined;
    const link = await attachRelay(
      c,
      { host: bindHost, port: METER_EPISODE_PORT },
      this.log.child({ relay: name }),
      30_000,
      // The meter is gone from this episode (its relay or the link to it ended): say why, then stop
      // its sidecar from outside (the episode reads `meterLoss` to tell the policy's fault from ours).
      () =>
        void relayLoss(c).then((why) => {
          loss = why;
          this.log.warn({ episode: scope.episodeId, relay: name, why }, "relay.lost");
          return this.killSidecars(scope);
        }),
    );
    scope.onDispose(() => link.close());
    await startContainer(c);
    try {
      await link.ready;
    } catch (err) {
      throw new InfraError(
        "relay_not_ready",
        `${(err as Error).message}: ${link.stderrTail().trim().slice(-300)}`,
        {
          cause: err,
        },
      );
    }
    return {
      agentNet,
      meterNet,
      meterBindHost: bindHost,
      meterPort: METER_EPISODE_PORT,
      sidecarExtraHosts: [],
      reach: (ip, port) => link.forward(ip, port),
      meterLoss: () => loss,
    };
  }

  private async killSidecars(scope: EpisodeScope): Promise<void> {
    if (scope.disposed) return;
    try {
      const list = await this.docker.listContainers({
        filters: { label: [`${LABEL.episode}=${scope.episodeId}`, `${LABEL.role}=sidecar`] },
      });
      await Promise.all(
        list.map((s) =>
          this.docker
            .getContainer(s.Id)
            .kill({ signal: "SIGKILL" })
            .catch(() => undefined),
        ),
      );
      this.log.warn({ episode: scope.episodeId, sidecars: list.length }, "relay.lost_sidecar_stopped");
    } catch (err) {
      // The engine itself is away: the pool's loss handling stops the episode.
      this.log.warn(
        { episode: scope.episodeId, err: (err as Error).message },
        "relay.lost_sidecar_stop_failed",
      );
    }
  }

  /** Stop the periodic reaper and remove everything live episodes made (shutdown path). */
  async close(): Promise<void> {
    this.engineWatch.stop();
    this.reaper.stop();
    await this.reaper.disposeAll();
    // What a scope could not remove (an engine that was away meanwhile) goes now, while it answers.
    await this.reaper
      .sweep()
      .catch((err) => this.log.warn({ err: (err as Error).message }, "reaper.final_sweep_failed"));
  }
}
