/**
 * Image builds through the engine's build API, tagged by content hash: reuse when nothing
 * changed, one build for concurrent callers, ignore rules, base-image identity in the hash,
 * and build failures reported with the failing step. Scratch images FROM the local
 * debian:bookworm-slim only; every image made here is removed at the end.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Docker from "dockerode";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProjectImages } from "../../src/bench/index.js";
import { ValidatorError } from "../../src/errors.js";
import { ImageBuilder, type ImageSpec } from "../../src/sandbox/images.js";
import {
  createContainer,
  RUNC_RUNTIME,
  readLogs,
  removeContainer,
  SCENARIO_LIMITS,
  startContainer,
  waitExit,
} from "../../src/sandbox/index.js";
import { LABEL } from "../../src/sandbox/labels.js";
import { requireDocker } from "../helpers/docker.js";
import { REPO_ROOT } from "../helpers/episode.js";

let docker: Docker;
let dir: string;
const repo = `trajrl-test/img-${randomBytes(3).toString("hex")}`;
const events: string[] = [];
const log = pino({ level: "info" }, { write: (s: string) => events.push(JSON.parse(s).msg) });

beforeAll(async () => {
  docker = await requireDocker();
  dir = await mkdtemp(join(tmpdir(), "trajrl-img-"));
});

afterAll(async () => {
  if (!docker) return; // beforeAll already failed, naming the missing engine
  // A base built here has children built FROM it: the engine refuses to remove a parent
  // before its children ("dependent child images"), and lists them in no promised order, so
  // sweep until a pass removes nothing.
  for (let pass = 0; pass < 5; pass++) {
    const imgs = await docker.listImages({ filters: { reference: [`${repo}*`] } });
    if (imgs.length === 0) break;
    for (const img of imgs)
      await docker
        .getImage(img.Id)
        .remove({ force: true })
        .catch(() => undefined);
  }
  expect(await docker.listImages({ filters: { reference: [`${repo}*`] } })).toEqual([]);
  await rm(dir, { recursive: true, force: true });
});

function spec(sub: string, over: Partial<ImageSpec> = {}): ImageSpec {
  return {
    repo: `${repo}-${sub}`,
    sources: [{ from: join(dir, sub), to: "" }],
    dockerfile: "Dockerfile",
    ...over,
  };
}

async function files(sub: string, f: Record<string, string>): Promise<void> {
  const { mkdir } = await import("node:fs/promises");
  await mkdir(join(dir, sub), { recursive: true });
  for (const [k, v] of Object.entries(f)) await writeFile(join(dir, sub, k), v);
}

describe("image builder", () => {
  it("builds once, then reuses the image while the context is unchanged", async () => {
    await files("a", {
      Dockerfile: "FROM debian:bookworm-slim\nCOPY hello.txt /hello.txt\nRUN cat /hello.txt\n",
      "hello.txt": "one\n",
      ".dockerignore": "notes.md\n",
      "notes.md": "ignored\n",
    });
    const b = new ImageBuilder(docker, log);
    const first = await b.ensure(spec("a"));
    expect(first.built).toBe(true);
    expect(first.ref).toBe(`${repo}-a:${first.hash.slice(0, 20)}`);
    expect(first.id).toMatch(/^sha256:[0-9a-f]{64}$/);
    const info = await docker.getImage(first.ref).inspect();
    expect(info.Id).toBe(first.id);
    expect(info.Config.Labels["trajrl.image-hash"]).toBe(first.hash);

    // A new builder (a restarted process) finds it by hash; an ignored file changes nothing.
    await writeFile(join(dir, "a", "notes.md"), "still ignored, different\n");
    const again = await new ImageBuilder(docker).ensure(spec("a"));
    expect(again).toMatchObject({ built: false, id: first.id, ref: first.ref });

    // A real change: new hash, new tag, new image.
    await writeFile(join(dir, "a", "hello.txt"), "two\n");
    events.length = 0;
    const [x, y, z] = await Promise.all([b.ensure(spec("a")), b.ensure(spec("a")), b.ensure(spec("a"))]);
    expect(events.filter((e) => e === "image.build.start")).toHaveLength(1);
    expect(x!.hash).not.toBe(first.hash);
    expect(y!.id).toBe(x!.id);
    expect(z!.id).toBe(x!.id);
    expect(x!.id).not.toBe(first.id);
  }, 120_000);

  it("puts the base image's id into the hash of images built FROM it", async () => {
    await files("base", { Dockerfile: "FROM debian:bookworm-slim\nCOPY v /v\n", v: "1" });
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a Dockerfile ARG reference, not a JS template
    await files("child", { Dockerfile: "ARG AGENT_BASE=missing\nFROM ${AGENT_BASE}\nRUN cat /v > /seen\n" });
    const b = new ImageBuilder(docker);
    const childOf = async () => {
      const base = await b.ensure(spec("base"));
      const child = await b.ensure(
        spec("child", { buildArgs: { AGENT_BASE: base.ref }, baseImageIds: [base.id] }),
      );
      return { base, child };
    };
    const one = await childOf();
    expect(one.child.built).toBe(true);
    expect((await childOf()).child.built).toBe(false);
    await writeFile(join(dir, "base", "v"), "2");
    const two = await childOf();
    expect(two.base.id).not.toBe(one.base.id);
    expect(two.child.built).toBe(true);
    expect(two.child.ref).not.toBe(one.child.ref);
  }, 120_000);

  it("reports a failing build with its step and output tail as infra", async () => {
    await files("bad", {
      Dockerfile: "FROM debian:bookworm-slim\nRUN echo about-to-fail && exit 3\n",
    });
    const err = await new ImageBuilder(docker).ensure(spec("bad")).catch((e) => e);
    expect(err).toBeInstanceOf(ValidatorError);
    expect(err.code).toBe("image_build_failed");
    expect(err.failureClass).toBe("infra");
    expect(err.message).toContain("RUN echo about-to-fail && exit 3");
    expect(err.message).toContain("about-to-fail");
    expect(err.message).toMatch(/returned a non-zero code: 3/);
  }, 120_000);

  it("builds the project's agent base and sidecar; the agent passes its self-test inside, offline", async () => {
    // Project images are a shared cache keyed by content: reused when present, never removed here.
    const images = new ProjectImages(docker, { repoRoot: REPO_ROOT });
    const [base, sidecar] = await Promise.all([images.agentBase(), images.sidecar()]);
    expect(base.ref).toMatch(/^trajrl\/agent-base:[0-9a-f]{20}$/);
    expect(sidecar.ref).toMatch(/^trajrl\/sidecar:[0-9a-f]{20}$/);
    expect((await images.agentBase()).built).toBe(false);
    const name = `trajrl-test-selftest-${randomBytes(3).toString("hex")}`;
    const c = await createContainer(docker, RUNC_RUNTIME, {
      name,
      image: base.ref,
      cmd: ["node", "/opt/trajrl/agent.js", "--self-test"],
      user: "10000:10000",
      labels: { [LABEL.role]: "probe" },
      limits: SCENARIO_LIMITS,
      network: { kind: "none" },
    });
    try {
      await startContainer(c);
      const code = await waitExit(c, AbortSignal.timeout(120_000));
      const logs = await readLogs(c);
      expect([code, logs.stdout]).toEqual([0, expect.stringMatching(/self-test/)]);
      const info = await docker.getImage(sidecar.ref).inspect();
      expect(info.Config.User).toBe("policy");
    } finally {
      await removeContainer(docker, name);
    }
  }, 600_000);

  it("fails clearly on a missing context and on a missing operator image", async () => {
    const b = new ImageBuilder(docker);
    const e1 = await b.ensure(spec("nope")).catch((e) => e);
    expect(e1.code).toBe("image_context_missing");
    const e2 = await b.existing(`${repo}-never:built`).catch((e) => e);
    expect(e2.code).toBe("image_missing");
  });
});
