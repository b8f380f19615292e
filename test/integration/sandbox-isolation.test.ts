/**
 * Isolation of an episode topology, proved against servers of our own only:
 * - servers on the host: one bound on 0.0.0.0, one on the agent network's gateway, and the
 *   "meter" on the meter network's gateway at 8790 (where the real meter listens);
 * - a server container on another network of our own.
 * The agent reaches policy:8800 and nothing else; the sidecar reaches the meter and the agent
 * network and nothing else. A control container on a bridge without our prefix shows the
 * host hole really exists when the firewall does not cover a bridge (so the test can fail).
 * DNS (issue 20 item 3): a DNS server of our own on the host (every gateway an episode sees, and
 * the host's loopback) receives nothing from an episode, while a control container whose embedded
 * resolver is pointed at it shows that a forwarded name would arrive there.
 */
import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:net";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  connectNetwork,
  createContainer,
  execIn,
  SCENARIO_LIMITS,
  SIDECAR_LIMITS,
  startContainer,
} from "../../src/sandbox/index.js";
import type { EpisodeScope } from "../../src/sandbox/reaper.js";
import type { EpisodeTopology, Sandbox } from "../../src/sandbox/sandbox.js";
import { dnsQuery, type OwnDnsServer, startDnsServer, udpQueryScript } from "../helpers/dns.js";
import {
  BASE_IMAGE,
  containerMaker,
  countLabelled,
  createOtherNetwork,
  OTHER_NET,
  openTestSandbox,
  parseProbe,
  perlServer,
  probeScript,
  TEST_EPISODE_RUNTIME,
} from "../helpers/sandbox.js";

let sb: Sandbox;
let docker: Docker;
let scope: EpisodeScope;
let topo: EpisodeTopology;
const servers: Server[] = [];
const episode = `iso-${randomBytes(3).toString("hex")}`;

function listen(host: string, port: number, name: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer((c) => c.end(`pong ${name}\n`));
    s.on("error", reject);
    s.listen(port, host, () => {
      servers.push(s);
      resolve((s.address() as { port: number }).port);
    });
  });
}

let anyPort = 0;
let gwPort = 0;
let otherIp = "";
let controlGw = "";
let agent: Docker.Container;
let sidecar: Docker.Container;
let control: Docker.Container;
let otherNet = "";

beforeAll(async () => {
  sb = await openTestSandbox();
  docker = sb.docker;
  scope = sb.openScope(episode, 600_000);
  topo = await sb.createTopology(scope);

  anyPort = await listen("0.0.0.0", 0, "host-any");
  gwPort = await listen(topo.agentNet.gateway, 0, "host-agent-gw");
  await listen(topo.meterBindHost, topo.meterPort, "meter");

  // Another network of ours, on a bridge name outside the firewalled prefixes.
  const otherName = await createOtherNetwork(docker, scope, episode);
  controlGw = OTHER_NET.gateway;
  otherNet = otherName;
  const mk = containerMaker(docker, scope, episode);

  const other = await mk("probe", "othersrv", {
    network: { kind: "network", name: otherName, aliases: ["othersrv"] },
    cmd: perlServer(9000, "other"),
  });
  control = await mk("probe", "control", { network: { kind: "network", name: otherName } });
  sidecar = await mk("sidecar", "sidecar", {
    network: { kind: "network", name: topo.agentNet.name, aliases: ["policy"] },
    extraHosts: topo.sidecarExtraHosts,
    cmd: perlServer(8800, "policy"),
    user: "10001:10001",
    readOnlyRoot: true,
    tmpfs: { "/tmp": "rw,nosuid,nodev,size=16m" },
    dropAllCaps: true,
  });
  await connectNetwork(docker, topo.meterNet.name, sidecar.id);
  agent = await mk("agent", "agent", {
    network: { kind: "network", name: topo.agentNet.name },
    user: "10000:10000",
    limits: SCENARIO_LIMITS,
    dropAllCaps: true,
  });
  await Promise.all([other, control, sidecar, agent].map((c) => startContainer(c)));
  otherIp = (await other.inspect()).NetworkSettings.Networks[otherName]!.IPAddress;
  // The servers in containers need a moment to bind.
  for (let i = 0; i < 50; i++) {
    const [o, pol] = await Promise.all([
      execIn(control, probeScript([`othersrv:9000`], 1)),
      execIn(agent, probeScript([`policy:8800`], 1)),
    ]);
    if (
      parseProbe(o.stdout)["othersrv:9000"] === "pong other" &&
      parseProbe(pol.stdout)["policy:8800"] === "pong policy"
    )
      break;
    await new Promise((r) => setTimeout(r, 100));
  }
}, 120_000);

afterAll(async () => {
  await scope?.dispose();
  for (const s of servers) s.close();
  if (sb) {
    expect(await countLabelled(sb.docker, sb.session.id)).toEqual({ containers: 0, networks: 0 });
    await sb.close();
  }
});

describe("episode isolation", () => {
  it("control: our servers answer where nothing stands in the way, and the gateway hole is real", async () => {
    const r = parseProbe(
      (await execIn(control, probeScript([`othersrv:9000`, `${controlGw}:${anyPort}`, `${otherIp}:9000`])))
        .stdout,
    );
    expect(r["othersrv:9000"]).toBe("pong other");
    expect(r[`${otherIp}:9000`]).toBe("pong other");
    // A bridge our firewall does not cover reaches a host service bound on 0.0.0.0 through its gateway.
    expect(r[`${controlGw}:${anyPort}`]).toBe("pong host-any");
  });

  it("the agent reaches policy:8800 and nothing else", async () => {
    const targets = [
      "policy:8800",
      `${topo.meterNet.gateway}:${topo.meterPort}`,
      `meter:${topo.meterPort}`,
      `${topo.agentNet.gateway}:${anyPort}`,
      `${topo.agentNet.gateway}:${gwPort}`,
      `${topo.agentNet.gateway}:${topo.meterPort}`,
      `${otherIp}:9000`,
      `${controlGw}:${anyPort}`,
    ];
    const r = parseProbe((await execIn(agent, probeScript(targets))).stdout);
    expect(r["policy:8800"]).toBe("pong policy");
    for (const t of targets.slice(1)) expect([t, r[t]]).toEqual([t, "BLOCKED"]);
  });

  it("the sidecar reaches meter:8790 and the agent network, nothing else", async () => {
    const targets = [
      `meter:${topo.meterPort}`,
      "policy:8800",
      `${topo.meterNet.gateway}:${anyPort}`,
      `${topo.agentNet.gateway}:${anyPort}`,
      `${topo.agentNet.gateway}:${gwPort}`,
      `${topo.agentNet.gateway}:${topo.meterPort}`,
      `${otherIp}:9000`,
      `${controlGw}:${anyPort}`,
    ];
    const r = parseProbe((await execIn(sidecar, probeScript(targets))).stdout);
    expect(r[`meter:${topo.meterPort}`]).toBe("pong meter");
    expect(r["policy:8800"]).toBe("pong policy");
    for (const t of targets.slice(2)) expect([t, r[t]]).toEqual([t, "BLOCKED"]);
  });

  it("the sidecar runs hardened: non-root, read-only root, no capabilities, no new privileges", async () => {
    // setpriv asks the kernel (gVisor's /proc/self/status has no NoNewPrivs line).
    const r = await execIn(sidecar, [
      "bash",
      "-c",
      "id -u; touch /x 2>/dev/null && echo rootfs-writable || echo rootfs-ro; touch /tmp/ok && echo tmp-ok; grep -E '^CapEff' /proc/self/status; setpriv --dump | grep no_new_privs",
    ]);
    expect(r.stdout).toContain("10001");
    expect(r.stdout).toContain("rootfs-ro");
    expect(r.stdout).toContain("tmp-ok");
    expect(r.stdout).toMatch(/CapEff:\s+0000000000000000/);
    expect(r.stdout).toMatch(/no_new_privs: 1/);
    const info = await sidecar.inspect();
    expect(info.HostConfig.NanoCpus).toBe(1e9);
    expect(info.HostConfig.Memory).toBe(1024 ** 3);
    // 256 processes: the pids limit under runc; under gVisor the guest's RLIMIT_NPROC (src/sandbox/runtime.ts).
    if (sb.episodeRuntime?.gvisor)
      expect(info.HostConfig.Ulimits).toEqual([{ Name: "nproc", Soft: 256, Hard: 256 }]);
    else expect(info.HostConfig.PidsLimit).toBe(256);
    expect(info.Mounts).toEqual([]);
  });

  it("episode code runs under the sandbox's episode runtime, the test's own servers under runc", async () => {
    const want = TEST_EPISODE_RUNTIME === "runc" ? "runc" : "runsc";
    expect(sb.episodeRuntime?.name).toBe(want);
    for (const c of [agent, sidecar]) expect((await c.inspect()).HostConfig.Runtime).toBe(want);
    expect((await control.inspect()).HostConfig.Runtime).toBe("runc");
    // What the episode's processes see of their kernel: gVisor's, or the host's.
    const uname = (await execIn(agent, ["uname", "-r"])).stdout.trim();
    const hostKernel = (await execIn(control, ["uname", "-r"])).stdout.trim();
    if (want === "runsc") expect(uname).not.toBe(hostKernel);
    else expect(uname).toBe(hostKernel);
  });
});

describe("DNS from an episode", () => {
  const marker = `exfil${randomBytes(4).toString("hex")}`;
  let dns: OwnDnsServer;
  let upstreamed: Docker.Container;

  beforeAll(async () => {
    // Everywhere an episode could send a query to the host: each gateway, and the host's loopback
    // (where a CVE-2024-29018 engine forwards the embedded resolver's queries from).
    dns = await startDnsServer(
      [topo.agentNet.gateway, topo.meterNet.gateway, controlGw, "127.0.0.1"],
      "10.214.253.99",
    );
    // Control: the embedded resolver of a container on a bridge the firewall does not cover,
    // given our server as its upstream (what an engine's forwarding does with the host's resolver).
    const name = `trajrl-${episode}-dnsctl`;
    scope.trackContainer(name);
    upstreamed = await docker.createContainer({
      name,
      Image: BASE_IMAGE,
      Cmd: ["sleep", "600"],
      Labels: scope.labels("probe"),
      HostConfig: { NetworkMode: otherNet, Dns: [controlGw] },
    });
    await upstreamed.start();
  }, 60_000);

  afterAll(async () => {
    await dns?.close();
  });

  it("control: a name forwarded by the embedded resolver reaches our server, and so does a direct query", async () => {
    const viaResolver = await execIn(upstreamed, [
      "bash",
      "-c",
      `timeout 20 getent hosts ctl-${marker}.example.com`,
    ]);
    expect(viaResolver.stdout).toContain("10.214.253.99");
    const direct = await execIn(control, [
      "bash",
      "-c",
      udpQueryScript(controlGw, dnsQuery(`direct-${marker}.test`)),
    ]);
    expect(direct.stdout.trim()).toBe("12");
    const names = new Set(dns.seen(marker).map((q) => q.name));
    expect([...names].sort()).toEqual([`ctl-${marker}.example.com`, `direct-${marker}.test`]);
  }, 60_000);

  it("episode containers resolve their network's names and nothing outside; our server hears nothing", async () => {
    const before = dns.seen(marker).length;
    for (const c of [agent, sidecar]) {
      const info = await c.inspect();
      expect(info.HostConfig.Dns).toEqual(["127.0.0.1"]);
      const conf = await execIn(c, ["cat", "/etc/resolv.conf"]);
      expect(conf.stdout).toMatch(/^nameserver 127\.0\.0\.11$/m);
      expect(conf.stdout.match(/^nameserver/gm)).toHaveLength(1);
    }
    // The episode's own names still resolve through the embedded resolver.
    const policy = await execIn(agent, ["getent", "hosts", "policy"]);
    expect(policy.stdout).toMatch(/^10\.213\.\d+\.\d+\s+policy/);
    const names = [`a-${marker}.example.com`, `b-${marker}`];
    const script = [
      ...names.map((n) => `(timeout 25 getent ahostsv4 ${n} && echo "RESOLVED ${n}") &`),
      ...[topo.agentNet.gateway, topo.meterNet.gateway, controlGw].map(
        (gw) =>
          `echo "direct ${gw} $(${udpQueryScript(gw, dnsQuery(`d-${marker}.example.com`))} 2>/dev/null)"`,
      ),
      "wait",
    ].join("\n");
    const [fromAgent, fromSidecar] = await Promise.all([
      execIn(agent, ["bash", "-c", script]),
      execIn(sidecar, ["bash", "-c", script]),
    ]);
    for (const r of [fromAgent, fromSidecar]) {
      expect(r.stdout).not.toContain("RESOLVED");
      // No direct answer either: the bridges' gateways drop it (the control bridge is not reachable).
      expect(r.stdout).not.toMatch(/direct \S+ [1-9]/);
    }
    expect(dns.seen(marker)).toHaveLength(before);
  }, 120_000);
});

describe("daemon in a container", () => {
  it("joins the daemon's container to the meter network as `meter`, and detaches it on dispose", async () => {
    const { openTestSandbox: open } = await import("../helpers/sandbox.js");
    const tag = randomBytes(3).toString("hex");
    // Stand-in for the daemon's own container: a server of ours on a network of ours.
    const homeNet = `trajrl-home-${tag}`;
    const selfName = `trajrl-self-${tag}`;
    const sbc = await open({ daemonInContainer: true, selfContainer: selfName, firewall: "off" });
    const home = sbc.openScope(`home-${tag}`, 600_000);
    home.trackNetwork(homeNet);
    home.trackContainer(selfName);
    await sbc.docker.createNetwork({ Name: homeNet, Internal: true, Labels: home.labels("probe") });
    const self = await createContainer(sbc.docker, home.runtime, {
      name: selfName,
      image: BASE_IMAGE,
      labels: home.labels("probe"),
      limits: SIDECAR_LIMITS,
      network: { kind: "network", name: homeNet },
      cmd: perlServer(8790, "daemon"),
    });
    await startContainer(self);
    const ep = sbc.openScope(`cm-${tag}`, 600_000);
    try {
      const t = await sbc.createTopology(ep);
      expect(t.sidecarExtraHosts).toEqual([]);
      const info = await self.inspect();
      expect(t.meterBindHost).toBe(info.NetworkSettings.Networks[t.meterNet.name]!.IPAddress);
      const sideName = `trajrl-cm-${tag}-sidecar`;
      ep.trackContainer(sideName);
      const side = await createContainer(sbc.docker, ep.runtime, {
        name: sideName,
        image: BASE_IMAGE,
        labels: ep.labels("sidecar"),
        limits: SIDECAR_LIMITS,
        network: { kind: "network", name: t.agentNet.name, aliases: ["policy"] },
        cmd: ["sleep", "600"],
      });
      await connectNetwork(sbc.docker, t.meterNet.name, side.id);
      await startContainer(side);
      let r: Record<string, string> = {};
      for (let i = 0; i < 30 && r["meter:8790"] !== "pong daemon"; i++) {
        r = parseProbe((await execIn(side, probeScript(["meter:8790"], 2))).stdout);
      }
      expect(r["meter:8790"]).toBe("pong daemon");
      await ep.dispose();
      // Our container left the episode network; the network itself is gone.
      const after = await self.inspect();
      expect(Object.keys(after.NetworkSettings.Networks)).toEqual([homeNet]);
      expect(await countLabelled(sbc.docker, sbc.session.id, ep.episodeId)).toEqual({
        containers: 0,
        networks: 0,
      });
    } finally {
      await ep.dispose();
      await home.dispose();
      await sbc.close();
    }
  }, 120_000);
});
