/**
 * The sidecar image on the real Docker engine, run the way an episode runs it: uid 10001,
 * read-only root, only a small tmpfs at /tmp, every capability dropped, an internal network, the
 * policy files uploaded as an archive before start. The upstream is a recording server of this
 * test, bound to the gateway of the test's own internal network (the container has no other route).
 *
 * The image is built here through dockerode from sidecarBuildContext() when no image of the same
 * context hash exists, and removed afterwards if this test built it.
 */
import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import type Docker from "dockerode";
import tar from "tar-stream";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  SDK_PYTHONPATH,
  SDK_SIDECAR_PATH,
  sdkSingleFile,
  sidecarBuildContext,
} from "../../src/policy/index.js";
import { requireDocker } from "../helpers/docker.js";
import { type FakeUpstream, startFakeUpstream } from "../helpers/sidecar-upstream.js";

// Not "trajrl.*": the sandbox reaper of concurrent tests must not mistake these for its own.
const LABELS = { "org.trajrl.test": "sidecar-image" };
const TOKEN = `ep-${randomBytes(12).toString("hex")}`;
const PUBLIC_EXAMPLE = readFileSync(
  new URL("../../examples/policies/public_sdk_example/policy/policy.py", import.meta.url),
  "utf8",
);

let docker: Docker;
let image: string;
let builtHere = false;
let network: Docker.Network;
let netName: string;
let gateway: string;
let upstream: FakeUpstream;
const containers: Docker.Container[] = [];

function contextTar(): { stream: NodeJS.ReadableStream; hash: string } {
  const ctx = sidecarBuildContext();
  const pack = tar.pack();
  const h = createHash("sha256");
  for (const f of ctx.files) {
    const data = readFileSync(join(ctx.root, f));
    h.update(`${f}\0`).update(data);
    pack.entry({ name: f, mode: 0o644, mtime: new Date(0) }, data);
  }
  pack.finalize();
  return { stream: pack as unknown as NodeJS.ReadableStream, hash: h.digest("hex").slice(0, 12) };
}

async function ensureImage(): Promise<void> {
  const { stream, hash } = contextTar();
  image = `trajrl-sidecar-test:${hash}`;
  try {
    await docker.getImage(image).inspect();
    return;
  } catch {
    // not there: build it
  }
  const out = await docker.buildImage(stream, {
    t: image,
    dockerfile: sidecarBuildContext().dockerfile,
    labels: LABELS,
    rm: true,
    forcerm: true,
  });
  const events = await new Promise<{ error?: string; errorDetail?: { message: string }; stream?: string }[]>(
    (resolve, reject) => docker.modem.followProgress(out, (err, res) => (err ? reject(err) : resolve(res))),
  );
  const failed = events.find((e) => e.error || e.errorDetail);
  if (failed) throw new Error(`sidecar image build failed: ${failed.error ?? failed.errorDetail?.message}`);
  builtHere = true;
}

async function policyArchive(files: Record<string, string>): Promise<NodeJS.ReadableStream> {
  const pack = tar.pack();
  for (const [name, text] of Object.entries(files)) pack.entry({ name, mode: 0o644 }, text);
  pack.finalize();
  return pack as unknown as NodeJS.ReadableStream;
}

interface Started {
  container: Docker.Container;
  ip: string;
}

async function runSidecar(
  files: Record<string, string>,
  opts: { start?: boolean; cmd?: string[]; env?: string[] } = {},
): Promise<Started> {
  const container = await docker.createContainer({
    Image: image,
    name: `sidecar-image-test-${randomBytes(4).toString("hex")}`,
    Labels: LABELS,
    Env: [
      "POLICY_PORT=8800",
      `UPSTREAM_URL=http://${gateway}:${new URL(upstream.url).port}/v1`,
      `EPISODE_TOKEN=${TOKEN}`,
      "POLICY_DIR=/policy",
      "DEFAULT_MODEL=qwen3.8-27b",
      ...(opts.env ?? []),
    ],
    ...(opts.cmd ? { Cmd: opts.cmd } : {}),
    User: "10001:10001",
    HostConfig: {
      NetworkMode: netName,
      ReadonlyRootfs: true,
      Tmpfs: { "/tmp": "rw,nosuid,nodev,size=16m" },
      // Docker refuses archive uploads onto a read-only root unless the path is a volume: an
      // anonymous one per container, removed with it (remove({v: true})).
      Mounts: [{ Type: "volume", Source: "", Target: "/policy" }],
      CapDrop: ["ALL"],
      SecurityOpt: ["no-new-privileges"],
      Memory: 1024 * 1024 * 1024,
      NanoCpus: 1e9,
      PidsLimit: 128,
      Init: true,
    },
  });
  containers.push(container);
  await container.putArchive(await policyArchive(files), { path: "/policy" });
  if (opts.start !== false) await container.start();
  const info = await container.inspect();
  const ip = info.NetworkSettings.Networks[netName]?.IPAddress ?? "";
  return { container, ip };
}

async function waitHealthy(s: Started, ms = 60_000): Promise<void> {
  const end = performance.now() + ms;
  for (;;) {
    try {
      const r = await request(`http://${s.ip}:8800/health`, { headersTimeout: 1000 });
      await r.body.dump();
      if (r.statusCode === 200) return;
    } catch {
      // not up yet
    }
    const st = await s.container.inspect();
    if (!st.State.Running) throw new Error(`sidecar exited (${st.State.ExitCode}) before health`);
    if (performance.now() > end) throw new Error("sidecar not healthy in time");
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function logs(c: Docker.Container): Promise<{ stdout: string; stderr: string }> {
  const buf = (await c.logs({ stdout: true, stderr: true, follow: false })) as unknown as Buffer;
  // Docker's multiplexed format: 8-byte headers (stream, 0, 0, 0, size BE32).
  let stdout = "";
  let stderr = "";
  for (let i = 0; i + 8 <= buf.length; ) {
    const size = buf.readUInt32BE(i + 4);
    const part = buf.subarray(i + 8, i + 8 + size).toString("utf8");
    if (buf[i] === 2) stderr += part;
    else stdout += part;
    i += 8 + size;
  }
  return { stdout, stderr };
}

beforeAll(async () => {
  docker = await requireDocker();
  await ensureImage();
  netName = `sidecar-image-test-${randomBytes(4).toString("hex")}`;
  network = await docker.createNetwork({
    Name: netName,
    Internal: true,
    Labels: LABELS,
    CheckDuplicate: true,
  });
  const net = await network.inspect();
  const gw = net.IPAM?.Config?.[0]?.Gateway;
  if (!gw) throw new Error(`network ${netName} has no gateway`);
  gateway = gw;
  upstream = await startFakeUpstream({ host: gateway, token: TOKEN });
}, 900_000);

afterAll(async () => {
  await Promise.all(containers.map((c) => c.remove({ force: true, v: true }).catch(() => undefined)));
  await network?.remove().catch(() => undefined);
  await upstream?.close();
  if (builtHere)
    await docker
      .getImage(image)
      .remove({ force: true })
      .catch(() => undefined);
});

describe("sidecar image", () => {
  it("runs the public SDK example as uid 10001 on a read-only root, on an internal network, with its token", async () => {
    const s = await runSidecar({ "policy.py": PUBLIC_EXAMPLE });
    await waitHealthy(s);
    const imageInfo = await docker.getImage(image).inspect();
    expect(imageInfo.Config.User).toBe("policy");
    expect(imageInfo.Config.ExposedPorts).toHaveProperty("8800/tcp");

    const before = upstream.chatRequests().length;
    for (const stream of [false, true]) {
      const r = await request(`http://${s.ip}:8800/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "auto", stream, messages: [{ role: "user", content: "hi" }] }),
      });
      const text = await r.body.text();
      expect(r.statusCode).toBe(200);
      // The upstream's bytes, passed through (its JSON, not a re-serialisation).
      expect(text).toContain(stream ? '"content":" glm-5.3-flash"' : '"content":"reply from glm-5.3-flash');
      if (stream) expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
    }
    const sent = upstream.chatRequests().slice(before);
    expect(sent.map((x) => x.body?.model)).toEqual(["glm-5.3-flash", "glm-5.3-flash"]);
    expect(sent.every((x) => x.authorization === `Bearer ${TOKEN}`)).toBe(true);

    // Who runs it, and that nothing could be written outside /tmp.
    const exec = await s.container.exec({
      Cmd: ["sh", "-c", "id -u; touch /opt/x 2>/dev/null && echo writable || echo read-only; ls /policy"],
      AttachStdout: true,
      AttachStderr: true,
    });
    const stream = await exec.start({});
    const chunks: Buffer[] = [];
    await new Promise<void>((resolve) => {
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => resolve());
    });
    const out = Buffer.concat(chunks).toString("utf8");
    expect(out).toMatch(/10001/);
    expect(out).toMatch(/read-only/);
    expect(out).toMatch(/policy\.py/);

    // The streamed turn is logged after the agent's end of stream (once the meter's budget is
    // refreshed), and Docker copies logs on its own time: wait for both turns.
    const turnsLogged = async () => {
      const { stdout } = await logs(s.container);
      const events = stdout
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as { event: string; status?: number; model?: string });
      return { stdout, turns: events.filter((e) => e.event === "turn") };
    };
    const end = performance.now() + 10_000;
    let seen = await turnsLogged();
    while (seen.turns.length < 2 && performance.now() < end) {
      await new Promise((r) => setTimeout(r, 100));
      seen = await turnsLogged();
    }
    const { stdout } = seen;
    expect(seen.turns.map((e) => [e.status, e.model])).toEqual([
      [200, "glm-5.3-flash"],
      [200, "glm-5.3-flash"],
    ]);
    expect(stdout).not.toContain(TOKEN);
  });

  it("serves a built-in kind from policy.json", async () => {
    const s = await runSidecar({ "policy.json": JSON.stringify({ kind: "pin", model: "qwen3.8-27b" }) });
    await waitHealthy(s);
    const r = await request(`http://${s.ip}:8800/health`);
    expect(await r.body.json()).toEqual({ ok: true, policy: "pin:qwen3.8-27b" });
  });

  it("runs the SDK file placed at /policy/sdk/ the way upstream's benchmark starts its own", async () => {
    const sdk = sdkSingleFile();
    const s = await runSidecar(
      { [`sdk/${sdk.name}`]: sdk.content, "policy.py": PUBLIC_EXAMPLE },
      {
        cmd: ["python3", SDK_SIDECAR_PATH],
        env: [`PYTHONPATH=${SDK_PYTHONPATH}`, "POLICY_LOG=/tmp/policy.log"],
      },
    );
    await waitHealthy(s).catch(async (e: unknown) => {
      throw new Error(`${String(e)}\n${(await logs(s.container)).stderr}`);
    });
    const r = await request(`http://${s.ip}:8800/v1/models`);
    expect(((await r.body.json()) as { data: unknown[] }).data).toHaveLength(1);
    const exec = await s.container.exec({
      Cmd: ["sh", "-c", "cat /tmp/policy.log"],
      AttachStdout: true,
      AttachStderr: true,
    });
    const out = await new Promise<string>((resolve) => {
      const chunks: Buffer[] = [];
      void exec.start({}).then((st) => {
        st.on("data", (c: Buffer) => chunks.push(c));
        st.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
      });
    });
    expect(out).toContain('"event": "start"');
  });

  it("exits non-zero before health with the reason on stderr when policy.json is bad", async () => {
    const s = await runSidecar({ "policy.json": '{"kind": "route", "model": "x"}' });
    const done = (await s.container.wait()) as { StatusCode: number };
    expect(done.StatusCode).toBe(1);
    const { stderr, stdout } = await logs(s.container);
    expect(stderr).toContain("trajrl_policy: policy.json: ValueError: unknown policy kind 'route'");
    expect(stdout).not.toContain('"start"');
  });

  it("(engine fact) refuses an archive upload onto a read-only root outside a volume", async () => {
    const c = await docker.createContainer({
      Image: image,
      name: `sidecar-image-test-${randomBytes(4).toString("hex")}`,
      Labels: LABELS,
      HostConfig: { NetworkMode: "none", ReadonlyRootfs: true, Tmpfs: { "/tmp": "rw,size=1m" } },
    });
    containers.push(c);
    await expect(
      c.putArchive(await policyArchive({ "policy.json": "{}" }), { path: "/policy" }),
    ).rejects.toThrow(/read-only/);
  });
});
