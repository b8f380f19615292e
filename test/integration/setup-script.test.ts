/**
 * The machine set-up (scripts/setup.sh) prints only what it does (issue 22 item 2): on a host where
 * everything is in place, nothing at all; each line it does print is one of its own `[step]` lines.
 * Debian's /usr/bin/chromium wrapper printed a shell error on hosts whose /dev/shm is mounted more
 * than once; web-deps.sh checks chromium through its binary instead.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const pexec = promisify(execFile);
const root = new URL("../..", import.meta.url).pathname;

async function sh(cmd: string, args: string[], timeout = 600_000) {
  try {
    const r = await pexec(cmd, args, { cwd: root, timeout, maxBuffer: 16 << 20 });
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
      expect(l).toMatch(/^\[(docker-up|python-deps|web-deps|registry-up)\] /);
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
