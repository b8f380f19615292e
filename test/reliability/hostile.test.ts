/**
 * Hostile policies (test/fixtures/hostile/): each runs as a real episode — real sidecar, agent,
 * meter, Engy simulator, Docker — and must end as a scored or failed episode with the right failure
 * class, the cap holding, nothing left behind, and this process (the daemon's side of an episode)
 * keeping its memory. Network targets are only servers this test starts: one on the host, one in a
 * container on a network of its own.
 */
import { readFileSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EpisodeResult, EpisodeScenario, RunEpisodeOptions } from "../../src/episode/index.js";
import { LABEL } from "../../src/sandbox/labels.js";
import {
  type EpisodeRig,
  packOf,
  REPO_ROOT,
  runTestEpisode,
  shippedScenario,
  startEpisodeRig,
} from "../helpers/episode.js";
import { BASE_IMAGE, perlServer, TEST_EPISODE_RUNTIME } from "../helpers/sandbox.js";

const FAST = "reproducible-tarball";
const HOSTILE = join(REPO_ROOT, "test/fixtures/hostile");
const MiB = 1024 * 1024;

/**
 * The gVisor pass (vitest.config.ts) re-runs what the runtime can change. These rules are the
 * daemon's own — the meter's allowlist and cap, the watchdog, provenance — and run once, under runc.
 */
const daemonSide = it.skipIf(TEST_EPISODE_RUNTIME !== "runc");

let rig: EpisodeRig;
let out: string;
let fast: EpisodeScenario;
let docker: Docker;

beforeAll(async () => {
  rig = await startEpisodeRig({ seed: 11 });
  docker = rig.sandbox.docker;
  out = await mkdtemp(join(tmpdir(), "trajrl-hostile-"));
  fast = await shippedScenario(FAST);
  await Promise.all([rig.images.sidecar(), rig.images.scenario(fast)]);
}, 900_000);

afterAll(async () => {
  await rig?.close();
  if (out) await rm(out, { recursive: true, force: true });
});

function hostile(name: string, extra: Record<string, string> = {}) {
  return packOf({ "policy.py": readFileSync(join(HOSTILE, name, "policy.py"), "utf8"), ...extra });
}

async function episode(
  pack: ReturnType<typeof packOf>,
  over: Partial<RunEpisodeOptions> = {},
): Promise<EpisodeResult> {
  const { r } = await runTestEpisode(rig, {
    pack,
    scenario: fast,
    runsDir: out,
    timeouts: { agentMs: 90_000, stopGraceMs: 2_000 },
    report: (r) =>
      `episode ${r.status} ${r.failure ? `${r.failure.class}/${r.failure.code}` : "clean"} quality ${r.quality} cost $${r.cost_usd} agent ${Math.round(r.timings.agent_ms)} ms; notes ${r.notes.join(",")}`,
    ...over,
  });
  return r;
}

const policyLog = (r: EpisodeResult) => readFile(join(r.artifacts.dir, "policy.log"), "utf8").catch(() => "");
const probeOf = async (r: EpisodeResult) => {
  const line = (await policyLog(r)).split("\n").find((l) => l.startsWith("PROBE "));
  expect(line, "the policy printed its probe").toBeDefined();
  return JSON.parse(line!.slice(6)) as Record<string, unknown>;
};

describe("hostile policies", () => {
  daemonSide(
    "off the allowlist: refused by the meter, never forwarded, a policy fault",
    async () => {
      const before = rig.sim.stats().requests;
      const r = await episode(hostile("off-allowlist"));
      expect(r.usage?.refused_model).toBeGreaterThan(0);
      expect(r.usage?.calls).toBe(0); // nothing billable went out
      expect(r.cost_usd).toBe(0);
      expect(rig.sim.stats().requests).toBe(before);
      expect(r.status).toBe("scored");
      expect(r.failure?.class).toBe("policy");
      expect(r.quality).toBe(0);
    },
    300_000,
  );

  daemonSide(
    "50 parallel max-size calls per turn: the cap holds to the pico-dollar",
    async () => {
      const capUsd = 0.05;
      const r = await episode(hostile("overspend"), { capUsd });
      const u = r.usage!;
      expect(u.cost_usd).toBeLessThanOrEqual(capUsd);
      expect(u.overshoot_usd).toBe(0);
      expect(u.reserved_usd).toBe(0);
      expect(u.refused_cap).toBeGreaterThan(0);
      // The receipts add up to what the episode was charged.
      const receipts = rig.meter.receiptsFor(r.episode_id);
      const pico = receipts.reduce((a, x) => a + BigInt(x.usd_pico), 0n);
      expect(pico <= BigInt(Math.round(capUsd * 1e12))).toBe(true);
      expect(Number(pico) / 1e12).toBe(u.cost_usd);
      expect(["scored", "failed"]).toContain(r.status);
      if (r.failure) expect(r.failure.class).toBe("policy");
    },
    300_000,
  );

  describe("network", () => {
    let host: Server;
    let hostHits = 0;
    let other: { net: string; container: string; ip: string } | undefined;

    beforeAll(async () => {
      // A server of ours on the host, listening on every address (the worst case for a firewall).
      host = createServer((s) => {
        hostHits++;
        s.end("pong host\n");
      });
      await new Promise<void>((r) => host.listen(0, "0.0.0.0", r));
      // A container of ours on a network of its own (internal: no route out), standing in for
      // another episode's container and for anything else beyond the episode.
      const tag = Math.random().toString(16).slice(2, 10);
      const net = await docker.createNetwork({
        Name: `trajrl-hostile-other-${tag}`,
        Internal: true,
        CheckDuplicate: true,
      });
      const c = await docker.createContainer({
        name: `trajrl-hostile-other-${tag}`,
        Image: BASE_IMAGE,
        Cmd: perlServer(7000, "other"),
        HostConfig: { NetworkMode: net.id },
      });
      await c.start();
      const info = await c.inspect();
      const ip = Object.values(info.NetworkSettings.Networks)[0]!.IPAddress;
      other = { net: net.id, container: c.id, ip };
    }, 120_000);

    afterAll(async () => {
      host?.close();
      if (other) {
        await docker
          .getContainer(other.container)
          .remove({ force: true })
          .catch(() => {});
        await docker
          .getNetwork(other.net)
          .remove()
          .catch(() => {});
      }
    });

    it("reaches the meter and nothing else: not the host, not another network, no Docker socket", async () => {
      const port = (host.address() as { port: number }).port;
      const targets = JSON.stringify({ host_port: port, other_ip: other!.ip, other_port: 7000 });
      const r = await episode(hostile("network-probe", { "targets.json": targets }));
      const probe = await probeOf(r);
      expect(probe.meter).toBe("reached"); // the control: the probe works
      const reached = Object.entries(probe).filter(([k, v]) => k !== "meter" && v === "reached");
      expect(reached).toEqual([]);
      expect(probe.docker_sock).toBe(false);
      expect(Object.keys(probe).some((k) => k.startsWith("host_via_gateway_"))).toBe(true);
      expect(hostHits).toBe(0);
      // It served honestly after probing: the episode ran to a score.
      expect(r.status).toBe("scored");
      expect(r.failure?.class ?? "none").not.toBe("infra");
    }, 300_000);
  });

  it("fork bomb: the pids limit holds, the episode ends, the host keeps its processes", async () => {
    const r = await episode(hostile("fork-bomb"));
    expect(["scored", "failed"]).toContain(r.status);
    expect(r.failure?.class ?? "policy").not.toBe("infra");
    // The engine still answers and the next episode's world is clean (checked in episode()).
    await docker.ping();
  }, 300_000);

  it("memory bomb: OOM-killed inside its 1 GiB; the agent is stopped at once, policy_oom", async () => {
    const r = await episode(hostile("memory-bomb"), {
      timeouts: { agentMs: 60_000, stopGraceMs: 2_000, watchdogFirstCallMs: 30_000 },
    });
    expect(r.status).toBe("scored");
    expect(r.failure).toMatchObject({ class: "policy", code: "policy_oom" });
    expect(r.agent?.killed_by).toBe("policy_exited");
    expect(r.quality).toBe(0);
  }, 300_000);

  it("fills its tmpfs: stopped at the 64 MiB limit with ENOSPC, then scores normally", async () => {
    const r = await episode(hostile("fill-tmpfs"));
    const probe = await probeOf(r);
    expect(probe.error).toMatch(/No space left/);
    expect(Number(probe.written)).toBeLessThanOrEqual(64 * MiB);
    expect(r.status).toBe("scored");
    expect(r.failure?.class ?? "none").not.toBe("infra");
  }, 300_000);

  it("floods its log: the collected log is capped and this process's memory stays bounded", async () => {
    const rss0 = process.memoryUsage().rss;
    const r = await episode(hostile("log-flood"));
    const log = await policyLog(r);
    // It wrote 64 MiB before serving (then kept going); Docker's log rotation (8 MiB, one file)
    // and our read cap bound what is kept, however much was written.
    expect(Buffer.byteLength(log)).toBeLessThanOrEqual(9 * MiB);
    expect(r.status).toBe("scored");
    expect(r.agent.turns).toBeGreaterThan(0);
    expect(process.memoryUsage().rss - rss0).toBeLessThan(300 * MiB);
    expect(r.failure?.class ?? "none").not.toBe("infra");
  }, 300_000);

  it("answers with gigabytes: the agent stops reading at its cap, a policy fault, memory bounded", async () => {
    const rss0 = process.memoryUsage().rss;
    const r = await episode(hostile("gigabyte-answer"));
    expect(r.status).toBe("scored");
    expect(r.failure?.class).toBe("policy");
    expect(r.quality).toBe(0);
    const turns = await readFile(join(r.artifacts.dir, "turns.jsonl"), "utf8").catch(() => "");
    expect(`${turns}${r.notes.join(" ")}${JSON.stringify(r.agent)}`).toMatch(
      /llm_response_too_large|llm_error/,
    );
    expect(process.memoryUsage().rss - rss0).toBeLessThan(300 * MiB);
  }, 300_000);

  daemonSide(
    "never answers: the watchdog stops it as policy_stalled",
    async () => {
      const r = await episode(hostile("never-answers"), {
        timeouts: { agentMs: 90_000, watchdogFirstCallMs: 3_000, watchdogPollMs: 200, stopGraceMs: 2_000 },
      });
      expect(r.status).toBe("scored");
      expect(r.failure).toMatchObject({ class: "policy", code: "policy_stalled" });
    },
    300_000,
  );

  it("crashes mid-run: the agent is stopped at once, policy_crashed with the exit status", async () => {
    const r = await episode(hostile("crash-mid-run"), {
      timeouts: { agentMs: 90_000, watchdogFirstCallMs: 60_000, stopGraceMs: 2_000 },
    });
    expect(r.status).toBe("scored");
    expect(r.failure).toMatchObject({ class: "policy", code: "policy_crashed" });
    expect(r.failure?.message).toContain("status 3");
    expect(r.agent?.killed_by).toBe("policy_exited");
    expect(r.cost_usd).toBe(0);
  }, 300_000);

  it("a sidecar killed from outside mid-run is infra (re-run), not the policy's crash", async () => {
    const session = rig.sandbox.session.id;
    const running = (role: string) =>
      docker.listContainers({
        filters: { label: [`${LABEL.session}=${session}`, `${LABEL.role}=${role}`], status: ["running"] },
      });
    // Kill the sidecar as an operator would once the agent runs (the policy never answers, so the
    // agent waits on it; the watchdog is far away).
    const killer = (async () => {
      for (let i = 0; i < 600; i++) {
        const [agent] = await running("agent");
        const [sidecar] = await running("sidecar");
        if (agent && sidecar) {
          await sleep(500);
          await docker.getContainer(sidecar.Id).kill();
          return true;
        }
        await sleep(100);
      }
      return false;
    })();
    const r = await episode(hostile("never-answers"), {
      timeouts: { agentMs: 90_000, watchdogFirstCallMs: 60_000, stopGraceMs: 2_000 },
    });
    expect(await killer).toBe(true);
    expect(r.status).toBe("failed");
    expect(r.failure).toMatchObject({ class: "infra", code: "sidecar_killed" });
    expect(r.notes).not.toContain("policy_crashed");
  }, 300_000);

  it("a sidecar killed from outside before it is healthy is infra alone, never also the policy's crash", async () => {
    const session = rig.sandbox.session.id;
    const killer = (async () => {
      for (let i = 0; i < 600; i++) {
        const [sidecar] = await docker.listContainers({
          filters: { label: [`${LABEL.session}=${session}`, `${LABEL.role}=sidecar`], status: ["running"] },
        });
        if (sidecar) {
          await sleep(1_000);
          await docker.getContainer(sidecar.Id).kill();
          return true;
        }
        await sleep(100);
      }
      return false;
    })();
    const r = await episode(hostile("slow-start"), { timeouts: { healthMs: 90_000 } });
    expect(await killer).toBe(true);
    expect(r.status).toBe("failed");
    expect(r.failure).toMatchObject({ class: "infra", code: "sidecar_killed" });
    expect(r.notes).not.toContain("policy_crashed");
  }, 300_000);

  it("crashes at start: policy_crashed, nothing billed", async () => {
    const r = await episode(hostile("crash-at-start"), { timeouts: { healthMs: 30_000 } });
    expect(r.status).toBe("scored");
    expect(r.failure).toMatchObject({ class: "policy", code: "policy_crashed" });
    expect(r.usage?.calls ?? 0).toBe(0);
    expect(await policyLog(r)).toContain("crashing on purpose");
  }, 300_000);

  daemonSide(
    "claims model answers it did not get: reported as upstream reports it, and under the strict rule unmetered_answer, quality 0",
    async () => {
      // Upstream's rule (the default): the forgery is reported with the score, never scored.
      const reported = await episode(hostile("fabricated-answer"));
      expect(reported.provenance?.total).toBeGreaterThan(0);
      expect(reported.provenance?.matched).toBe(0);
      expect(reported.provenance?.coverage).toBe(0);
      expect(reported.failure?.code).not.toBe("unmetered_answer");
      // The strict rule, opt-in for local evaluation.
      const r = await episode(hostile("fabricated-answer"), { strictProvenance: true });
      expect(r.answer_provenance?.turns).toBeGreaterThan(0);
      expect(r.answer_provenance?.unmatched).toBe(r.answer_provenance?.turns);
      expect(r.status).toBe("scored");
      expect(r.failure).toMatchObject({ class: "policy", code: "unmetered_answer" });
      expect(r.quality).toBe(0);
      // It did call a model: the receipts exist, they just do not match what the agent was handed.
      expect(r.usage?.calls).toBeGreaterThan(0);
    },
    300_000,
  );

  daemonSide(
    "an honest policy's every answer matches a receipt",
    async () => {
      const r = await episode(
        packOf({ "policy.json": JSON.stringify({ kind: "pin", model: "glm-5.3-flash" }) }),
      );
      expect(r.answer_provenance?.turns).toBeGreaterThan(0);
      expect(r.answer_provenance?.unmatched).toBe(0);
      expect(r.provenance?.coverage).toBe(1);
      expect(r.failure?.code).not.toBe("unmetered_answer");
    },
    300_000,
  );
});
