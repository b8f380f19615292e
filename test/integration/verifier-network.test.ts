/**
 * The registry bench's verifier network (issue 36 item 7): VERIFIER_NETWORK=bridge, upstream's
 * setting for graders that fetch tools. It used to be Docker's own `bridge`, from which a grader
 * reached every live episode's meter listener and any host service on 0.0.0.0 (600 connections held
 * on one listener made that episode's honest policy fail). Now it is a network of the grading's own
 * (`tjv…`) with a route out and none to the host (the firewall's TRAJRL-GRADER chain).
 *
 * A real grading (gradeBenchDeliverable) whose test.sh probes, against targets of the test's own
 * only: a server bound on the host's 0.0.0.0 (through the grader's gateway and through another host
 * address), a live episode's meter listener (the real meter, a minted token), and a server in a
 * network namespace of the test's own that only the host's ordinary routing reaches (the egress
 * the grader keeps). A control container on another network of ours, which no rule of ours covers,
 * reaches the host server and the meter: the targets are live.
 */
import { randomBytes, randomInt } from "node:crypto";
import { createServer, type Server } from "node:net";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gradeBenchDeliverable } from "../../src/episode/bench-verifier.js";
import { silentLogger } from "../../src/log.js";
import { loadAllowlist, loadPriceTable, Meter } from "../../src/meter/index.js";
import { ALLOWLIST_FILE, PRICE_TABLE_FILE } from "../../src/repo.js";
import { createOptions } from "../../src/sandbox/container-spec.js";
import {
  type EpisodeScope,
  type EpisodeTopology,
  execIn,
  RUNC_RUNTIME,
  type Sandbox,
  startContainer,
} from "../../src/sandbox/index.js";
import { type RoutedPeer, startRoutedPeer } from "../helpers/routed-peer.js";
import {
  BASE_IMAGE,
  containerMaker,
  countLabelled,
  openTestSandbox,
  parseProbe,
} from "../helpers/sandbox.js";

let sb: Sandbox;
let docker: Docker;
let scope: EpisodeScope;
let topo: EpisodeTopology;
let meter: Meter;
let host: Server;
let hostPort = 0;
let peer: RoutedPeer;
const episode = `grader-net-${randomBytes(3).toString("hex")}`;

/**
 * The probe, as a grader's test.sh: `label=<first line>` or `label=BLOCKED` per target; `own-gw` is
 * the gateway of the network it runs on (its default route). Then a reward, as a grader writes one.
 */
function probe(meterGw: string, meterPort: number): string {
  const line = (label: string, hostExpr: string, port: number, send: string) =>
    `( r=$(timeout 3 bash -c "exec 3<>/dev/tcp/${hostExpr}/${port} && ${send} head -n1 <&3" 2>/dev/null | tr -d '\\r'); echo "${label}=\${r:-BLOCKED}" ) &`;
  return [
    "#!/bin/bash",
    `gw=$(awk '$2 == "00000000" { print $3; exit }' /proc/net/route)`,
    `gw=$(printf '%d.%d.%d.%d' 0x\${gw:6:2} 0x\${gw:4:2} 0x\${gw:2:2} 0x\${gw:0:2})`,
    `echo "own-gw-is=$gw"`,
    line("host-via-own-gw", "$gw", hostPort, ""),
    line("host-via-meter-gw", meterGw, hostPort, ""),
    line("meter", meterGw, meterPort, `printf 'GET /health HTTP/1.0\\r\\n\\r\\n' >&3 &&`),
    line("peer", peer.ip, peer.port, ""),
    "wait",
    "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt",
    "",
  ].join("\n");
}

/** An internal network of ours outside every firewalled prefix and the episode pool (a random 10.214.x/28). */
async function controlNetwork(): Promise<string> {
  const name = `trajrl-${episode}-control`;
  scope.trackNetwork(name);
  for (let i = 0; ; i++) {
    const third = randomInt(0, 250);
    const fourth = randomInt(0, 16) * 16;
    try {
      await docker.createNetwork({
        Name: name,
        Internal: true,
        IPAM: {
          Config: [{ Subnet: `10.214.${third}.${fourth}/28`, Gateway: `10.214.${third}.${fourth + 1}` }],
        },
        Options: { "com.docker.network.bridge.name": `tjx${randomBytes(4).toString("hex")}` },
        Labels: scope.labels("probe"),
      });
      return name;
    } catch (err) {
      if (i >= 10 || !/overlap/i.test(String(err))) throw err;
    }
  }
}

beforeAll(async () => {
  sb = await openTestSandbox();
  docker = sb.docker;
  peer = await startRoutedPeer("peer");
  host = createServer((c) => c.end("pong host\n"));
  hostPort = await new Promise<number>((resolve) =>
    host.listen(0, "0.0.0.0", () => resolve((host.address() as { port: number }).port)),
  );
  meter = new Meter({
    upstreamUrl: "http://127.0.0.1:9/v1",
    apiKey: "unused",
    allowlist: await loadAllowlist(ALLOWLIST_FILE),
    prices: await loadPriceTable(PRICE_TABLE_FILE),
    receipts: { insertMany: () => undefined, listByEpisode: () => [] },
    log: silentLogger,
  });
  scope = sb.openScope(episode, 600_000);
  // A live episode: its networks and its meter listener on the meter network's gateway.
  topo = await sb.createTopology(scope);
  await meter.listen(topo.meterBindHost, topo.meterPort, meter.mint(episode, 0.1));
}, 300_000);

afterAll(async () => {
  await scope?.dispose();
  await meter?.stop();
  host?.close();
  peer?.stop();
  if (sb) expect(await countLabelled(docker, sb.session.id)).toEqual({ containers: 0, networks: 0 });
  await sb?.close();
});

describe("the registry bench's verifier network", () => {
  it("control: from a network no rule of ours covers, the host's server and the meter listener answer", async () => {
    const net = await controlNetwork();
    const c = await containerMaker(docker, scope, episode)("probe", "control", {
      network: { kind: "network", name: net },
    });
    await startContainer(c);
    const r = parseProbe((await execIn(c, ["bash", "-c", probe(topo.meterBindHost, topo.meterPort)])).stdout);
    expect(r["host-via-own-gw"]).toBe("pong host");
    expect(r["host-via-meter-gw"]).toBe("pong host");
    expect(r.meter).toMatch(/^HTTP\/1\.1 /);
    // An internal network has no route anywhere.
    expect(r.peer).toBe("BLOCKED");
  }, 120_000);

  it("reaches what lies beyond the host, and nothing of the host: its services and every meter listener are dropped", async () => {
    const gradingScope = sb.openScope(`${episode}-g`, 600_000);
    try {
      const grade = await gradeBenchDeliverable({
        engine: sb.episodeEngine,
        networks: sb.networks,
        scope: gradingScope,
        image: BASE_IMAGE,
        testFiles: { "test.sh": Buffer.from(probe(topo.meterBindHost, topo.meterPort)) },
        agentOutputPath: "/tmp/out.txt",
        deliverable: Buffer.from("x"),
        timeoutMs: 120_000,
        network: "bridge",
      });
      const r = parseProbe(grade.log);
      console.log(`the grader's probe: ${JSON.stringify(r)}`);
      expect(grade.reward).toBe(1);
      expect(r.peer).toBe("pong peer");
      expect(r["host-via-own-gw"]).toBe("BLOCKED");
      expect(r["host-via-meter-gw"]).toBe("BLOCKED");
      expect(r.meter).toBe("BLOCKED");
    } finally {
      await gradingScope.dispose();
    }
    // The grading's network went with it.
    expect(await countLabelled(docker, sb.session.id, `${episode}-g`)).toEqual({
      containers: 0,
      networks: 0,
    });
  }, 300_000);

  it("the grader resolves names as the engine does (its tools may be fetched by name); every other container does not", () => {
    const spec = {
      name: "x",
      image: BASE_IMAGE,
      labels: {},
      limits: { cpus: 1, memoryBytes: 1, pidsLimit: 1 },
      network: { kind: "network" as const, name: "n" },
    };
    expect(createOptions({ ...spec, outsideNames: true }, RUNC_RUNTIME).HostConfig?.Dns).toBeUndefined();
    expect(createOptions(spec, RUNC_RUNTIME).HostConfig?.Dns).toEqual(["127.0.0.1"]);
  });
});
