/**
 * The deployment artefacts: docker/Dockerfile.validator builds offline on the local
 * debian:bookworm-slim (scripts/validator-image.mjs), the image runs `--version`, its HEALTHCHECK
 * command answers for a real status server inside it, the entrypoint drops to the wallets' owner with
 * the Docker socket's group; and docker/docker-compose.validator.yml validates with docker-compose.
 *
 * Everything created here is labelled trajrl.test=web-image and removed at the end. Containers get no
 * network (--network none) except the one that proves the published status port, which is reached on
 * loopback only. The image tag is removed without pruning its parent layers, so the next run reuses
 * the layer cache (npm ci and the better-sqlite3 compile are the slow steps).
 */
import { execFile } from "node:child_process";
import { chownSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requireDocker } from "../helpers/docker.js";

const pexec = promisify(execFile);
const root = new URL("../..", import.meta.url).pathname;
const LABEL = "trajrl.test=web-image";
const TAG = `trajrl-test/validator:web-${process.pid}`;

async function sh(
  cmd: string,
  args: string[],
  timeout = 60_000,
): Promise<{ code: number; out: string; err: string }> {
  try {
    const r = await pexec(cmd, args, { cwd: root, timeout, maxBuffer: 64 << 20 });
    return { code: 0, out: r.stdout, err: r.stderr };
  } catch (e) {
    const x = e as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof x.code === "number" ? x.code : 1, out: x.stdout ?? "", err: x.stderr ?? "" };
  }
}

/** docker run with the test label; returns stdout/stderr/exit code. */
const dockerRun = (args: string[], timeout = 60_000) =>
  sh("docker", ["run", "--rm", "--label", LABEL, ...args], timeout);

describe("the validator image", () => {
  let docker: Docker;
  const containers: string[] = [];
  const dirs: string[] = [];

  beforeAll(async () => {
    docker = await requireDocker();
    const r = await sh(
      "node",
      ["scripts/validator-image.mjs", "build", "--tag", TAG, "--label", LABEL],
      25 * 60_000,
    );
    if (r.code !== 0) throw new Error(`image build failed:\n${r.err.slice(-4000)}\n${r.out.slice(-4000)}`);
  }, 26 * 60_000);

  afterAll(async () => {
    for (const id of containers)
      await docker
        .getContainer(id)
        .remove({ force: true })
        .catch(() => {});
    // The tag only: parent layers stay as the build cache of the next run.
    await docker
      .getImage(TAG)
      .remove({ noprune: true })
      .catch(() => {});
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("was built FROM the local base image, with the healthcheck, user and entrypoint it documents", async () => {
    const info = await docker.getImage(TAG).inspect();
    expect(info.Config.Labels?.["trajrl.test"]).toBe("web-image");
    expect(info.Config.Healthcheck?.Test).toEqual([
      "CMD",
      "node",
      "/app/dist/web/healthcheck.js",
      "http://127.0.0.1:8080/readyz",
    ]);
    // No VOLUME: the compose file mounts the named volume; other containers of the image get none.
    expect(info.Config.Volumes ?? {}).toEqual({});
    expect(info.Config.Entrypoint).toEqual(["tini", "--", "validator-entrypoint"]);
    expect(info.Config.Cmd).toEqual(["run"]);
    expect(info.Config.Env).toEqual(
      expect.arrayContaining(["STATUS_HOST=0.0.0.0", "DAEMON_IN_CONTAINER=1", "DATA_DIR=/data"]),
    );
    // The base layers are the local debian:bookworm-slim's.
    const base = await docker.getImage("debian:bookworm-slim").inspect();
    expect(info.RootFS.Layers?.slice(0, base.RootFS.Layers?.length)).toEqual(base.RootFS.Layers);
    // Production dependencies only.
    const r = await dockerRun([
      "--network",
      "none",
      "--entrypoint",
      "sh",
      TAG,
      "-c",
      "test ! -e node_modules/typescript && test ! -e node_modules/vitest && test -f node_modules/better-sqlite3/build/Release/better_sqlite3.node && echo ok",
    ]);
    expect(r.out.trim()).toBe("ok");
  });

  it("runs --version", async () => {
    const version = JSON.parse(
      (await import("node:fs")).readFileSync(join(root, "package.json"), "utf8"),
    ).version;
    const r = await dockerRun(["--network", "none", TAG, "--version"]);
    expect(r.code).toBe(0);
    expect(r.out.trim()).toBe(version);
  });

  it("HEALTHCHECK: an evaluating validator is unhealthy without Docker and healthy with it; weight-only needs none", async () => {
    // A real status server inside the image (the daemon's web part), with an in-memory store.
    const serve = `import("/app/dist/web/index.js").then(async (w) => {
      const { LiveStatus } = await import("/app/dist/status/index.js");
      const { openDb } = await import("/app/dist/store/index.js");
      const { loadConfig } = await import("/app/dist/config.js");
      const { createLogger } = await import("/app/dist/log.js");
      const s = await w.startStatusServer({ live: new LiveStatus(), db: openDb(":memory:"), config: loadConfig(), log: createLogger({ level: "warn" }) });
      process.on("SIGTERM", () => s.close().then(() => process.exit(0)));
    })`;
    const start = async (extra: string[]) => {
      const r = await sh("docker", [
        "run",
        "-d",
        "--label",
        LABEL,
        "--network",
        "none",
        "--health-interval",
        "1s",
        "--health-start-period", // 0 would mean "the image's 300 s"
        "1s",
        "--health-retries",
        "1",
        ...extra,
        "--entrypoint",
        "node",
        TAG,
        "-e",
        serve,
      ]);
      expect(r.code, r.err).toBe(0);
      const id = r.out.trim();
      containers.push(id);
      return id;
    };
    /** Waits for Docker's own health state, and for the last probe's output to be the expected one. */
    const health = async (id: string, want: string, output: string) => {
      const deadline = performance.now() + 30_000;
      let state = "";
      while (performance.now() < deadline) {
        const info = await docker.getContainer(id).inspect();
        state = info.State.Health?.Status ?? "";
        // The first probes may come before node listens (ECONNREFUSED): wait for the server's answer.
        if (state === want && info.State.Health?.Log.at(-1)?.Output.includes(output))
          return info.State.Health!;
        await new Promise((r) => setTimeout(r, 500));
      }
      const info = await docker.getContainer(id).inspect();
      const logs = await sh("docker", ["logs", "--tail", "20", id]);
      throw new Error(
        `container health stayed ${state}, wanted ${want}; state ${JSON.stringify(info.State)}; logs:\n${logs.out}${logs.err}`,
      );
    };

    // An evaluating validator (EVAL_ENABLED=1) needs the engine; weight-only mode uses none.
    const without = await start(["-e", "EVAL_ENABLED=1"]);
    const h1 = await health(without, "unhealthy", "unhealthy (503)");
    expect(h1.Log.at(-1)?.ExitCode).toBe(1);
    expect(h1.Log.at(-1)?.Output).toContain("unhealthy (503): Docker at /var/run/docker.sock");
    const exec1 = await sh("docker", ["exec", without, "node", "/app/dist/web/healthcheck.js"]);
    expect(exec1.code).toBe(1);

    const withSocket = await start([
      "-e",
      "EVAL_ENABLED=1",
      "-v",
      "/var/run/docker.sock:/var/run/docker.sock",
    ]);
    const h2 = await health(withSocket, "healthy", "healthy");
    expect(h2.Log.at(-1)).toMatchObject({ ExitCode: 0, Output: "healthy\n" });

    // Weight-only mode (the default): no Docker socket, and healthy all the same.
    const weightOnly = await start([]);
    const h3 = await health(weightOnly, "healthy", "healthy");
    expect(h3.Log.at(-1)).toMatchObject({ ExitCode: 0, Output: "healthy\n" });
  });

  it("entrypoint: runs as the wallets' owner with the socket's group, never as root, and owns /data", async () => {
    const wallets = mkdtempSync(join(tmpdir(), "web-image-wallets-"));
    dirs.push(wallets);
    mkdirSync(join(wallets, "validator/hotkeys"), { recursive: true });
    writeFileSync(join(wallets, "validator/hotkeys/default"), "{}", { mode: 0o600 });
    for (const p of [
      wallets,
      join(wallets, "validator"),
      join(wallets, "validator/hotkeys"),
      join(wallets, "validator/hotkeys/default"),
    ])
      chownSync(p, 4242, 4343);
    const sockGid = (await sh("stat", ["-c", "%g", "/var/run/docker.sock"])).out.trim();
    // `engy-sim` is a long-running subcommand: enough to look at the running process.
    const r = await sh("docker", [
      "run",
      "-d",
      "--label",
      LABEL,
      "--network",
      "none",
      "-v",
      "/var/run/docker.sock:/var/run/docker.sock",
      "-v",
      `${wallets}:/wallets:ro`,
      TAG,
      "engy-sim",
      "--port",
      "8791",
    ]);
    expect(r.code, r.err).toBe(0);
    const id = r.out.trim();
    containers.push(id);
    const status = await validatorProcStatus(id);
    expect(status).toMatch(/^Uid:\s+4242\s+4242\s+4242\s+4242$/m);
    expect(status).toMatch(/^Gid:\s+4343\s+4343/m);
    expect(status).toMatch(new RegExp(`^Groups:\\s+${sockGid}\\s*$`, "m"));
    expect(status).toMatch(/^CapEff:\s+0+$/m);
    expect(status).toMatch(/^NoNewPrivs:\s+1$/m);
    const data = await sh("docker", ["exec", id, "stat", "-c", "%u:%g", "/data"]);
    expect(data.out.trim()).toBe("4242:4343");
    // The unprivileged process can read the 0600 hotkey file it owns.
    const read = await sh("docker", [
      "exec",
      "-u",
      "4242:4343",
      id,
      "cat",
      "/wallets/validator/hotkeys/default",
    ]);
    expect(read.out).toBe("{}");
  });

  it("entrypoint: keeps NET_ADMIN (only) for the sandbox's iptables when the container is given it", async () => {
    const r = await sh("docker", [
      "run",
      "-d",
      "--label",
      LABEL,
      "--network",
      "none",
      "--cap-add",
      "NET_ADMIN",
      TAG,
      "engy-sim",
      "--port",
      "8791",
    ]);
    expect(r.code, r.err).toBe(0);
    const id = r.out.trim();
    containers.push(id);
    const status = await validatorProcStatus(id);
    expect(status).toMatch(/^Uid:\s+10001\s+10001\s+10001\s+10001$/m);
    // CAP_NET_ADMIN is bit 12: effective, ambient and bounding hold it and nothing else.
    expect(status).toMatch(/^CapEff:\s+0+1000$/m);
    expect(status).toMatch(/^CapAmb:\s+0+1000$/m);
    expect(status).toMatch(/^CapBnd:\s+0+1000$/m);
    const lock = await sh("docker", ["exec", id, "stat", "-c", "%u", "/run/xtables.lock"]);
    expect(lock.out.trim()).toBe("10001");
  });

  it(
    "runs an episode from inside the container: the daemon joins the meter network as `meter`",
    async () => {
      // The container gets an internal network only (no route out); episodes are its siblings on the
      // host's engine. The sidecar must reach the in-process meter through the alias.
      const net = `trajrl-test-cmode-${process.pid}`;
      const host = `trajrl-cmode-${process.pid}`;
      await sh("docker", ["network", "create", "--internal", "--label", LABEL, net]);
      try {
        const r = await dockerRun(
          [
            "--network",
            net,
            "--hostname",
            host,
            "--cap-add",
            "NET_ADMIN",
            "-v",
            "/var/run/docker.sock:/var/run/docker.sock",
            "-v",
            `${root}/examples/packs:/packs:ro`,
            "-e",
            "LLM_API_KEY=",
            "-e",
            "DAEMON_IN_CONTAINER=1",
            "-e",
            "ENGY_SIM_LATENCY_SCALE=0",
            TAG,
            "eval",
            "/packs/advisers.json",
            "--scenarios",
            "binary-flag-hunt",
            "--json",
          ],
          10 * 60_000,
        );
        expect(r.code, `${r.err.slice(-3000)}\n${r.out.slice(-3000)}`).toBe(0);
        const verdicts = JSON.parse(r.out.slice(r.out.indexOf("[\n"))) as Array<{
          kind: string;
          verdict: { score: number; costUsd: number };
        }>;
        expect(verdicts[0]!.kind).toBe("verdict");
        // The policy's calls reached the meter (and were billed) from the sidecar's network.
        expect(verdicts[0]!.verdict.costUsd).toBeGreaterThan(0);
        expect(verdicts[0]!.verdict.score).toBeGreaterThan(0);
        // Nothing the process inside made outlives it.
        const left = await docker.listContainers({ all: true, filters: { label: [`trajrl.host=${host}`] } });
        const leftNets = await docker.listNetworks({ filters: { label: [`trajrl.host=${host}`] } });
        expect(left.length + leftNets.length).toBe(0);
      } finally {
        await sh("docker", ["network", "rm", net]);
      }
    },
    11 * 60_000,
  );

  it("the firewall keeper installs the episode chain where it runs, and fails loudly without NET_ADMIN", async () => {
    // --network none: the chain lands in the container's own namespace (compose runs it in the host's).
    const ok = await dockerRun([
      "--network",
      "none",
      "--cap-add",
      "NET_ADMIN",
      "--entrypoint",
      "sh",
      TAG,
      "-c",
      "node /app/docker/host-firewall.mjs && test -f /run/trajrl-firewall.ok && iptables -S TRAJRL-EPISODE && iptables -S INPUT",
    ]);
    expect(ok.code, ok.err).toBe(0);
    expect(ok.out).toContain("-A TRAJRL-EPISODE -i tja+ -j DROP");
    expect(ok.out).toContain("-A TRAJRL-EPISODE -p tcp -m tcp --dport 8790 -j ACCEPT");
    expect(ok.out).toContain("-A TRAJRL-EPISODE -j DROP");
    expect(ok.out).toContain("-A INPUT -i tja+ -j TRAJRL-EPISODE");
    const denied = await dockerRun([
      "--network",
      "none",
      "--entrypoint",
      "node",
      TAG,
      "/app/docker/host-firewall.mjs",
    ]);
    expect(denied.code).toBe(1);
    expect(denied.out).toContain("firewall_unavailable");
  });
});

/** /proc/<pid>/status of the validator's node process inside a running container. */
async function validatorProcStatus(id: string): Promise<string> {
  const deadline = performance.now() + 20_000;
  let status = "";
  while (performance.now() < deadline) {
    const ps = await sh("docker", [
      "exec",
      id,
      "sh",
      "-c",
      // argv[0] must be node itself: setpriv's own command line names the script too, just before its exec.
      "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q '^node /app/bin/trajrl-validator.js' && cat $p/status; done",
    ]);
    status = ps.out;
    if (/^Uid:/m.test(status)) return status;
    await new Promise((res) => setTimeout(res, 300));
  }
  throw new Error(`no validator process in ${id}`);
}

describe("docker/docker-compose.validator.yml", () => {
  it("validates with docker-compose (v1) and resolves to the documented deployment", async () => {
    const v = await sh("docker-compose", ["version", "--short"]);
    if (v.code !== 0) throw new Error("docker-compose is missing: run bash scripts/web-deps.sh");
    // A scratch project: the compose file reads ../.env.validator, which an operator creates from the example.
    const dir = mkdtempSync(join(tmpdir(), "web-compose-"));
    try {
      mkdirSync(join(dir, "docker"));
      copyFileSync(
        join(root, "docker/docker-compose.validator.yml"),
        join(dir, "docker/docker-compose.validator.yml"),
      );
      copyFileSync(join(root, ".env.validator.example"), join(dir, ".env.validator"));
      const file = join(dir, "docker/docker-compose.validator.yml");
      const quiet = await sh("docker-compose", ["-f", file, "config", "--quiet"]);
      expect(quiet.code, quiet.err).toBe(0);
      const r = await sh("docker-compose", ["-f", file, "config"]);
      expect(r.code, r.err).toBe(0);
      const cfg = r.out;
      // The status page is published on loopback only.
      expect(cfg).toContain("- 127.0.0.1:8080:8080/tcp");
      expect(cfg).toContain("/var/run/docker.sock:/var/run/docker.sock:rw");
      // Long syntax: a missing WALLETS_DIR fails `up` instead of Docker creating it.
      expect(cfg).toMatch(
        /- read_only: true\s+source: \/\S+\/\.bittensor\/wallets\s+target: \/wallets\s+type: bind/,
      );
      expect(cfg).toContain("- validator-data:/data:rw");
      expect(cfg).toContain("restart: unless-stopped");
      expect(cfg).toMatch(/max-file: '5'\s+max-size: 20m/);
      expect(cfg).toContain("driver: json-file");
      // The container's layout is the image's (the entrypoint keeps it); compose passes host-side facts.
      expect(cfg).not.toContain("DAEMON_IN_CONTAINER");
      expect(cfg).toContain("TRAJRL_HOST_WALLETS_DIR: ~/.bittensor/wallets");
      // The local build, under a name no registry resolves; no auto-update unless asked for.
      expect(cfg).toContain("image: trajrl.invalid/validator:latest");
      expect(cfg).toMatch(/com\.centurylinklabs\.watchtower\.enable: ["']false["']/);
      expect(cfg).not.toMatch(/com\.centurylinklabs\.watchtower\.enable: ["']true["']/);
      expect(cfg).toMatch(/profiles:\s+- autoupdate/);
      expect(cfg).toMatch(/image: containrrr\/watchtower:1\.7\.1@sha256:[0-9a-f]{64}/);
      expect(cfg).toContain("container_name: trajrl_validator");
      // The firewall keeper: host network namespace, NET_ADMIN, healthy before the validator starts.
      expect(cfg).toMatch(/firewall:\s+build:[\s\S]*?cap_add:\s+- NET_ADMIN\s+- NET_RAW/);
      expect(cfg).toContain("network_mode: host");
      expect(cfg).toMatch(/depends_on:\s+firewall:\s+condition: service_healthy/);
      expect(cfg).toContain("- /app/docker/host-firewall.mjs");
      expect(cfg).toMatch(/--label-enable/);
      expect(cfg).toContain("name: trajrl-validator-data");
      // env_file is wired in: a variable of the example file reaches the validator's environment.
      expect(cfg).toMatch(/LLM_API_KEY: ''/);
      // Overrides for a port and the wallets directory come from the shell.
      const o = await pexec("docker-compose", ["-f", file, "config"], {
        env: { ...process.env, STATUS_PORT: "9191", WALLETS_DIR: "/srv/wallets" },
      });
      expect(o.stdout).toContain("- 127.0.0.1:9191:8080/tcp");
      expect(o.stdout).toContain("source: /srv/wallets");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
