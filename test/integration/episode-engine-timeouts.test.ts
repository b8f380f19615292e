/**
 * A hung engine ends an episode, never holds it (issue 20, item 10): every Docker API call the
 * episode makes has a deadline. The episode talks to the real engine through a proxy of this test
 * (an HTTP proxy on a unix socket in front of the engine's socket) that holds one chosen request
 * unanswered, as a stuck engine would; the client's deadlines are set short (3 s) so each case
 * shows within seconds. Hijacked connections (attach, exec) go to the engine directly: their
 * raw streams are not what is tested here. Real sidecar, agent, meter, simulator.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Dockerode from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProjectImages } from "../../src/bench/index.js";
import type { EpisodeScenario } from "../../src/episode/types.js";
import { boundEngineCalls } from "../../src/sandbox/docker.js";
import { Sandbox } from "../../src/sandbox/sandbox.js";
import {
  type EpisodeRig,
  type EpisodeRun,
  REPO_ROOT,
  runTestEpisode,
  shippedScenario,
  startEpisodeRig,
} from "../helpers/episode.js";
import { countLabelled } from "../helpers/sandbox.js";

const ENGINE = process.env.DOCKER_SOCKET ?? "/var/run/docker.sock";
const CALL_MS = 3_000;

/** Forwards every request to the engine, but leaves the first one matching `stall` unanswered. */
class StallingEngine {
  private server: Server;
  stall: RegExp | undefined;
  stalled: string[] = [];
  private held: Array<IncomingMessage> = [];
  private sockets = new Set<Socket>();

  constructor(readonly path: string) {
    this.server = createServer((req, res) => this.forward(req, res));
    this.server.on("connection", (s) => {
      this.sockets.add(s);
      s.on("close", () => this.sockets.delete(s));
    });
  }

  listen(): Promise<void> {
    return new Promise((resolve) => this.server.listen(this.path, resolve));
  }

  /** The first request matching `drop` has its connection closed unanswered (a dropped connection). */
  drop: RegExp | undefined;
  dropped: string[] = [];

  private hold(req: IncomingMessage): boolean {
    const what = `${req.method} ${decodeURIComponent(req.url ?? "")}`;
    if (!this.stall?.test(what)) return false;
    this.stall = undefined; // once
    this.stalled.push(what);
    this.held.push(req);
    return true;
  }

  private forward(req: IncomingMessage, res: ServerResponse): void {
    if (this.hold(req)) return;
    const what = `${req.method} ${decodeURIComponent(req.url ?? "")}`;
    if (this.drop?.test(what)) {
      this.drop = undefined; // once
      this.dropped.push(what);
      res.socket?.destroy();
      return;
    }
    const up = request(
      { socketPath: ENGINE, method: req.method, path: req.url, headers: req.headers, agent: false },
      (ures) => {
        res.writeHead(ures.statusCode ?? 502, ures.headers);
        // Streams (events, logs, archives) answer their headers before any body: pass them on now.
        res.flushHeaders();
        ures.pipe(res);
        res.on("close", () => ures.destroy());
      },
    );
    up.on("error", () => res.destroy());
    req.on("aborted", () => up.destroy());
    req.pipe(up);
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

let rig: EpisodeRig;
let tmp: string;
let proxy: StallingEngine;
let sandbox: Sandbox;
let images: ProjectImages;
let fast: EpisodeScenario;

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "trajrl-engine-timeouts-"));
  rig = await startEpisodeRig({ seed: 11 });
  fast = await shippedScenario("reproducible-tarball");
  await Promise.all([rig.images.sidecar(), rig.images.scenario(fast)]);
  proxy = new StallingEngine(join(tmp, "docker.sock"));
  await proxy.listen();
  const direct = new Dockerode({ socketPath: ENGINE });
  const proxied = new Dockerode({ socketPath: proxy.path });
  type Dial = (o: { hijack?: boolean }, cb: (err: unknown, data: unknown) => void) => void;
  const modem = proxied.modem as unknown as { dial: Dial };
  const viaProxy = modem.dial.bind(modem);
  const viaEngine = (direct.modem as unknown as { dial: Dial }).dial.bind(direct.modem);
  modem.dial = (o, cb) => (o.hijack ? viaEngine(o, cb) : viaProxy(o, cb));
  const docker = boundEngineCalls(proxied, { callMs: CALL_MS, copyMs: CALL_MS });
  sandbox = await Sandbox.open({ docker, reapIntervalMs: 0, episodeRuntime: "runc" });
  images = new ProjectImages(docker, { repoRoot: REPO_ROOT });
}, 900_000);

afterAll(async () => {
  await sandbox?.close();
  await proxy?.close();
  await rig?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

async function episode(stall: RegExp | undefined): Promise<EpisodeRun> {
  proxy.stall = stall;
  proxy.stalled = [];
  const run = await runTestEpisode(rig, {
    sandbox,
    images,
    scenario: fast,
    capUsd: 0.1,
    runsDir: join(tmp, "runs"),
    // An agent of its own: the deliverable at once, no model needed.
    agentCommand: `/bin/sh -c 'printf "print(1)\\n" > /app/mktar.py'`,
    timeouts: { agentMs: 60_000, stopGraceMs: 1_000 },
    // The control test counts what its episode left (on this proxied session); the others do not.
    expectNothingLeft: false,
    report: (r, ms) =>
      `stall ${stall}: held ${JSON.stringify(proxy.stalled)} → ${r.status} ${r.failure ? `${r.failure.class}/${r.failure.code}: ${r.failure.message}` : "clean"} in ${Math.round(ms)} ms`,
  });
  return run;
}

describe("a hung engine call ends the episode as infra, within its deadline", () => {
  it("the control: through the proxy, nothing held, the episode is graded", async () => {
    const { r } = await episode(undefined);
    expect(r.status).toBe("scored");
    expect(r.tests).toBe(6);
    expect(await countLabelled(rig.sandbox.docker, sandbox.session.id, r.episode_id)).toEqual({
      containers: 0,
      networks: 0,
    });
  }, 300_000);

  it.each([
    ["create of the agent's container", /^POST \/[^ ]*containers\/create\?name=trajrl-[^&]*-agent&/],
    ["start of a container", /^POST \/[^ ]*containers\/[^/]+\/start/],
    ["upload into the agent's container", /^PUT \/[^ ]*containers\/[^/]+\/archive\?path=\/$/],
    ["stat of the deliverable", /^HEAD \/[^ ]*containers\/[^/]+\/archive\?path=\/app\/mktar\.py/],
    ["copy of the deliverable", /^GET \/[^ ]*containers\/[^/]+\/archive\?path=\/app\/mktar\.py/],
    // (The disk watchdog's inspects carry ?size=1; the first plain one is the collect's, of the agent.)
    ["inspect of the agent's container", /^GET \/containers\/[0-9a-f]{64}\/json$/],
  ])(
    "%s",
    async (_what, stall) => {
      const { r, ms } = await episode(stall);
      expect(proxy.stalled).toHaveLength(1);
      expect(r.status).toBe("failed");
      expect(r.failure).toMatchObject({ class: "infra", code: "docker_timeout" });
      // Ended by the deadline, not by the test's timeout (the episode itself takes a few seconds).
      expect(ms).toBeLessThan(60_000);
      expect(await countLabelled(rig.sandbox.docker, sandbox.session.id, r.episode_id)).toEqual({
        containers: 0,
        networks: 0,
      });
    },
    300_000,
  );

  it("a wait the engine drops while the policy boots is asked again: the episode is graded", async () => {
    // The first wait of an episode is the health gate's, on the sidecar. Dropped, it once ended the
    // episode as `aborted` (infra, re-run) although nothing had happened to the policy.
    proxy.drop = /^POST \/[^ ]*containers\/[^/]+\/wait\?condition=not-running/;
    proxy.dropped = [];
    const { r } = await episode(undefined);
    expect(proxy.dropped).toHaveLength(1);
    expect(r.failure).toBeNull();
    expect(r.status).toBe("scored");
    expect(r.tests).toBe(6);
  }, 300_000);

  it("a hung log read costs the logs only: the episode is graded", async () => {
    const { r } = await episode(/^GET \/[^ ]*containers\/[^/]+\/logs/);
    expect(proxy.stalled).toHaveLength(1);
    expect(r.status).toBe("scored");
    expect(r.tests).toBe(6);
  }, 300_000);
});
