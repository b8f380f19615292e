/**
 * Helpers for the sandbox/episode integration tests: a test sandbox on the real engine, counts of
 * what a session left behind, and tiny TCP servers/probes that need nothing but the
 * debian:bookworm-slim image (perl-base and bash are always there).
 */
import { randomBytes } from "node:crypto";
import type Docker from "dockerode";
import { z } from "zod";
import { EPISODE_RUNTIME_SETTINGS } from "../../src/config.js";
import { createContainer, type EpisodeScope, SIDECAR_LIMITS } from "../../src/sandbox/index.js";
import { LABEL } from "../../src/sandbox/labels.js";
import { Sandbox, type SandboxOptions } from "../../src/sandbox/sandbox.js";
import { requireDocker } from "./docker.js";

export const BASE_IMAGE = "debian:bookworm-slim";

/**
 * The runtime test sandboxes give episode containers: EPISODE_RUNTIME as vitest.config.ts sets it
 * per project (runc for the suite, runsc for the files the `gvisor` project runs again), else runc.
 */
export const TEST_EPISODE_RUNTIME = z
  .enum(EPISODE_RUNTIME_SETTINGS)
  .parse(process.env.EPISODE_RUNTIME || "runc");

export async function openTestSandbox(opts: Partial<SandboxOptions> = {}): Promise<Sandbox> {
  const docker = await requireDocker();
  return Sandbox.open({ docker, reapIntervalMs: 0, episodeRuntime: TEST_EPISODE_RUNTIME, ...opts });
}

/** Containers and networks carrying a session's label (all of them, running or not). */
export async function countLabelled(
  docker: Docker,
  session: string,
  episode?: string,
): Promise<{ containers: number; networks: number }> {
  const label = [`${LABEL.session}=${session}`];
  if (episode) label.push(`${LABEL.episode}=${episode}`);
  const [c, n] = await Promise.all([
    docker.listContainers({ all: true, filters: { label } }),
    docker.listNetworks({ filters: { label } }),
  ]);
  return { containers: c.length, networks: n.length };
}

/** A one-line perl TCP server answering "pong <name>" to every connection. */
export function perlServer(port: number, name: string): string[] {
  return [
    "perl",
    "-MIO::Socket::INET",
    "-e",
    `$|=1; my $s = IO::Socket::INET->new(LocalAddr => "0.0.0.0", LocalPort => ${port}, Listen => 16, ReuseAddr => 1) or die "listen: $!"; print "listening\\n"; while (my $c = $s->accept) { print $c "pong ${name}\\n"; close $c }`,
  ];
}

/**
 * A shell script that probes every "host:port" in parallel and prints "host:port=<first line>"
 * or "host:port=BLOCKED" (connect refused, dropped or timed out within `seconds`).
 */
export function probeScript(targets: readonly string[], seconds = 3): string[] {
  const lines = targets.map((t) => {
    const [host, port] = t.split(":");
    return `( r=$(timeout ${seconds} bash -c 'exec 3<>/dev/tcp/${host}/${port} && head -n1 <&3' 2>/dev/null); echo "${t}=\${r:-BLOCKED}" ) &`;
  });
  return ["bash", "-c", `${lines.join("\n")}\nwait`];
}

export function parseProbe(stdout: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of stdout.split("\n")) {
    const i = line.indexOf("=");
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1).trim();
  }
  return out;
}

/** The isolation tests' control network: ours, on a bridge name outside the firewalled prefixes. */
export const OTHER_NET = { subnet: "10.214.253.0/28", gateway: "10.214.253.1" } as const;

/** Create the control network `trajrl-<episode>-other` in the scope (removed with it); its name. */
export async function createOtherNetwork(
  docker: Docker,
  scope: EpisodeScope,
  episode: string,
): Promise<string> {
  const name = `trajrl-${episode}-other`;
  scope.trackNetwork(name);
  await docker.createNetwork({
    Name: name,
    Internal: true,
    IPAM: { Config: [{ Subnet: OTHER_NET.subnet, Gateway: OTHER_NET.gateway }] },
    Options: { "com.docker.network.bridge.name": `tjx${randomBytes(4).toString("hex")}` },
    Labels: scope.labels("probe"),
  });
  return name;
}

/**
 * A maker of the isolation tests' containers `trajrl-<episode>-<name>`, tracked by the scope: the
 * base image, sidecar limits, no network and `sleep 600` unless the spec says otherwise.
 */
export function containerMaker(docker: Docker, scope: EpisodeScope, episode: string) {
  return (
    role: "probe" | "sidecar" | "agent",
    name: string,
    spec: Partial<Parameters<typeof createContainer>[2]>,
  ): Promise<Docker.Container> => {
    const full = `trajrl-${episode}-${name}`;
    scope.trackContainer(full);
    return createContainer(docker, scope.runtime, {
      name: full,
      image: BASE_IMAGE,
      labels: scope.labels(role),
      limits: SIDECAR_LIMITS,
      network: { kind: "none" },
      cmd: ["sleep", "600"],
      ...spec,
    });
  };
}
