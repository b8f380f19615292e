/**
 * The meter relay on another engine under its real limits (issue 36 item 5): the relay container
 * the sandbox starts on a second Docker engine (test/helpers/netns-engine.ts: its own namespace,
 * reached over TLS), RELAY_LIMITS (256 MiB), the real meter with a minted token behind it, and a
 * "sidecar" of our own on the episode's meter network that pipelines free `GET /v1/models` on four
 * connections and never reads an answer.
 *
 * Before: the relay took every answer into its memory and was OOM-killed in seconds; the daemon
 * then stopped the sidecar from outside (`sidecar_killed`, infra) and the evaluation was discarded
 * on every attempt. Now each connection has a window: the sidecar's writes stall, the relay stays
 * small, another connection of the same episode is answered. And a relay that does run out of
 * memory is the policy's doing (it carries that sidecar alone): `policy_relay_oom`.
 */
import { randomBytes } from "node:crypto";
import { request } from "node:http";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProjectImages } from "../../src/bench/index.js";
import { outsideKill } from "../../src/episode/sidecar.js";
import { silentLogger } from "../../src/log.js";
import type { Meter } from "../../src/meter/index.js";
import { EnginePool } from "../../src/pool/index.js";
import {
  createContainer,
  type EpisodeTopology,
  execIn,
  RELAY_LIMITS,
  readLogs,
  type Sandbox,
  SIDECAR_LIMITS,
  startContainer,
} from "../../src/sandbox/index.js";
import { requireDocker } from "../helpers/docker.js";
import { type MeterRig, REPO_ROOT, startMeterRig } from "../helpers/episode.js";
import { type NetnsEngine, startNetnsEngine } from "../helpers/netns-engine.js";
import { countLabelled } from "../helpers/sandbox.js";
import { pollUpTo } from "../helpers/wait.js";

const MiB = 1024 * 1024;

/**
 * The hostile sidecar: four connections, each writing `PER` pipelined requests as fast as the
 * kernel takes them and reading nothing; a connection whose write has not drained in 3 s is
 * stalled. One line per connection: `DONE n` or `STALLED n` (requests written).
 */
const FLOOD = `
const net = require("node:net");
const REQ = "GET /v1/models HTTP/1.1\\r\\nHost: meter\\r\\nAuthorization: Bearer " + process.env.TOKEN + "\\r\\n\\r\\n";
const PER = Number(process.env.PER);
const batch = REQ.repeat(256);
for (let i = 0; i < 4; i++) {
  const s = net.connect(8790, "meter");
  s.on("error", (e) => console.log("ERROR " + e.message));
  s.on("connect", async () => {
    let sent = 0;
    while (sent < PER) {
      sent += 256;
      if (s.write(batch)) continue;
      const drained = await new Promise((res) => {
        const t = setTimeout(() => res(false), 3000);
        s.once("drain", () => { clearTimeout(t); res(true); });
      });
      if (!drained) return console.log("STALLED " + sent);
    }
    console.log("DONE " + sent);
  });
}
setInterval(() => {}, 1 << 30);
`;

/** The other connection of the same episode: its budget, through the relay (node in the relay image). */
const BUDGET = `
const s = require("node:net").connect(8790, "meter", () =>
  s.write("GET /v1/budget HTTP/1.0\\r\\nAuthorization: Bearer " + process.env.TOKEN + "\\r\\n\\r\\n"));
let b = ""; s.on("data", (d) => (b += d)); s.on("end", () => console.log(b.split("\\r\\n")[0]));
s.on("error", (e) => console.log("ERROR " + e.message));
setTimeout(() => { console.log("TIMEOUT"); process.exit(0); }, 30000).unref();
`;

let local: Docker;
let e2: NetnsEngine;
let pool: EnginePool;
let sb: Sandbox;
let docker: Docker;
let relayImage = "";
let meters: MeterRig;
let meter: Meter;

beforeAll(async () => {
  local = await requireDocker();
  const images = new ProjectImages(local, { repoRoot: REPO_ROOT });
  relayImage = (await images.meterRelay()).ref;
  e2 = await startNetnsEngine();
  pool = await EnginePool.open({
    engines: [
      { name: "local", url: "unix:///var/run/docker.sock", slots: 1 },
      { name: "e2", url: e2.url, slots: 1, tlsDir: e2.tlsDir },
    ],
    explicit: true,
    poolCidr: "10.213.0.0/16",
    log: silentLogger,
    relayImage: (d, signal) => new ProjectImages(d, { repoRoot: REPO_ROOT }).meterRelay(signal),
    reapIntervalMs: 0,
    heartbeatMs: 0,
    episodeRuntime: "runc",
  });
  sb = pool.sandbox("e2")!;
  docker = sb.docker;
  meters = await startMeterRig({ receipts: { insertMany: () => undefined, listByEpisode: () => [] } });
  meter = meters.meter;
}, 600_000);

afterAll(async () => {
  await meters?.close();
  await pool?.close().catch(() => undefined);
  await e2?.stop();
}, 120_000);

/** An episode's topology on the second engine, its meter listener (a minted token) and its relay. */
async function episodeOn(episode: string) {
  const scope = sb.openScope(episode, 600_000);
  const topo = await sb.createTopology(scope);
  const token = meter.mint(episode, 0.5);
  await meter.listen(topo.meterBindHost, topo.meterPort, token);
  const [relay] = await docker.listContainers({
    filters: { label: [`trajrl.episode=${episode}`, "trajrl.role=relay"] },
  });
  return { episode, scope, topo, token, relay: docker.getContainer(relay!.Id) };
}

/** A container of ours as the episode's sidecar (the relay image: it has node), on its meter network. */
async function sidecarOf(
  e: Awaited<ReturnType<typeof episodeOn>>,
  cmd: string[],
  env: Record<string, string> = {},
): Promise<Docker.Container> {
  const name = `trajrl-${e.episode}-sidecar`;
  e.scope.trackContainer(name);
  const c = await createContainer(docker, e.scope.runtime, {
    name,
    image: relayImage,
    cmd,
    env: { ...env, TOKEN: e.token },
    user: "65534:65534",
    labels: e.scope.labels("sidecar"),
    limits: SIDECAR_LIMITS,
    network: { kind: "network", name: e.topo.meterNet.name },
    readOnlyRoot: true,
    dropAllCaps: true,
  });
  await startContainer(c);
  return c;
}

/** Bytes of one `GET /v1/models` answer, head included, asked of the listener directly. */
function modelsAnswerBytes(topo: EpisodeTopology, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: topo.meterBindHost,
        port: topo.meterPort,
        path: "/v1/models",
        headers: { authorization: `Bearer ${token}` },
      },
      (res) => {
        let n = 0;
        res.on("data", (d: Buffer) => (n += d.length));
        res.on("end", () =>
          resolve(
            n + Object.entries(res.headers).reduce((a, [k, v]) => a + k.length + String(v).length + 4, 20),
          ),
        );
      },
    );
    req.on("error", reject);
    req.end();
  });
}

describe("the meter relay under its real limits", () => {
  it("a sidecar that pipelines free calls and never reads is held back: the relay lives, small; another call is answered", async () => {
    const e = await episodeOn(`relay-bp-${randomBytes(3).toString("hex")}`);
    try {
      // Answers worth twice the relay's memory limit, were they all produced.
      const answer = await modelsAnswerBytes(e.topo, e.token);
      const per = Math.ceil((2 * RELAY_LIMITS.memoryBytes) / answer / 4 / 256) * 256;
      const flood = await sidecarOf(e, ["node", "-e", FLOOD], { PER: String(per) });
      let lines: string[] = [];
      await pollUpTo(
        async () => {
          lines = (await readLogs(flood, 64 * 1024)).stdout
            .split("\n")
            .filter((l) => /^(DONE|STALLED) /.test(l));
          return lines.length === 4 || !(await e.relay.inspect()).State.Running;
        },
        240,
        500,
      );
      // Then until the relay's memory stops growing (the answers already asked for have landed) or it is gone.
      let peak = 0;
      let flat = 0;
      await pollUpTo(
        async () => {
          if (!(await e.relay.inspect()).State.Running) return true;
          const m = (
            (await e.relay.stats({ stream: false, "one-shot": true } as object)) as {
              memory_stats?: { usage?: number; max_usage?: number };
            }
          ).memory_stats;
          const now = Math.max(m?.max_usage ?? 0, m?.usage ?? 0);
          flat = now <= peak + MiB ? flat + 1 : 0;
          peak = Math.max(peak, now);
          return flat >= 3;
        },
        120,
        1_000,
      );
      const relay = (await e.relay.inspect()).State;
      const written = lines.reduce((a, l) => a + Number(l.split(" ")[1]), 0);
      console.log(
        `relay: ${relay.Running ? "running" : `exited (OOMKilled=${relay.OOMKilled})`}, peak ${(peak / MiB).toFixed(1)} MiB of ${RELAY_LIMITS.memoryBytes / MiB}; ` +
          `the sidecar wrote ${written} of ${4 * per} requests (${answer} B answers): ${lines.join(", ")}`,
      );
      expect(relay.OOMKilled).toBe(false);
      expect(relay.Running).toBe(true);
      expect(lines.filter((l) => l.startsWith("STALLED"))).toHaveLength(4);
      expect(peak).toBeLessThan(RELAY_LIMITS.memoryBytes / 2);
      // The same episode's other connection: answered through the same relay.
      const other = await execIn(flood, ["node", "-e", BUDGET]);
      expect(other.stdout.trim()).toMatch(/^HTTP\/1\.1 200/);
      // Nothing stopped the sidecar: the relay was never lost.
      expect((await flood.inspect()).State.Running).toBe(true);
      expect(e.topo.meterLoss?.()).toBeUndefined();
    } finally {
      await e.scope.dispose();
    }
  }, 600_000);

  it("a relay that runs out of memory is the policy's doing (policy_relay_oom); one lost otherwise is ours (sidecar_killed)", async () => {
    const tag = randomBytes(3).toString("hex");
    const [oom, lost] = await Promise.all([episodeOn(`relay-oom-${tag}`), episodeOn(`relay-lost-${tag}`)]);
    try {
      const sidecars = await Promise.all([oom, lost].map((e) => sidecarOf(e, ["sleep", "600"])));
      // Memory the relay's container cannot hold (a process of ours in it; the engine records the OOM).
      await execIn(oom.relay, ["node", "-e", "const a = []; for (;;) a.push(Buffer.alloc(1 << 20, 1));"], {
        signal: AbortSignal.timeout(60_000),
      }).catch(() => undefined);
      await Promise.all([oom.relay.kill({ signal: "SIGKILL" }), lost.relay.kill({ signal: "SIGKILL" })]);
      for (const c of sidecars) {
        await pollUpTo(async () => !(await c.inspect()).State.Running, 100, 200);
        expect((await c.inspect()).State.Running).toBe(false);
      }
      expect([oom.topo.meterLoss?.(), lost.topo.meterLoss?.()]).toEqual(["relay_oom", "relay_lost"]);
      const fault = (e: typeof oom) => outsideKill({ meterLoss: () => e.topo.meterLoss?.() }, "killed");
      expect(fault(oom)).toMatchObject({ class: "policy", code: "policy_relay_oom" });
      expect(fault(lost)).toMatchObject({ class: "infra", code: "sidecar_killed" });
    } finally {
      await Promise.all([oom.scope.dispose(), lost.scope.dispose()]);
    }
    expect(await countLabelled(docker, sb.session.id, oom.episode)).toEqual({ containers: 0, networks: 0 });
  }, 300_000);
});
