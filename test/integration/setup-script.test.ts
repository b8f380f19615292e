/**
 * The machine set-up (scripts/setup.sh) prints only what it does (issue 22 item 2): on a host where
 * everything is in place, nothing at all; each line it does print is one of its own `[step]` lines.
 * Debian's /usr/bin/chromium wrapper printed a shell error on hosts whose /dev/shm is mounted more
 * than once; web-deps.sh checks chromium through its binary instead.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const pexec = promisify(execFile);
const root = new URL("../..", import.meta.url).pathname;

async function sh(cmd: string, args: string[], timeout = 600_000, env?: NodeJS.ProcessEnv) {
  try {
    const r = await pexec(cmd, args, { cwd: root, timeout, maxBuffer: 16 << 20, ...(env ? { env } : {}) });
    return { code: 0, out: r.stdout, err: r.stderr };
  } catch (e) {
    const x = e as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof x.code === "number" ? x.code : 1, out: x.stdout ?? "", err: x.stderr ?? "" };
  }
}

const lines = (s: string) => s.split("\n").filter((l) => l.trim() !== "");

describe("scripts/setup.sh", () => {
  it("prints only its own step lines (nothing when everything is in place)", async () => {
    const r = await sh("bash", ["scripts/setup.sh"]);
    expect(r.code, r.err).toBe(0);
    for (const l of lines(r.out + r.err))
      expect(l).toMatch(/^\[(docker-up|runsc-up|python-deps|web-deps|registry-up)\] /);
    expect(r.err).not.toContain("unexpected operator");
  }, 620_000);

  it("web-deps --check names what is there through chromium's binary, with no error from Debian's wrapper", async () => {
    const r = await sh("bash", ["scripts/web-deps.sh", "--check"]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toBe("");
    const l = lines(r.err);
    expect(l).toHaveLength(3);
    expect(l[0]).toMatch(/^\[web-deps\] chromium: Chromium \d+\.\S+ +\(\/usr\/lib\/chromium\/chromium\)$/);
    expect(l[1]).toMatch(/^\[web-deps\] docker-compose: \d+\.\d+\.\d+$/);
    expect(l[2]).toMatch(/^\[web-deps\] docker compose: \d+\.\d+\.\d+/);
  }, 60_000);

  it("the cause: on this host Debian's wrapper prints the error the set-up used to show", async () => {
    // /etc/chromium.d/dev-shm compares `findmnt -bnr -o avail -T /dev/shm` with -lt; more than one
    // mount on /dev/shm gives more than one number and the test `[` fails.
    const mounts = lines((await sh("findmnt", ["-bnr", "-o", "avail", "-T", "/dev/shm"])).out);
    expect(existsSync("/usr/bin/chromium")).toBe(true);
    const wrapper = await sh("/usr/bin/chromium", [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--version",
    ]);
    expect(wrapper.code).toBe(0);
    expect(wrapper.err.includes("unexpected operator")).toBe(mounts.length > 1);
  }, 60_000);

  it("`docker compose` works on a host with only docker-compose v1 (the shim the set-up installs)", async () => {
    const v1 = await sh("docker-compose", ["version", "--short"]);
    const v2 = await sh("docker", ["compose", "version", "--short"]);
    expect(v2.code, v2.err).toBe(0);
    expect(v2.out.trim()).toMatch(/^\d+\.\d+\.\d+/);
    if (v1.code === 0 && /^1\./.test(v1.out.trim())) expect(v2.out.trim()).toBe(v1.out.trim());
  }, 60_000);
});

/**
 * scripts/runsc-up.sh against a stand-in engine: a `docker` on PATH that lists the runtimes the
 * stand-in has (runsc once it got a SIGHUP after its config named it), and a process of ours as its
 * dockerd (it records the SIGHUP). The real engine is shared by every test run on this machine; its
 * own registration is what the first test above finds in place.
 */
describe("scripts/runsc-up.sh (gVisor for episode containers)", () => {
  const dir = mkdtempSync(join(tmpdir(), "runsc-up-"));
  const bin = join(dir, "bin");
  const config = join(dir, "daemon.json");
  const pidfile = join(dir, "docker.pid");
  const marker = join(dir, "trajrl-dockerd.pid");
  const hup = join(dir, "hup");
  let dockerd: ChildProcess | undefined;

  const setUp = () => {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(bin, { recursive: true });
    // The stand-in engine lists runsc once reloaded with a config that names it.
    writeFileSync(
      join(bin, "docker"),
      `#!/bin/sh
case "$1" in
  info) if [ -f ${hup} ] && grep -q '"runsc"' ${config}; then echo '{"runc":{"path":"runc"},"runsc":{"path":"/usr/bin/runsc"}}'; else echo '{"runc":{"path":"runc"}}'; fi ;;
  image) exit 1 ;;
  *) exit 1 ;;
esac
`,
    );
    chmodSync(join(bin, "docker"), 0o755);
    dockerd = spawn("bash", ["-c", `trap 'touch ${hup}' HUP; while :; do sleep 0.1; done`], {
      stdio: "ignore",
    });
    writeFileSync(pidfile, String(dockerd.pid));
  };
  const run = () =>
    sh("bash", ["scripts/runsc-up.sh"], 60_000, {
      ...process.env,
      PATH: `${bin}:${process.env.PATH}`,
      DOCKERD_CONFIG: config,
      DOCKERD_PIDFILE: pidfile,
      TRAJRL_DOCKERD_MARKER: marker,
    });
  const stop = () => {
    dockerd?.kill("SIGKILL");
    dockerd = undefined;
  };

  it("an engine this set-up started: runsc merged into its daemon.json (the rest kept), a reload, then silence", async () => {
    setUp();
    try {
      writeFileSync(marker, String(dockerd!.pid));
      writeFileSync(
        config,
        JSON.stringify({ "log-level": "warn", runtimes: { other: { path: "/bin/other" } } }),
      );
      const r = await run();
      expect(r.code, r.err).toBe(0);
      expect(existsSync(hup)).toBe(true);
      expect(JSON.parse(readFileSync(config, "utf8"))).toEqual({
        "log-level": "warn",
        runtimes: {
          other: { path: "/bin/other" },
          runsc: { path: "/usr/bin/runsc", runtimeArgs: ["--network=host"] },
        },
      });
      for (const l of lines(r.out + r.err)) expect(l).toMatch(/^\[runsc-up\] /);
      expect(r.err).toContain("registering runsc with the engine");
      // In place: nothing to do, nothing said.
      const again = await run();
      expect([again.code, again.out, again.err]).toEqual([0, "", ""]);
    } finally {
      stop();
    }
  }, 120_000);

  it("an engine it did not start: its config untouched, no reload; the entry to add is printed", async () => {
    setUp();
    try {
      writeFileSync(marker, "1");
      const before = JSON.stringify({ "log-level": "warn" });
      writeFileSync(config, before);
      const r = await run();
      expect(r.code, r.err).toBe(0);
      expect(readFileSync(config, "utf8")).toBe(before);
      expect(existsSync(hup)).toBe(false);
      expect(r.err).toContain("not started by this set-up: left alone");
      expect(r.err).toContain(
        '"runtimes": {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=host"]}}',
      );
    } finally {
      stop();
    }
  }, 120_000);

  it("a config that is not JSON is never overwritten", async () => {
    setUp();
    try {
      writeFileSync(marker, String(dockerd!.pid));
      writeFileSync(config, "{ not json");
      const r = await run();
      expect(r.code).toBe(1);
      expect(r.err).toMatch(/ERROR: .*daemon\.json could not be updated/);
      expect(readFileSync(config, "utf8")).toBe("{ not json");
      expect(existsSync(hup)).toBe(false);
    } finally {
      stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
