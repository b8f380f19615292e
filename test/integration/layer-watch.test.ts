/**
 * The disk watchdog counts inodes too (issue 36 item 8): a million empty files are 0 bytes to the
 * engine (and took it 44 s to measure), so the byte bound alone never fired. Real containers on
 * the real engine; the counter is a helper container that walks the layer's upper directory.
 *  - a layer filling with empty files is caught past its inode bound, long before the files stop;
 *  - a directory its owner closed (mode 000, another uid) is counted all the same;
 *  - the registry bench's grader that makes files without end is stopped: verifier_disk_limit;
 *  - the helper goes with the watch, and everything with the scope;
 *  - an image that cannot count (no `find`) keeps no helper: the bytes alone are watched, said once.
 */
import { randomBytes } from "node:crypto";
import { Writable } from "node:stream";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gradeBenchDeliverable } from "../../src/episode/bench-verifier.js";
import { createLogger } from "../../src/log.js";
import {
  createContainer,
  type EpisodeScope,
  execIn,
  openLayerCounter,
  type Sandbox,
  SIDECAR_LIMITS,
  startContainer,
  watchLayer,
} from "../../src/sandbox/index.js";
import { BASE_IMAGE, countLabelled, openTestSandbox } from "../helpers/sandbox.js";

let sb: Sandbox;
let docker: Docker;
const episode = `layer-${randomBytes(3).toString("hex")}`;
let scope: EpisodeScope;

beforeAll(async () => {
  sb = await openTestSandbox({ firewall: "off" });
  docker = sb.docker;
  scope = sb.openScope(episode, 600_000);
}, 120_000);

afterAll(async () => {
  await scope?.dispose();
  if (sb) expect(await countLabelled(docker, sb.session.id)).toEqual({ containers: 0, networks: 0 });
  await sb?.close();
});

async function sleeper(name: string, user = "0:0", image = BASE_IMAGE): Promise<Docker.Container> {
  const full = `trajrl-${episode}-${name}`;
  scope.trackContainer(full);
  const c = await createContainer(docker, scope.runtime, {
    name: full,
    image,
    cmd: ["sleep", "600"],
    user,
    labels: scope.labels("agent"),
    limits: SIDECAR_LIMITS,
    network: { kind: "none" },
  });
  await startContainer(c);
  return c;
}

const helpers = async () =>
  (
    await docker.listContainers({
      filters: { label: [`trajrl.episode=${episode}`, "trajrl.role=layer-count"] },
    })
  ).length;

describe("inodes of a writable layer", () => {
  it("a layer filling with empty files is caught past its inode bound, at 0 bytes; the counter goes with the watch", async () => {
    const c = await sleeper("many");
    const stop = new AbortController();
    const seen: { bytes?: number; inodes?: number } = {};
    const watch = watchLayer(
      c,
      { limitBytes: 1024 ** 3, limitInodes: 20_000, pollMs: 1_000, docker, scope },
      stop.signal,
      seen,
    );
    // 300 000 empty files; the watch must fire long before the last (then the container is killed).
    const making = execIn(c, ["sh", "-c", "mkdir /many && cd /many && seq 1 300000 | xargs touch"], {
      signal: AbortSignal.timeout(600_000),
    }).finally(() => stop.abort());
    const over = await watch;
    await c.kill({ signal: "SIGKILL" }).catch(() => undefined);
    await making.catch(() => undefined);
    console.log(`over: ${JSON.stringify(over)}`);
    expect(over?.inodes).toBeGreaterThan(20_000);
    expect(over!.inodes!).toBeLessThan(300_000);
    expect(over?.bytes ?? 0).toBeLessThan(64 * 1024 * 1024);
    // The watch has returned: its counter is already gone.
    expect(await helpers()).toBe(0);
  }, 600_000);

  it("a directory its owner closed is counted all the same", async () => {
    const c = await sleeper("closed", "10000:10000");
    await execIn(c, [
      "sh",
      "-c",
      "mkdir -p /tmp/closed/in && cd /tmp/closed/in && seq 1 25000 | xargs touch && chmod 000 /tmp/closed/in /tmp/closed",
    ]);
    const stop = new AbortController();
    const over = await Promise.race([
      watchLayer(
        c,
        { limitBytes: 1024 ** 3, limitInodes: 20_000, pollMs: 1_000, docker, scope },
        stop.signal,
      ),
      new Promise<void>((r) => setTimeout(r, 120_000).unref()).then(() => void stop.abort()),
    ]);
    stop.abort();
    expect(over?.inodes).toBeGreaterThan(20_000);
  }, 300_000);

  it("the registry bench's grader that makes files without end is stopped: verifier_disk_limit", async () => {
    const g = sb.openScope(`${episode}-g`, 600_000);
    try {
      const grade = await gradeBenchDeliverable({
        engine: sb.episodeEngine,
        networks: sb.networks,
        scope: g,
        image: BASE_IMAGE,
        testFiles: {
          "test.sh": Buffer.from(
            "mkdir /many && cd /many && seq 1 300000 | xargs touch; echo 1 > /logs/verifier/reward.txt\n",
          ),
        },
        agentOutputPath: "/tmp/out.txt",
        deliverable: Buffer.from("x"),
        timeoutMs: 600_000,
        network: "none",
        disk: { limitBytes: 1024 ** 3, limitInodes: 20_000, pollMs: 1_000 },
      });
      console.log(`grader: ${grade.failure?.code} ${grade.failure?.message}`);
      expect(grade.failure).toMatchObject({ class: "policy", code: "verifier_disk_limit" });
      expect(grade.failure?.message).toContain("files and directories");
      expect(grade.quality).toBe(0);
    } finally {
      await g.dispose();
    }
  }, 600_000);

  it("an image that cannot count keeps no helper: the bytes alone are watched, said once", async () => {
    // The base image without `find`, committed from a container of ours (removed at the end).
    const donor = await sleeper("donor");
    await execIn(donor, ["rm", "/usr/bin/find"]);
    const image = `trajrl-test/no-find:${randomBytes(4).toString("hex")}`;
    const [repo, tag] = image.split(":");
    await donor.commit({ repo, tag });
    try {
      const c = await sleeper("nofind", "0:0", image);
      const lines: string[] = [];
      const log = createLogger({
        level: "warn",
        destination: new Writable({
          write(chunk, _e, cb) {
            lines.push(String(chunk));
            cb();
          },
        }),
      });
      expect(await openLayerCounter(c, { docker, scope, log })).toBeUndefined();
      expect(await helpers()).toBe(0);
      expect(lines.join("")).toContain("layer.inode_count_unavailable");
      // The byte bound still fires.
      await execIn(c, ["sh", "-c", "head -c 3000000 /dev/zero > /big"]);
      const stop = new AbortController();
      const timer = setTimeout(() => stop.abort(), 120_000);
      const over = await watchLayer(
        c,
        { limitBytes: 1_000_000, limitInodes: 20_000, pollMs: 500, docker, scope, log },
        stop.signal,
      );
      clearTimeout(timer);
      expect(over?.bytes).toBeGreaterThan(1_000_000);
      expect(over?.inodes).toBeUndefined();
      expect(await helpers()).toBe(0);
    } finally {
      await docker
        .getImage(image)
        .remove({ force: true })
        .catch(() => undefined);
    }
  }, 300_000);
});
