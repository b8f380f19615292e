/**
 * The engine pool against a second, real Docker engine on this machine (a network namespace of its
 * own, reached over TLS with certificates made here: test/helpers/netns-engine.ts):
 * - the start-up checks: every bad engine named, out of placement with an alarm; none usable → one
 *   message naming them all;
 * - the remote engine's episode firewall, installed and read back through its API;
 * - isolation on the remote engine, proved as test/integration/sandbox-isolation.test.ts proves it
 *   on this one: targets of our own on the remote engine, on its host and on the daemon's host; the
 *   sidecar reaches the meter (through the relay, on this host's loopback) and nothing else, and a
 *   relay carries its own episode's budget alone;
 * - images placed on the remote engine (copied from the first, ids identical), with progress;
 * - draining, and an engine cut off mid-episode (no reset, just silence): the episode is
 *   `engine_lost`, the engine comes back by itself.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProjectImages } from "../../src/bench/index.js";
import type { EngineConfig } from "../../src/config.js";
import { startEngySim } from "../../src/engy-sim/index.js";
import type { EpisodeResult } from "../../src/episode/index.js";
import { silentLogger } from "../../src/log.js";
import { loadAllowlist, loadPriceTable, Meter } from "../../src/meter/index.js";
import { EnginePool, type PoolObserver, setDrained } from "../../src/pool/index.js";
import { ALLOWLIST_FILE, PRICE_TABLE_FILE } from "../../src/repo.js";
import {
  type BuiltImage,
  createContainer,
  type EpisodeScope,
  type EpisodeTopology,
  execIn,
  FIREWALL_CHAIN,
  hostAddress,
  imageIdOf,
  installEngineFirewall,
  pullImage,
  type Sandbox,
  SCENARIO_LIMITS,
  SIDECAR_LIMITS,
  startContainer,
} from "../../src/sandbox/index.js";
import type { EngineView } from "../../src/status/index.js";
import { KvRepo, openDb } from "../../src/store/index.js";
import { requireDocker } from "../helpers/docker.js";
import { REPO_ROOT } from "../helpers/episode.js";
import { type NetnsEngine, startNetnsEngine } from "../helpers/netns-engine.js";
import {
  BASE_IMAGE,
  containerMaker,
  countLabelled,
  createOtherNetwork,
  OTHER_NET,
  parseProbe,
  perlServer,
  probeScript,
} from "../helpers/sandbox.js";

let local: Docker;
let e2: NetnsEngine;
let images: ProjectImages;
const pools: EnginePool[] = [];
const servers: Server[] = [];

class Observer implements PoolObserver {
  alarms = new Map<string, string>();
  engines: EngineView[] = [];
  progress: string[] = [];
  raise(code: string, message: string) {
    this.alarms.set(code, message);
  }
  clear(code: string) {
    this.alarms.delete(code);
  }
  setEngines(v: EngineView[]) {
    this.engines = v;
  }
  benchProgress(p: { engine?: string; image: string; phase: string }) {
    this.progress.push(`${p.engine}:${p.image}:${p.phase}`);
  }
  view(name: string): EngineView {
    return this.engines.find((e) => e.name === name)!;
  }
}

async function openPool(engines: EngineConfig[], extra: Partial<Parameters<typeof EnginePool.open>[0]> = {}) {
  const observer = (extra.observer as Observer | undefined) ?? new Observer();
  const pool = await EnginePool.open({
    engines,
    explicit: true,
    poolCidr: "10.213.0.0/16",
    log: silentLogger,
    observer,
    relayImage: (docker, signal) => new ProjectImages(docker, { repoRoot: REPO_ROOT }).meterRelay(signal),
    reapIntervalMs: 0,
    probeBaseMs: 500,
    episodeRuntime: "runc",
    ...extra,
  });
  pools.push(pool);
  return { pool, observer };
}

const localCfg = (slots: number): EngineConfig => ({
  name: "local",
  url: "unix:///var/run/docker.sock",
  slots,
});
const e2Cfg = (slots: number): EngineConfig => ({ name: "e2", url: e2.url, slots, tlsDir: e2.tlsDir });

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

/** "host:port=OPEN" when a TCP connection is accepted (a TLS port says nothing first), else BLOCKED. */
function connectScript(targets: readonly string[], seconds = 3): string[] {
  const lines = targets.map((t) => {
    const [host, port] = t.split(":");
    return `( timeout ${seconds} bash -c 'exec 3<>/dev/tcp/${host}/${port}' 2>/dev/null && echo "${t}=OPEN" || echo "${t}=BLOCKED" ) &`;
  });
  return ["bash", "-c", `${lines.join("\n")}\nwait`];
}

beforeAll(async () => {
  local = await requireDocker();
  images = new ProjectImages(local, { repoRoot: REPO_ROOT });
  e2 = await startNetnsEngine();
  await e2.loadFrom(local, [BASE_IMAGE]);
}, 300_000);

afterAll(async () => {
  for (const p of pools) await p.close().catch(() => undefined);
  for (const s of servers) s.close();
  await e2?.stop();
}, 120_000);

describe("the pool's checks", () => {
  it("names every engine that fails, takes it out of placement with an alarm; none usable stops the start with one message", async () => {
    // A client certificate of another authority: the engine refuses it, and we refuse its certificate.
    const strangers = mkdtempSync(join(tmpdir(), "pool-strangers-"));
    const ssl = (args: string[]) => execFileSync("openssl", args, { stdio: "ignore" });
    const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1"];
    ssl([
      "req",
      "-x509",
      ...ec,
      "-keyout",
      join(strangers, "k"),
      "-out",
      join(strangers, "ca.pem"),
      "-subj",
      "/CN=x",
    ]);
    ssl([
      "req",
      "-x509",
      ...ec,
      "-keyout",
      join(strangers, "key.pem"),
      "-out",
      join(strangers, "cert.pem"),
      "-subj",
      "/CN=y",
    ]);
    const badPort: EngineConfig = {
      name: "badport",
      url: `tcp://${e2.nsIp}:2377`,
      slots: 1,
      tlsDir: e2.tlsDir,
    };
    const badCa: EngineConfig = { name: "badca", url: e2.url, slots: 1, tlsDir: strangers };

    const { pool, observer } = await openPool([localCfg(1), e2Cfg(1), badPort, badCa], {
      heartbeatMs: 0,
      probeBaseMs: 60_000,
    });
    expect(observer.engines.map((e) => [e.name, e.state])).toEqual([
      ["local", "ready"],
      ["e2", "ready"],
      ["badport", "down"],
      ["badca", "down"],
    ]);
    expect(observer.view("badport").lastError?.message).toMatch(/does not answer.*ECONNREFUSED/);
    expect(observer.view("badca").lastError?.message).toMatch(/does not answer/);
    expect([...observer.alarms.keys()].sort()).toEqual(["engine_down:badca", "engine_down:badport"]);
    expect(observer.alarms.get("engine_down:badport")).toContain(
      "takes no episodes until a probe finds it healthy",
    );
    expect(pool.capacity).toBe(4);
    await pool.close();

    await expect(openPool([{ ...localCfg(0) }, badPort, badCa], { heartbeatMs: 0 })).rejects.toThrow(
      /no engine can take episodes: engine badport \(tcp:\/\/[\d.]+:2377\): .*; engine badca .*/,
    );
    await expect(openPool([badPort, localCfg(1)], { heartbeatMs: 0 })).rejects.toThrow(
      /the first engine builds and pulls the images and must pass its checks: engine badport/,
    );
  }, 300_000);

  it("EPISODE_RUNTIME on every engine: runsc keeps one without gVisor out with an alarm; auto runs runc there, with an alarm", async () => {
    // This host's engine has gVisor (scripts/setup.sh); the namespace's engine has runc alone.
    const strict = await openPool([localCfg(1), e2Cfg(1)], {
      heartbeatMs: 0,
      probeBaseMs: 60_000,
      episodeRuntime: "runsc",
    });
    expect(strict.observer.engines.map((e) => [e.name, e.state, e.runtime?.name])).toEqual([
      ["local", "ready", "runsc"],
      ["e2", "down", undefined],
    ]);
    expect(strict.observer.view("e2").lastError?.code).toBe("engine_runtime_missing");
    expect(strict.observer.alarms.get("engine_down:e2")).toMatch(
      /no runtime named runsc \(its runtimes: .*runc/,
    );
    await strict.pool.close();

    const auto = await openPool([localCfg(1), e2Cfg(1)], { heartbeatMs: 0, episodeRuntime: "auto" });
    expect(auto.observer.engines.map((e) => [e.name, e.state, e.runtime?.name])).toEqual([
      ["local", "ready", "runsc"],
      ["e2", "ready", "runc"],
    ]);
    expect([...auto.observer.alarms.keys()]).toEqual(["engine_runc:e2"]);
    expect(auto.observer.alarms.get("engine_runc:e2")).toContain("episodes run under runc");
    // Each engine's sandbox gives episode code its own runtime; the relay stays on runc everywhere.
    for (const [name, want] of [
      ["local", "runsc"],
      ["e2", "runc"],
    ] as const) {
      const sb = auto.pool.sandbox(name)!;
      const scope = sb.openScope(`pool-rt-${name}-${randomBytes(3).toString("hex")}`, 120_000);
      const c = await createContainer(sb.docker, scope.runtime, {
        name: `trajrl-${scope.episodeId}-agent`,
        image: BASE_IMAGE,
        labels: scope.labels("agent"),
        limits: SIDECAR_LIMITS,
        network: { kind: "none" },
      });
      scope.trackContainer(`trajrl-${scope.episodeId}-agent`);
      expect((await c.inspect()).HostConfig.Runtime, name).toBe(want);
      await scope.dispose();
    }
    await auto.pool.close();
  }, 300_000);

  it("installs the remote engine's episode firewall through its API, and puts it back when it is gone", async () => {
    const relay = await images.meterRelay();
    const { pool } = await openPool([localCfg(1), e2Cfg(1)], { heartbeatMs: 0 });
    const chain = () => e2.nsExec(["iptables", "-S", FIREWALL_CHAIN]);
    expect(chain()).toContain(`-A ${FIREWALL_CHAIN} -j DROP`);
    expect(chain()).not.toContain("--dport");
    expect(e2.nsExec(["iptables", "-S", "INPUT"])).toContain(`-A INPUT -i tja+ -j ${FIREWALL_CHAIN}`);
    // A firewall reload on that host: the rules are gone; the helper puts them back and reads them.
    e2.nsExec(["iptables", "-D", "INPUT", "-i", "tja+", "-j", FIREWALL_CHAIN]);
    e2.nsExec(["iptables", "-F", FIREWALL_CHAIN]);
    const sb = pool.sandbox("e2")!;
    await installEngineFirewall(sb.docker, { image: relay.ref, session: sb.session, log: silentLogger });
    expect(chain()).toContain(`-A ${FIREWALL_CHAIN} -i tja+ -j DROP`);
    expect(e2.nsExec(["iptables", "-S", "INPUT"])).toContain(`-A INPUT -i tja+ -j ${FIREWALL_CHAIN}`);
    await pool.close();
  }, 300_000);
});

describe("an episode's topology on the remote engine", () => {
  let pool: EnginePool;
  let sb: Sandbox;
  let docker: Docker;
  let scope: EpisodeScope;
  let topo: EpisodeTopology;
  let agent: Docker.Container;
  let sidecar: Docker.Container;
  let control: Docker.Container;
  let otherIp = "";
  let controlGw = "";
  let daemonHostPort = 0;
  const episode = `pool-iso-${randomBytes(3).toString("hex")}`;

  beforeAll(async () => {
    ({ pool } = await openPool([localCfg(1), e2Cfg(2)], { heartbeatMs: 0 }));
    sb = pool.sandbox("e2")!;
    docker = sb.docker;
    scope = sb.openScope(episode, 600_000);
    topo = await sb.createTopology(scope);
    // The "meter": where the episode's meter listener binds, on this host's loopback.
    await listen(topo.meterBindHost, topo.meterPort, "meter");
    // The daemon's host, as the namespace sees it (the veth's host end).
    daemonHostPort = await listen(e2.hostIp, 0, "daemon-host");

    const otherName = await createOtherNetwork(docker, scope, episode);
    controlGw = OTHER_NET.gateway;
    const mk = containerMaker(docker, scope, episode);
    // Servers of our own on the remote engine's host: any port, and the meter's port.
    const hostAny = await mk("probe", "host-any", {
      network: { kind: "host" },
      cmd: perlServer(9100, "e2-host"),
    });
    const host8790 = await mk("probe", "host-8790", {
      network: { kind: "host" },
      cmd: perlServer(8790, "e2-host-8790"),
    });
    const other = await mk("probe", "othersrv", {
      network: { kind: "network", name: otherName, aliases: ["othersrv"] },
      cmd: perlServer(9000, "other"),
    });
    control = await mk("probe", "control", { network: { kind: "network", name: otherName } });
    const sidecarIp = hostAddress(topo.meterNet.subnet, 2);
    sidecar = await mk("sidecar", "sidecar", {
      network: { kind: "network", name: topo.agentNet.name, aliases: ["policy"] },
      extraHosts: topo.sidecarExtraHosts,
      cmd: perlServer(8800, "policy"),
      user: "10001:10001",
      readOnlyRoot: true,
      dropAllCaps: true,
    });
    await docker.getNetwork(topo.meterNet.name).connect({
      Container: sidecar.id,
      EndpointConfig: { IPAMConfig: { IPv4Address: sidecarIp } },
    });
    agent = await mk("agent", "agent", {
      network: { kind: "network", name: topo.agentNet.name },
      user: "10000:10000",
      limits: SCENARIO_LIMITS,
      dropAllCaps: true,
    });
    await Promise.all([hostAny, host8790, other, control, sidecar, agent].map((c) => startContainer(c)));
    otherIp = (await other.inspect()).NetworkSettings.Networks[otherName]!.IPAddress;
    for (let i = 0; i < 50; i++) {
      const [c, a] = await Promise.all([
        execIn(control, probeScript(["othersrv:9000", `${controlGw}:9100`], 1)),
        execIn(agent, probeScript(["policy:8800"], 1)),
      ]);
      const r = { ...parseProbe(c.stdout), ...parseProbe(a.stdout) };
      if (
        r["othersrv:9000"] === "pong other" &&
        r[`${controlGw}:9100`] === "pong e2-host" &&
        r["policy:8800"] === "pong policy"
      )
        break;
      await new Promise((r) => setTimeout(r, 100));
    }
  }, 300_000);

  afterAll(async () => {
    await scope?.dispose();
    if (sb) expect(await countLabelled(docker, sb.session.id)).toEqual({ containers: 0, networks: 0 });
  });

  it("control: our servers answer where nothing stands in the way, and the gateway hole is real there too", async () => {
    const r = parseProbe(
      (await execIn(control, probeScript(["othersrv:9000", `${controlGw}:9100`, `${otherIp}:9000`]))).stdout,
    );
    expect(r["othersrv:9000"]).toBe("pong other");
    expect(r[`${otherIp}:9000`]).toBe("pong other");
    expect(r[`${controlGw}:9100`]).toBe("pong e2-host");
  });

  it("the agent reaches policy:8800 and nothing else", async () => {
    const targets = [
      "policy:8800",
      `meter:${topo.meterPort}`,
      `${topo.agentNet.gateway}:9100`,
      `${topo.agentNet.gateway}:8790`,
      `${topo.meterNet.gateway}:8790`,
      `${e2.hostIp}:${daemonHostPort}`,
      `${otherIp}:9000`,
      `${controlGw}:9100`,
    ];
    const r = parseProbe((await execIn(agent, probeScript(targets))).stdout);
    expect(r["policy:8800"]).toBe("pong policy");
    for (const t of targets.slice(1)) expect([t, r[t]]).toEqual([t, "BLOCKED"]);
    const api = parseProbe(
      (await execIn(agent, connectScript([`${e2.nsIp}:2376`, `${topo.agentNet.gateway}:2376`]))).stdout,
    );
    expect(Object.values(api)).toEqual(["BLOCKED", "BLOCKED"]);
  });

  it("the sidecar reaches the meter (through the relay, on the daemon's loopback) and its agent network, nothing else", async () => {
    const targets = [
      `meter:${topo.meterPort}`,
      "policy:8800",
      `${topo.meterNet.gateway}:8790`,
      `${topo.meterNet.gateway}:9100`,
      `${topo.agentNet.gateway}:9100`,
      `${e2.hostIp}:${daemonHostPort}`,
      `${otherIp}:9000`,
      `${controlGw}:9100`,
    ];
    const r = parseProbe((await execIn(sidecar, probeScript(targets))).stdout);
    expect(r[`meter:${topo.meterPort}`]).toBe("pong meter");
    expect(r["policy:8800"]).toBe("pong policy");
    for (const t of targets.slice(2)) expect([t, r[t]]).toEqual([t, "BLOCKED"]);
    const api = parseProbe(
      (await execIn(sidecar, connectScript([`${e2.nsIp}:2376`, `${topo.meterNet.gateway}:2376`]))).stdout,
    );
    expect(Object.values(api)).toEqual(["BLOCKED", "BLOCKED"]);
  });

  it("no outside name resolves from the episode; its own names do", async () => {
    for (const c of [agent, sidecar]) {
      const r = await execIn(c, [
        "bash",
        "-c",
        "timeout 4 getent hosts example.com || echo NORESOLVE; getent hosts policy >/dev/null && echo POLICY",
      ]);
      expect(r.stdout).toContain("NORESOLVE");
      expect(r.stdout).toContain("POLICY");
    }
  });

  it("the relay: the meter network only, no route out, no secret, no log, hardened", async () => {
    const relays = await docker.listContainers({
      filters: { label: [`trajrl.episode=${episode}`, "trajrl.role=relay"] },
    });
    expect(relays).toHaveLength(1);
    const info = await docker.getContainer(relays[0]!.Id).inspect();
    expect(Object.keys(info.NetworkSettings.Networks)).toEqual([topo.meterNet.name]);
    expect(info.NetworkSettings.Networks[topo.meterNet.name]!.Aliases).toContain("meter");
    expect(info.HostConfig.Dns).toEqual(["127.0.0.1"]);
    expect(info.HostConfig.ReadonlyRootfs).toBe(true);
    expect(info.HostConfig.CapDrop).toEqual(["ALL"]);
    expect(info.HostConfig.LogConfig?.Type).toBe("none");
    expect(info.Config.User).toBe("65534:65534");
    // Its environment is the port and the image's own PATH and LANG: no token, no key, no address of ours.
    expect(info.Config.Env.filter((v) => !/^(PATH|LANG)=/.test(v))).toEqual(["RELAY_PORT=8790"]);
  });

  it("a relay that goes away stops its episode's sidecar from outside (infra: the meter is gone, not the policy)", async () => {
    const s = sb.openScope(`${episode}-lost`, 600_000);
    try {
      const t = await sb.createTopology(s);
      const name = `trajrl-${episode}-lost-sidecar`;
      s.trackContainer(name);
      const sc = await createContainer(docker, s.runtime, {
        name,
        image: BASE_IMAGE,
        labels: s.labels("sidecar"),
        limits: SIDECAR_LIMITS,
        network: { kind: "network", name: t.meterNet.name },
        cmd: ["sleep", "600"],
      });
      await startContainer(sc);
      const relays = await docker.listContainers({
        filters: { label: [`trajrl.episode=${episode}-lost`, "trajrl.role=relay"] },
      });
      await docker.getContainer(relays[0]!.Id).kill({ signal: "SIGKILL" });
      for (let i = 0; i < 100 && (await sc.inspect()).State.Running; i++)
        await new Promise((r) => setTimeout(r, 100));
      expect((await sc.inspect()).State.Running).toBe(false);
      // The engine's event stream saw a kill the episode did not send: what collect.ts reads as infra.
      for (let i = 0; i < 50 && sb.engineWatch.killsOf(name) === 0; i++)
        await new Promise((r) => setTimeout(r, 100));
      expect(sb.engineWatch.killsOf(name)).toBeGreaterThan(0);
    } finally {
      await s.dispose();
    }
  });

  it("a relay carries its own episode's budget alone: another live token is unknown there", async () => {
    const sim = await startEngySim({ host: "127.0.0.1", port: 0, latencyScale: 0 });
    const meter = new Meter({
      upstreamUrl: sim.url,
      apiKey: "sim-key",
      allowlist: await loadAllowlist(ALLOWLIST_FILE),
      prices: await loadPriceTable(PRICE_TABLE_FILE),
      receipts: { insertMany: () => undefined, listByEpisode: () => [] },
      log: silentLogger,
    });
    const scopes = [sb.openScope(`${episode}-a`, 600_000), sb.openScope(`${episode}-b`, 600_000)];
    try {
      const [ta, tb] = await Promise.all(scopes.map((s) => sb.createTopology(s)));
      const tokA = meter.mint(`${episode}-a`, 0.25);
      const tokB = meter.mint(`${episode}-b`, 0.5);
      await meter.listen(ta!.meterBindHost, ta!.meterPort, tokA);
      await meter.listen(tb!.meterBindHost, tb!.meterPort, tokB);
      const name = `trajrl-${episode}-budget`;
      scopes[0]!.trackContainer(name);
      const probe = await createContainer(docker, scopes[0]!.runtime, {
        name,
        image: BASE_IMAGE,
        labels: scopes[0]!.labels("probe"),
        limits: SIDECAR_LIMITS,
        network: { kind: "network", name: ta!.meterNet.name },
        cmd: ["sleep", "600"],
      });
      await startContainer(probe);
      const budget = async (token: string) =>
        (
          await execIn(probe, [
            "bash",
            "-c",
            `exec 3<>/dev/tcp/meter/8790; printf 'GET /v1/budget HTTP/1.0\\r\\nAuthorization: Bearer ${token}\\r\\n\\r\\n' >&3; cat <&3`,
          ])
        ).stdout;
      const own = await budget(tokA);
      expect(own).toMatch(/^HTTP\/1\.1 200/);
      expect(own).toContain('"cap_usd":0.25');
      expect(await budget(tokB)).toMatch(/^HTTP\/1\.1 401/);
    } finally {
      await Promise.all(scopes.map((s) => s.dispose()));
      await meter.stop();
      await sim.close();
    }
  });
});

describe("placement on the remote engine", () => {
  const fake = (scenario: string) =>
    ({ scenario, status: "scored", quality: 1, failure: null, notes: [] }) as unknown as EpisodeResult;

  it("copies the evaluation's images from the first engine (same ids), and takes episodes once they are there", async () => {
    const { pool, observer } = await openPool([localCfg(1), e2Cfg(1)], { heartbeatMs: 0 });
    const sidecar: BuiltImage = await images.sidecar();
    expect(await imageIdOf(e2.docker, sidecar.ref)).toBeUndefined();
    const before = observer.view("e2").images.copies;
    pool.prefetch([sidecar]);
    for (let i = 0; i < 600 && observer.view("e2").images.copies < before + 1; i++)
      await new Promise((r) => setTimeout(r, 200));
    expect(await imageIdOf(e2.docker, sidecar.ref)).toBe(sidecar.id);
    expect(observer.view("e2").images.copies).toBe(before + 1);
    expect(observer.view("e2").images.copiedBytes).toBeGreaterThan(10_000_000);
    expect(observer.progress).toContain("e2:sidecar:copying");
    expect(observer.progress).toContain("e2:sidecar:ready");
    // With its images there, an episode lands on it.
    const run = pool.forEvaluation();
    const hold = run.run("x", new AbortController().signal, async (p) => {
      expect(p.engine).toBe("local");
      return run.run("y", new AbortController().signal, async (q) => {
        expect(q.engine).toBe("e2");
        return fake("y");
      });
    });
    await hold;
    await pool.close();
  }, 600_000);

  it("a registry's image: the engine pulls that digest itself; without a way to the registry it gets a copy", async () => {
    const repo = "127.0.0.1:5000/trajrl-pool-test/base";
    const tag = `p${randomBytes(4).toString("hex")}`;
    const ref = `${repo}:${tag}`;
    await local.getImage(BASE_IMAGE).tag({ repo, tag });
    try {
      const pushed = (await local
        .getImage(ref)
        .push({ authconfig: {} } as never)) as unknown as NodeJS.ReadableStream;
      await new Promise((resolve, reject) =>
        local.modem.followProgress(pushed, (err: Error | null) => (err ? reject(err) : resolve(undefined))),
      );
      const p = await pullImage(local, ref);
      expect(p.digest).not.toBe(p.id);
      const img: BuiltImage = {
        ref,
        id: p.id,
        hash: p.digest,
        built: false,
        buildMs: 0,
        repoDigest: `${repo}@${p.digest}`,
      };
      const placed = async () => {
        const { pool, observer } = await openPool([localCfg(1), e2Cfg(1)], { heartbeatMs: 0 });
        // (Opening it may have copied the relay image: count from here.)
        const before = { ...observer.view("e2").images };
        pool.prefetch([img]);
        for (let i = 0; i < 300; i++) {
          const v = observer.view("e2").images;
          if (v.pulls + v.copies > before.pulls + before.copies) break;
          await new Promise((r) => setTimeout(r, 100));
        }
        const v = observer.view("e2").images;
        await pool.close();
        return { pulls: v.pulls - before.pulls, copies: v.copies - before.copies };
      };
      // The namespace has no route anywhere: its 127.0.0.1:5000 is its own, where nothing listens.
      expect(await placed()).toEqual({ pulls: 0, copies: 1 });
      expect(await imageIdOf(e2.docker, ref)).toBe(p.id);
      await e2.docker.getImage(ref).remove({ force: true });
      // A path of our own to this host's registry, and nothing else: the engine pulls the digest.
      const close = await e2.openLoopbackPath(5000);
      try {
        expect(await placed()).toEqual({ pulls: 1, copies: 0 });
        expect(await imageIdOf(e2.docker, ref)).toBe(p.id);
      } finally {
        close();
      }
    } finally {
      await local
        .getImage(ref)
        .remove({ noprune: true })
        .catch(() => undefined);
    }
  }, 300_000);

  it("a drained engine takes no new episodes, its running one finishes; resumed, it takes them again", async () => {
    const db = openDb(join(mkdtempSync(join(tmpdir(), "pool-drain-")), "v.sqlite"));
    const kv = new KvRepo(db);
    const { pool, observer } = await openPool([localCfg(1), e2Cfg(1)], {
      kv,
      drainPollMs: 100,
      heartbeatMs: 0,
    });
    const run = pool.forEvaluation();
    const gate = () => {
      let open: () => void = () => undefined;
      return { p: new Promise<void>((r) => (open = r)), open: () => open() };
    };
    const ga = gate();
    const gb = gate();
    const where: string[] = [];
    const a = run.run("a", new AbortController().signal, async (p) => {
      where.push(`a@${p.engine}`);
      await ga.p;
      return fake("a");
    });
    const b = run.run("b", new AbortController().signal, async (p) => {
      where.push(`b@${p.engine}`);
      await gb.p;
      return fake("b");
    });
    await new Promise((r) => setTimeout(r, 100));
    expect(where.sort()).toEqual(["a@local", "b@e2"]);
    setDrained(kv, "e2", true);
    for (let i = 0; i < 50 && !observer.view("e2").draining; i++) await new Promise((r) => setTimeout(r, 50));
    expect(observer.view("e2").draining).toBe(true);
    gb.open();
    expect((await b).status).toBe("scored");
    // e2's slot is free but drained: the next episode waits for local's.
    const c = run.run("c", new AbortController().signal, async (p) => {
      where.push(`c@${p.engine}`);
      return fake("c");
    });
    await new Promise((r) => setTimeout(r, 300));
    expect(where).not.toContain("c@e2");
    ga.open();
    await Promise.all([a, c]);
    expect(where).toContain("c@local");
    setDrained(kv, "e2", false);
    for (let i = 0; i < 50 && observer.view("e2").draining; i++) await new Promise((r) => setTimeout(r, 50));
    const d = await run.run("d", new AbortController().signal, async (p) => {
      where.push(`d@${p.engine}`);
      return fake("d");
    });
    expect(d.status).toBe("scored");
    await pool.close();
    db.close();
  }, 300_000);

  it("an engine cut off mid-episode: the episode ends as engine_lost, the engine is probed back in", async () => {
    const { pool, observer } = await openPool([localCfg(1), e2Cfg(1)], {
      heartbeatMs: 300,
      lostAfterMs: 1500,
    });
    const run = pool.forEvaluation();
    const busyLocal = run.run("hold", new AbortController().signal, async () => {
      await new Promise((r) => setTimeout(r, 500));
      return fake("hold");
    });
    let sawAbort = false;
    const onE2 = run.run("cut", new AbortController().signal, async (p) => {
      expect(p.engine).toBe("e2");
      e2.cut();
      await new Promise<void>((resolve) =>
        p.signal.addEventListener("abort", () => resolve(), { once: true }),
      );
      sawAbort = true;
      return fake("cut");
    });
    try {
      const r = await onE2;
      expect(sawAbort).toBe(true);
      expect(r.status).toBe("failed");
      expect(r.failure).toMatchObject({ class: "infra", code: "engine_lost" });
      expect(observer.view("e2").state).toBe("down");
      expect(observer.alarms.get("engine_down:e2")).toMatch(/went away: no answer to a ping/);
    } finally {
      e2.reconnect();
    }
    await busyLocal;
    for (let i = 0; i < 600 && observer.view("e2").state !== "ready"; i++)
      await new Promise((r) => setTimeout(r, 100));
    expect(observer.view("e2").state).toBe("ready");
    expect(observer.alarms.has("engine_down:e2")).toBe(false);
    expect(observer.view("e2").failures.engine_lost).toBe(1);
    // Back in placement: with this host's slot taken, the next episode goes there.
    const again = await run.run("again-local", new AbortController().signal, () =>
      run.run("again", new AbortController().signal, async (p) => fake(p.engine)),
    );
    expect(again.scenario).toBe("e2");
    await pool.close();
  }, 300_000);
});
