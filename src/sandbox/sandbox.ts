/**
 * The sandbox as one object: the engine connection, this process's session, the address pool,
 * the firewall and the reaper. Episodes open a scope, build their topology in it, and dispose it.
 */
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { InfraError } from "../errors.js";
import type { Logger } from "../log.js";
import { silentLogger } from "../log.js";
import { connectNetwork, EPISODE_DNS_UPSTREAM } from "./containers.js";
import { DNS_CVE, engineDnsVerdict } from "./dns.js";
import { connectDocker, type Docker, engine } from "./docker.js";
import { EngineWatch } from "./engine-watch.js";
import { installFirewall, METER_EPISODE_PORT } from "./firewall.js";
import { containerIdFromMountinfo, LABEL, newSession, type SandboxSession, uniqueName } from "./labels.js";
import { type EpisodeNetwork, NetworkPool } from "./networks.js";
import { type EpisodeScope, Reaper } from "./reaper.js";
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
}

export interface EpisodeTopology {
  agentNet: EpisodeNetwork;
  meterNet: EpisodeNetwork;
  /** Where the meter must listen (port METER_EPISODE_PORT) for the sidecar's meter:8790. */
  meterBindHost: string;
  meterPort: number;
  /** ExtraHosts entries for the sidecar (host mode: meter → the meter network's gateway). */
  sidecarExtraHosts: string[];
}

export class Sandbox {
  readonly session: SandboxSession;
  readonly networks: NetworkPool;
  readonly reaper: Reaper;
  /** Tells episodes whether the engine restarted under them. */
  readonly engineWatch: EngineWatch;
  readonly log: Logger;
  readonly poolCidr: string;

  private constructor(
    readonly docker: Docker,
    private readonly opts: SandboxOptions,
  ) {
    this.log = opts.log ?? silentLogger;
    this.session = newSession();
    this.poolCidr = opts.poolCidr ?? "10.213.0.0/16";
    this.networks = new NetworkPool(docker, { poolCidr: this.poolCidr, log: this.log });
    this.reaper = new Reaper(docker, this.session, this.log);
    this.engineWatch = new EngineWatch(docker, this.log, `${LABEL.session}=${this.session.id}`);
  }

  /** Connect, install the firewall, sweep leftovers of dead processes, start the periodic reaper. */
  static async open(opts: SandboxOptions = {}): Promise<Sandbox> {
    const docker = opts.docker ?? connectDocker(opts.socketPath);
    await engine("docker_unavailable", "no Docker engine answers", () => docker.ping());
    const sb = new Sandbox(docker, opts);
    await sb.warnOnDnsLeak();
    if ((opts.firewall ?? "iptables") === "iptables") {
      await installFirewall({ poolCidr: sb.poolCidr, meterPort: METER_EPISODE_PORT, log: sb.log });
    } else {
      sb.log.info("firewall.off");
    }
    const swept = await sb.reaper.sweep();
    if (swept.containers.length || swept.networks.length)
      sb.log.info({ containers: swept.containers.length, networks: swept.networks.length }, "reaper.startup");
    const every = opts.reapIntervalMs ?? 60_000;
    if (every > 0) sb.reaper.start(every);
    await sb.engineWatch.start();
    return sb;
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
        { engine: version, cve: DNS_CVE, reason: v.reason, upstream: EPISODE_DNS_UPSTREAM },
        "sandbox.engine_dns_leak",
      );
  }

  openScope(episodeId: string, ttlMs: number): EpisodeScope {
    return this.reaper.openScope(episodeId, ttlMs);
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

  /** Stop the periodic reaper and remove everything live episodes made (shutdown path). */
  async close(): Promise<void> {
    this.engineWatch.stop();
    this.reaper.stop();
    await this.reaper.disposeAll();
  }
}
