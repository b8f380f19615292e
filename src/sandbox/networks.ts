/**
 * Per-episode internal networks from a dedicated address pool. Which blocks are taken is read
 * from the engine each time (no state of ours to lose on restart); the engine itself rejects an
 * overlapping subnet, so two processes racing for the same block simply move on to the next one.
 */
import { randomBytes, randomInt } from "node:crypto";
import { InfraError } from "../errors.js";
import type { Logger } from "../log.js";
import { silentLogger } from "../log.js";
import { type Docker, dockerMessage, dockerStatus, engine, ignoreGone } from "./docker.js";
import { AGENT_BRIDGE_PREFIX, GRADER_BRIDGE_PREFIX, METER_BRIDGE_PREFIX } from "./firewall.js";
import { blockCount, type Cidr, formatCidr, gatewayOf, parseCidr, pickFreeBlock } from "./subnet.js";

/**
 * `agent` and `meter`: an episode's two internal networks. `grader`: the registry bench's verifier
 * (VERIFIER_NETWORK=bridge, upstream's `bridge`): a route out for graders that fetch tools, its
 * bridge (`tjv…`) cut from the host by the firewall's TRAJRL-GRADER chain.
 */
export type NetworkKind = "agent" | "meter" | "grader";

const BRIDGE_PREFIX: Record<NetworkKind, string> = {
  agent: AGENT_BRIDGE_PREFIX,
  meter: METER_BRIDGE_PREFIX,
  grader: GRADER_BRIDGE_PREFIX,
};

export interface EpisodeNetwork {
  id: string;
  name: string;
  kind: NetworkKind;
  subnet: string;
  /** The bridge's address on the host (the meter binds here when the daemon runs on the host). */
  gateway: string;
  /** Host interface name (firewall rules match its prefix). */
  bridge: string;
}

export interface NetworkPoolOptions {
  poolCidr: string;
  log?: Logger;
}

const MAX_ATTEMPTS = 32;

export class NetworkPool {
  readonly pool: Cidr;
  private readonly log: Logger;
  /** Blocks claimed by creations in flight in this process: our own calls never race each other. */
  private readonly claimed = new Set<number>();

  constructor(
    private readonly docker: Docker,
    opts: NetworkPoolOptions,
  ) {
    this.pool = parseCidr(opts.poolCidr);
    blockCount(this.pool); // validates the size early
    this.log = opts.log ?? silentLogger;
  }

  /** Subnets every existing Docker network uses (ours and anyone else's). */
  async usedSubnets(): Promise<Cidr[]> {
    const nets = await engine("network_list_failed", "listing networks", () => this.docker.listNetworks());
    const used: Cidr[] = [];
    for (const n of nets) {
      for (const c of n.IPAM?.Config ?? []) {
        const s = (c as { Subnet?: string }).Subnet;
        if (s && /^\d+\.\d+\.\d+\.\d+\/\d+$/.test(s)) used.push(parseCidr(s));
      }
    }
    return used;
  }

  async create(kind: NetworkKind, name: string, labels: Record<string, string>): Promise<EpisodeNetwork> {
    const skip = new Set<number>();
    const start = randomInt(0, blockCount(this.pool));
    let lastErr = "";
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const used = await this.usedSubnets();
      const free = pickFreeBlock(this.pool, used, start, new Set([...skip, ...this.claimed]));
      if (!free)
        throw new InfraError(
          "subnet_pool_exhausted",
          `no free /28 left in EPISODE_SUBNET_POOL ${formatCidr(this.pool)} (${used.length} networks exist)`,
        );
      const subnet = formatCidr(free.block);
      const gateway = gatewayOf(free.block);
      const bridge = `${BRIDGE_PREFIX[kind]}${randomBytes(6).toString("hex")}`;
      const egress = kind === "grader";
      this.claimed.add(free.index);
      try {
        const net = await this.docker.createNetwork({
          Name: name,
          Driver: "bridge",
          // No route out: internal bridges are not masqueraded nor forwarded (the grader's is both).
          Internal: !egress,
          CheckDuplicate: true,
          Attachable: false,
          IPAM: { Driver: "default", Config: [{ Subnet: subnet, Gateway: gateway }] },
          Options: {
            "com.docker.network.bridge.name": bridge,
            "com.docker.network.bridge.enable_icc": String(!egress),
            "com.docker.network.bridge.enable_ip_masquerade": String(egress),
          },
          Labels: labels,
        });
        this.log.debug({ network: name, subnet, bridge }, "network.created");
        return { id: net.id, name, kind, subnet, gateway, bridge };
      } catch (err) {
        const msg = dockerMessage(err);
        // Another process (or a network outside our view a moment ago) took the block: try the next one.
        if (/overlap|address already in use|conflicts with/i.test(msg)) {
          skip.add(free.index);
          lastErr = msg;
          continue;
        }
        throw new InfraError("network_create_failed", `creating network ${name} (${subnet}): ${msg}`, {
          cause: err,
          detail: { status: dockerStatus(err) },
        });
      } finally {
        // Once created the engine lists it; a failed block is in `skip`.
        this.claimed.delete(free.index);
      }
    }
    throw new InfraError(
      "network_create_failed",
      `creating network ${name}: ${lastErr} (after ${MAX_ATTEMPTS} tries)`,
    );
  }

  async remove(idOrName: string): Promise<void> {
    await engine("network_remove_failed", `removing network ${idOrName}`, () =>
      ignoreGone(() => this.docker.getNetwork(idOrName).remove()),
    );
  }
}
