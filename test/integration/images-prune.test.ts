/**
 * `images prune` on the real engine: stale project images go (children before their base), the
 * current ones stay, one a container uses is kept and listed as in use (in a dry run too), one
 * another checkout built is left to that checkout, sizes are each image's own bytes, and a dry run
 * removes nothing. Scratch images live under a repository prefix of this test's own, so a prune
 * here never touches what other tests build; the CLI is exercised as a dry run on the project.
 */
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProjectImages } from "../../src/bench/index.js";
import { pruneImages } from "../../src/sandbox/image-prune.js";
import {
  type BuiltImage,
  IMAGE_CHECKOUT_LABEL,
  IMAGE_KIND_LABEL,
  ImageBuilder,
} from "../../src/sandbox/images.js";
import { loadCatalogue } from "../../src/scenarios/index.js";
import { runCli } from "../helpers/cli.js";
import { requireDocker } from "../helpers/docker.js";
import { REPO_ROOT } from "../helpers/episode.js";
import { BASE_IMAGE } from "../helpers/sandbox.js";

const prefix = `trajrl-test/prune-${randomBytes(3).toString("hex")}/`;
let docker: Docker;
let dir: string;
let user: Docker.Container | undefined;
let cliImage: string | undefined;

async function staleContext(): Promise<string> {
  const at = join(dir, "cli-stale");
  await mkdir(at, { recursive: true });
  await writeFile(join(at, "Dockerfile"), `FROM ${BASE_IMAGE}\nCOPY v /v\n`);
  await writeFile(join(at, "v"), "stale");
  return at;
}

beforeAll(async () => {
  docker = await requireDocker();
  dir = await mkdtemp(join(tmpdir(), "trajrl-prune-"));
});

afterAll(async () => {
  if (!docker) return;
  await user?.remove({ force: true }).catch(() => undefined);
  if (cliImage)
    await docker
      .getImage(cliImage)
      .remove({ force: true })
      .catch(() => undefined);
  for (let pass = 0; pass < 5; pass++) {
    const left = (await docker.listImages({ filters: { label: [IMAGE_KIND_LABEL] } })).filter((i) =>
      (i.RepoTags ?? []).some((t) => t.startsWith(prefix)),
    );
    if (left.length === 0) break;
    for (const img of left)
      await docker
        .getImage(img.Id)
        .remove({ force: true })
        .catch(() => undefined);
  }
  await rm(dir, { recursive: true, force: true });
});

async function build(
  name: string,
  kind: string,
  from: string,
  content: string,
  checkout?: string,
): Promise<BuiltImage> {
  const at = join(dir, name);
  await mkdir(at, { recursive: true });
  await writeFile(join(at, "Dockerfile"), `ARG BASE\nFROM \${BASE}\nCOPY v /v-${name}\n`);
  await writeFile(join(at, "v"), content);
  return new ImageBuilder(docker).ensure({
    repo: `${prefix}${name}`,
    sources: [{ from: at, to: "" }],
    dockerfile: "Dockerfile",
    buildArgs: { BASE: from },
    labels: { [IMAGE_KIND_LABEL]: kind, ...(checkout ? { [IMAGE_CHECKOUT_LABEL]: checkout } : {}) },
  });
}

const exists = (ref: string) =>
  docker
    .getImage(ref)
    .inspect()
    .then(
      () => true,
      () => false,
    );

describe("images prune", () => {
  it("removes stale images children first, keeps current ones and one in use, leaves another checkout's", async () => {
    const oldBase = await build("agent-base", "agent-base", BASE_IMAGE, "old", "/here");
    const child = await build("scenario-a", "scenario", oldBase.ref, "a", "/here");
    const current = await build("sidecar", "sidecar", BASE_IMAGE, "current", "/here");
    const used = await build("scenario-b", "scenario", BASE_IMAGE, "b", "/here");
    const theirs = await build("scenario-c", "scenario", BASE_IMAGE, "c", "/elsewhere");
    user = await docker.createContainer({ Image: used.ref, Cmd: ["true"] });
    const keep = new Set([current.ref]);
    const opts = { keep, repoPrefix: prefix, checkout: "/here" };

    const dry = await pruneImages(docker, { ...opts, dryRun: true });
    // Scenarios (children) before the agent base they were built FROM; in use and theirs apart.
    expect(dry.removed.map((i) => i.ref)).toEqual([child.ref, oldBase.ref]);
    expect(dry.inUse.map((i) => i.ref)).toEqual([used.ref]);
    expect(dry.otherCheckouts.map((i) => [i.ref, i.checkout])).toEqual([[theirs.ref, "/elsewhere"]]);
    expect(dry.kept).toBe(1);
    // Own bytes: the scenario's one small layer, not the base image's hundred MB it shares.
    const baseSize = (await docker.getImage(BASE_IMAGE).inspect()).Size;
    expect(dry.removed[0]!.sizeBytes).toBeLessThan(baseSize / 10);
    for (const ref of [oldBase.ref, child.ref, current.ref, used.ref, theirs.ref])
      expect(await exists(ref)).toBe(true);

    const r = await pruneImages(docker, opts);
    expect(r.removed.map((i) => i.ref)).toEqual([child.ref, oldBase.ref]);
    expect(r.inUse.map((i) => i.ref)).toEqual([used.ref]);
    expect(r.refused).toEqual([]);
    expect(r.kept).toBe(1);
    expect(await exists(child.ref)).toBe(false);
    expect(await exists(oldBase.ref)).toBe(false);
    for (const ref of [current.ref, used.ref, theirs.ref]) expect(await exists(ref)).toBe(true);

    // Once nothing uses it, the next prune takes it; the other checkout's prune takes its own.
    await user.remove({ force: true });
    user = undefined;
    expect((await pruneImages(docker, opts)).removed.map((i) => i.ref)).toEqual([used.ref]);
    expect(
      (await pruneImages(docker, { ...opts, checkout: "/elsewhere" })).removed.map((i) => i.ref),
    ).toEqual([theirs.ref]);
    expect(await pruneImages(docker, opts)).toEqual({
      removed: [],
      refused: [],
      inUse: [],
      kept: 1,
      otherCheckouts: [],
    });
  }, 180_000);

  it("the CLI's dry run lists only images the current sources do not build, and removes nothing", async () => {
    const project = new ProjectImages(docker, { repoRoot: REPO_ROOT });
    await Promise.all([project.agentBase(), project.sidecar()]);
    const keep = await project.currentRefs(await loadCatalogue(join(REPO_ROOT, "scenarios")));
    // A stale project image of this test's own (under trajrl/, so the CLI's default prefix sees it).
    const stale = await new ImageBuilder(docker).ensure({
      repo: `trajrl/scenario-prune-cli-${randomBytes(3).toString("hex")}`,
      sources: [{ from: await staleContext(), to: "" }],
      dockerfile: "Dockerfile",
      labels: { [IMAGE_KIND_LABEL]: "scenario" },
    });
    cliImage = stale.ref;
    const run = await runCli(["images", "prune", "--dry-run"], { timeoutMs: 120_000 });
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stdout.trim().split("\n");
    expect(lines.at(-1)).toMatch(
      /^would remove \d+ image tag\(s\), freeing at least \d+ MB; \d+ current image\(s\) kept/,
    );
    const listed = lines
      .slice(0, -1)
      .map((l) => /^would remove (\S+) \(\S+, \d+ MB of its own\)$/.exec(l)?.[1])
      .filter((x) => x !== undefined);
    expect(listed).toContain(stale.ref);
    for (const ref of listed) {
      expect(ref).toMatch(/^trajrl\//);
      expect(keep.has(ref!)).toBe(false);
    }
    // The agent base and the sidecar of this checkout are current; their refs are kept.
    const [base, sidecar] = await Promise.all([project.agentBase(), project.sidecar()]);
    expect(keep.has(base.ref) && keep.has(sidecar.ref)).toBe(true);
    // A dry run: every image it listed is still there (other tests' images come and go meanwhile,
    // so this looks at the listed ones only).
    for (const ref of listed) expect(await exists(ref!)).toBe(true);
  }, 300_000);
});
