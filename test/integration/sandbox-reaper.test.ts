/**
 * Nothing is left behind: an episode scope removes everything it made (running containers
 * included), and the reaper removes what crashed or killed processes left — also a restarted
 * daemon container's (same hostname and pid, another start) and a recreated one's (its container
 * gone) at once, not at expiry — without touching a live sibling process's objects.
 */
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createContainer, packTar, SIDECAR_LIMITS, startContainer } from "../../src/sandbox/index.js";
import {
  containerIdFromMountinfo,
  LABEL,
  labelsFor,
  newSession,
  type SandboxSession,
} from "../../src/sandbox/labels.js";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import { BASE_IMAGE, countLabelled, openTestSandbox } from "../helpers/sandbox.js";

let sb: Sandbox;
let docker: Docker;
const tag = randomBytes(3).toString("hex");
const extraSessions: SandboxSession[] = [];

beforeAll(async () => {
  sb = await openTestSandbox({ firewall: "off" });
  docker = sb.docker;
});

afterAll(async () => {
  for (const s of extraSessions) {
    const label = [`${LABEL.session}=${s.id}`];
    for (const c of await docker.listContainers({ all: true, filters: { label } }))
      await docker.getContainer(c.Id).remove({ force: true });
    for (const n of await docker.listNetworks({ filters: { label } })) await docker.getNetwork(n.Id).remove();
  }
  expect(await countLabelled(docker, sb.session.id)).toEqual({ containers: 0, networks: 0 });
  await sb.close();
});

async function netWith(name: string, labels: Record<string, string>): Promise<void> {
  await docker.createNetwork({ Name: name, Internal: true, Labels: labels });
}

async function exists(kind: "network" | "container", name: string): Promise<boolean> {
  try {
    if (kind === "network") await docker.getNetwork(name).inspect();
    else await docker.getContainer(name).inspect();
    return true;
  } catch {
    return false;
  }
}

describe("episode scope", () => {
  it("removes running containers and their networks, idempotently", async () => {
    const scope = sb.openScope(`scope-${tag}`, 600_000);
    const topo = await sb.createTopology(scope);
    const name = `trajrl-scope-${tag}-c`;
    scope.trackContainer(name);
    const c = await createContainer(docker, scope.runtime, {
      name,
      image: BASE_IMAGE,
      cmd: ["sleep", "600"],
      labels: scope.labels("agent"),
      limits: SIDECAR_LIMITS,
      network: { kind: "network", name: topo.agentNet.name },
    });
    await startContainer(c);
    scope.trackContainer(`trajrl-scope-${tag}-never-created`);
    expect(await countLabelled(docker, sb.session.id, scope.episodeId)).toEqual({
      containers: 1,
      networks: 2,
    });
    expect(sb.reaper.liveEpisodes()).toContain(scope.episodeId);
    await Promise.all([scope.dispose(), scope.dispose()]);
    await scope.dispose();
    expect(await countLabelled(docker, sb.session.id, scope.episodeId)).toEqual({
      containers: 0,
      networks: 0,
    });
    expect(sb.reaper.liveEpisodes()).not.toContain(scope.episodeId);
  }, 60_000);
});

describe("reaper", () => {
  it("removes ours that are not live, a dead owner's (gone, restarted, recreated) and expired ones; keeps live ones", async () => {
    const now = Date.now() / 1000;
    const deadPid = spawnSync(process.execPath, ["-e", ""]).pid!;
    const sibling = newSession(); // same host, this (alive) pid: a live sibling process
    const dead = { ...newSession(), pid: deadPid };
    const old = { ...newSession(), host: "elsewhere" };
    // A restarted daemon container: same hostname, and its new process got the old one's pid.
    const restarted = { ...newSession(), boot: `${sibling.boot?.split(":")[0]}:1` };
    // A recreated daemon container: another hostname, and its container is gone from the engine.
    const recreated = { ...newSession(), host: "gone-host", container: "f0".repeat(32) };
    extraSessions.push(sibling, dead, old, restarted, recreated);
    const live = sb.openScope(`live-${tag}`, 600_000);
    const cases: Array<[string, Record<string, string>, boolean]> = [
      [`trajrl-r-${tag}-mine-gone`, labelsFor(sb.session, "net-agent", `gone-${tag}`, now + 600), false],
      [`trajrl-r-${tag}-mine-live`, live.labels("net-agent"), true],
      [`trajrl-r-${tag}-sibling`, labelsFor(sibling, "net-agent", "x", now + 600), true],
      [`trajrl-r-${tag}-dead`, labelsFor(dead, "net-agent", "x", now + 600), false],
      [`trajrl-r-${tag}-expired`, labelsFor(old, "net-agent", "x", now - 5), false],
      [`trajrl-r-${tag}-elsewhere`, labelsFor(old, "net-agent", "y", now + 600), true],
      [`trajrl-r-${tag}-restarted`, labelsFor(restarted, "net-meter", "z", now + 600), false],
      [`trajrl-r-${tag}-recreated`, labelsFor(recreated, "net-meter", "z", now + 600), false],
    ];
    expect(sibling.boot).toMatch(/^[0-9a-f-]+:\d+$/);
    for (const [name, labels] of cases) await netWith(name, labels);
    // A container of the dead process, still running.
    const cname = `trajrl-r-${tag}-dead-c`;
    const c = await createContainer(docker, sb.episodeRuntime!, {
      name: cname,
      image: BASE_IMAGE,
      cmd: ["sleep", "600"],
      labels: labelsFor(dead, "sidecar", "x", now + 600),
      limits: SIDECAR_LIMITS,
      network: { kind: "none" },
    });
    await startContainer(c);

    const swept = await sb.reaper.sweep();
    // Ours is among what was swept (other test files kill processes too: their leftovers go as well).
    expect(swept.containers).toContain(c.id);
    for (const [name, , keep] of cases) expect([name, await exists("network", name)]).toEqual([name, keep]);
    expect(await exists("container", cname)).toBe(false);

    await live.dispose();
    // Now the periodic reaper takes the formerly live one (its episode is no longer live).
    const mineLive = cases[1]![0];
    sb.reaper.start(100);
    const t0 = performance.now();
    while ((await exists("network", mineLive)) && performance.now() - t0 < 10_000)
      await new Promise((r) => setTimeout(r, 100));
    sb.reaper.stop();
    expect(await exists("network", mineLive)).toBe(false);
  }, 60_000);
});

describe("whose objects: a process on the host is in no container", () => {
  it("while the engine copies files in and out of a running container, a new session names no container", async () => {
    // Docker 20.10 mounts a running container's files, /etc/hostname among them, into the host's
    // mount table for the length of each archive call. A session opened then took that container
    // for its own: its episodes carried the label, and once that container was gone every other
    // process's reaper removed them as a dead owner's (the suite's "killed from outside" faults).
    const name = `trajrl-mounts-${tag}`;
    const c = await createContainer(docker, sb.episodeRuntime!, {
      name,
      image: BASE_IMAGE,
      cmd: ["sleep", "600"],
      labels: labelsFor(sb.session, "agent", `mounts-${tag}`, Date.now() / 1000 + 600),
      limits: SIDECAR_LIMITS,
      network: { kind: "none" },
    });
    try {
      await startContainer(c);
      const file = await packTar([{ name: "probe.txt", data: "probe\n" }]);
      let copying = true;
      const copies = (async () => {
        for (let i = 0; copying && i < 2_000; i++) {
          await c.putArchive(file, { path: "/tmp" });
          const out = (await c.getArchive({ path: "/tmp/probe.txt" })) as NodeJS.ReadableStream;
          for await (const _ of out) {
            // drain
          }
        }
      })();
      const shownFiles = `/containers/${c.id}/hostname `;
      const named = new Set<string>();
      let reads = 0;
      let shown = 0;
      const until = Date.now() + 60_000;
      // Read the mount table between the copies until it has shown the container's files a few times.
      while (Date.now() < until && shown < 5) {
        for (let k = 0; k < 200; k++, reads++) {
          const table = readFileSync("/proc/self/mountinfo", "utf8");
          if (table.includes(shownFiles)) shown++;
          const own = containerIdFromMountinfo(table);
          if (own) named.add(own);
        }
        await new Promise((r) => setImmediate(r));
      }
      copying = false;
      await copies;
      console.log(
        `mount table: ${reads} reads, the container's files shown in ${shown}, a session named: ${[...named].join(",") || "none"}`,
      );
      expect(shown, "the engine showed the container's files in this host's mount table").toBeGreaterThan(0);
      expect([...named]).toEqual([]);
      expect(newSession().container).toBeUndefined();
    } finally {
      await c.remove({ force: true });
    }
  }, 120_000);
});
