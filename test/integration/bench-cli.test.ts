/**
 * `bench build` at its edges, without building anything: what it refuses (one line, exit 1), the
 * registry credentials it finds (explicit pair, Docker config file, anonymous), the references it
 * names and how it reads an engine push stream. The build and push themselves are proven in
 * bench-offline.test.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  benchRefs,
  parseBenchTag,
  parseBenchTarget,
  parsePushEvents,
  pushAuthFor,
  splitRef,
} from "../../src/bench/index.js";
import { runCli } from "../helpers/cli.js";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const cli = (args: string[]) => runCli(["bench", "build", ...args], { timeoutMs: 60_000 });

describe("bench build refuses bad input before building", () => {
  it.each([
    [["--push", "trajectoryrl"], "expected REGISTRY/NAMESPACE"],
    [["--push", "127.0.0.1:5000"], "expected REGISTRY/NAMESPACE"],
    [["--push", "127.0.0.1:5000/Upper"], '"Upper" is not a valid repository path component'],
    [["--push", "127.0.0.1:5000/a", "--name", "127.0.0.1:5000/b"], "--push and --name are exclusive"],
    [["--name", "localhost/x", "--tag", "bad tag"], "not a valid image tag"],
    [["--push", "127.0.0.1:5000/a", "--username", "u"], "--username and --password-stdin go together"],
    [["--name", "localhost/x", "--scenarios", "no-such-scenario"], "unknown scenario no-such-scenario"],
  ])("%j", async (args, message) => {
    const r = await cli(args);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(message);
    expect(r.stdout).toBe("");
  });
});

describe("bench naming", () => {
  it("names the base and the scenario images as upstream's validator derives them", () => {
    const t = parseBenchTarget("127.0.0.1:5000/trajectoryrl/");
    expect(t).toEqual({
      prefix: "127.0.0.1:5000/trajectoryrl",
      registry: "127.0.0.1:5000",
      namespace: "trajectoryrl",
    });
    expect(parseBenchTarget("ghcr.io/trajectoryrl").registry).toBe("ghcr.io");
    expect(parseBenchTarget("localhost/a/b").namespace).toBe("a/b");
    const refs = benchRefs(t, parseBenchTag("v4.0.21"), ["db-wal-recovery"]);
    expect(refs).toEqual({
      base: "127.0.0.1:5000/trajectoryrl/sandbox-agent:v4.0.21",
      scenarioRepoPrefix: "127.0.0.1:5000/trajectoryrl/scenario-",
      scenarios: { "db-wal-recovery": "127.0.0.1:5000/trajectoryrl/scenario-db-wal-recovery:v4.0.21" },
    });
    // sandbox_harness.py `_sandbox_tag` + `_scenario_image_ref`: image_repo + ":" + the base's tag.
    expect(`${refs.scenarioRepoPrefix}db-wal-recovery:${splitRef(refs.base).tag}`).toBe(
      refs.scenarios["db-wal-recovery"],
    );
    expect(splitRef("127.0.0.1:5000/ns/x:t1")).toEqual({ repo: "127.0.0.1:5000/ns/x", tag: "t1" });
    expect(splitRef("127.0.0.1:5000/ns/x")).toEqual({ repo: "127.0.0.1:5000/ns/x", tag: "latest" });
    for (const bad of ["", "-x", "a b", "x".repeat(129)])
      expect(() => parseBenchTag(bad)).toThrow(/image tag/);
  });
});

describe("registry credentials", () => {
  function dockerConfig(json: unknown): string {
    const d = mkdtempSync(join(tmpdir(), "bench-auth-"));
    dirs.push(d);
    writeFileSync(join(d, "config.json"), typeof json === "string" ? json : JSON.stringify(json));
    return d;
  }

  it("takes the explicit pair first, else the Docker config file's entry for the registry, else none", async () => {
    const dir = dockerConfig({
      auths: {
        "127.0.0.1:5000": { auth: Buffer.from("bob:s3cr:et").toString("base64") },
        "https://ghcr.io/v2/": { username: "alice", password: "pw" },
      },
    });
    expect(await pushAuthFor("127.0.0.1:5000", { dockerConfigDir: dir })).toEqual({
      username: "bob",
      password: "s3cr:et",
      serveraddress: "127.0.0.1:5000",
    });
    expect(await pushAuthFor("ghcr.io", { dockerConfigDir: dir })).toEqual({
      username: "alice",
      password: "pw",
      serveraddress: "ghcr.io",
    });
    expect(
      await pushAuthFor("127.0.0.1:5000", { dockerConfigDir: dir, username: "u", password: "p" }),
    ).toEqual({
      username: "u",
      password: "p",
      serveraddress: "127.0.0.1:5000",
    });
    expect(await pushAuthFor("registry.example.org", { dockerConfigDir: dir })).toEqual({});
    expect(await pushAuthFor("127.0.0.1:5000", { dockerConfigDir: dockerConfig("{not json") })).toEqual({});
    expect(await pushAuthFor("127.0.0.1:5000", { dockerConfigDir: join(tmpdir(), "no-such-dir-x") })).toEqual(
      {},
    );
  });
});

describe("push stream", () => {
  it("finds the registry's digest, or the engine's error", () => {
    const digest = `sha256:${"ab".repeat(32)}`;
    const ok = [
      '{"status":"The push refers to repository [127.0.0.1:5000/ns/x]"}',
      '{"status":"Pushed","progressDetail":{},"id":"1a2b"}',
      `{"status":"t1: digest: ${digest} size: 1234"}`,
      `{"progressDetail":{},"aux":{"Tag":"t1","Digest":"${digest}","Size":1234}}`,
    ];
    expect(parsePushEvents(ok)).toEqual({ digest });
    expect(parsePushEvents(ok.slice(0, 3))).toEqual({ digest });
    expect(
      parsePushEvents([
        '{"status":"Preparing","id":"1a2b"}',
        '{"errorDetail":{"message":"denied: requested access to the resource is denied"},"error":"denied"}',
      ]),
    ).toEqual({ error: "denied: requested access to the resource is denied" });
    expect(parsePushEvents(["not json", "{}"])).toEqual({});
  });
});
