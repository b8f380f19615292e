import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CappedText, demuxFrames } from "../../src/sandbox/container-output.js";
import { createOptions, SIDECAR_LIMITS } from "../../src/sandbox/container-spec.js";
import { globToRegExp, imageHash, isIgnored, parseIgnore } from "../../src/sandbox/context.js";
import { engineDnsVerdict } from "../../src/sandbox/dns.js";
import { canonicalCidr, chainRules, chainsOf, graderRules, jumpRules } from "../../src/sandbox/firewall.js";
import {
  containerIdFromMountinfo,
  LABEL,
  labelsFor,
  newSession,
  processBoot,
  safeName,
  uniqueName,
} from "../../src/sandbox/labels.js";
import { reapDecision } from "../../src/sandbox/reaper.js";
import { RUNC_RUNTIME } from "../../src/sandbox/runtime.js";
import {
  blockAt,
  blockCount,
  formatCidr,
  gatewayOf,
  intToIp,
  ipToInt,
  overlaps,
  parseCidr,
  pickFreeBlock,
} from "../../src/sandbox/subnet.js";

describe("subnet pool arithmetic", () => {
  it("round-trips addresses and normalises CIDRs", () => {
    fc.assert(fc.property(fc.nat(0xffffffff), (n) => ipToInt(intToIp(n)) === n));
    expect(formatCidr(parseCidr("10.213.7.9/16"))).toBe("10.213.0.0/16");
    expect(() => parseCidr("10.213.0.0")).toThrow(/CIDR/);
    expect(() => parseCidr("300.1.1.1/8")).toThrow(/IPv4/);
  });

  it("carves the default pool into 4096 /28 blocks with .1 gateways", () => {
    const pool = parseCidr("10.213.0.0/16");
    expect(blockCount(pool)).toBe(4096);
    expect(formatCidr(blockAt(pool, 0))).toBe("10.213.0.0/28");
    expect(formatCidr(blockAt(pool, 4095))).toBe("10.213.255.240/28");
    expect(gatewayOf(blockAt(pool, 17))).toBe("10.213.1.17");
    expect(() => blockCount(parseCidr("10.0.0.0/30"))).toThrow(/smaller/);
  });

  it("never picks a block overlapping a used subnet, wraps around, and reports a full pool", () => {
    const pool = parseCidr("10.213.0.0/26"); // 4 blocks
    const used = [parseCidr("10.213.0.16/28"), parseCidr("192.168.0.0/16")];
    expect(formatCidr(pickFreeBlock(pool, used, 1)!.block)).toBe("10.213.0.32/28");
    expect(formatCidr(pickFreeBlock(pool, used, 3)!.block)).toBe("10.213.0.48/28");
    expect(formatCidr(pickFreeBlock(pool, used, 3, new Set([3]))!.block)).toBe("10.213.0.0/28");
    // A wider network covering the whole pool (someone else's /16) leaves nothing.
    expect(pickFreeBlock(pool, [parseCidr("10.213.0.0/16")], 0)).toBeUndefined();
  });

  it("property: a picked block is inside the pool and overlaps nothing used", () => {
    const pool = parseCidr("10.213.0.0/24");
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 15 }), { maxLength: 16 }), fc.nat(100), (idx, start) => {
        const used = idx.map((i) => blockAt(pool, i));
        const got = pickFreeBlock(pool, used, start);
        if (new Set(idx).size === 16) return got === undefined;
        return got !== undefined && overlaps(got.block, pool) && !used.some((u) => overlaps(u, got.block));
      }),
    );
  });
});

describe("build context ignore rules", () => {
  it("matches .dockerignore-style globs", () => {
    expect(globToRegExp("*.pyc").test("a.pyc")).toBe(true);
    expect(globToRegExp("*.pyc").test("dir/a.pyc")).toBe(false);
    expect(globToRegExp("**/*.pyc").test("dir/sub/a.pyc")).toBe(true);
    expect(globToRegExp("**/*.pyc").test("a.pyc")).toBe(true);
    expect(globToRegExp("build").test("build/x/y")).toBe(true);
    expect(globToRegExp("build").test("builder")).toBe(false);
    const rules = parseIgnore(["# comment", "*.log", "!keep.log", ""]);
    expect(isIgnored("x.log", rules)).toBe(true);
    expect(isIgnored("keep.log", rules)).toBe(false);
    expect(isIgnored("x.txt", rules)).toBe(false);
  });

  it("image hash depends on files, Dockerfile, args and base ids, not on their order", () => {
    const a = imageHash("f", "Dockerfile", { A: "1", B: "2" }, ["x", "y"]);
    expect(imageHash("f", "Dockerfile", { B: "2", A: "1" }, ["y", "x"])).toBe(a);
    expect(imageHash("g", "Dockerfile", { A: "1", B: "2" }, ["x", "y"])).not.toBe(a);
    expect(imageHash("f", "Dockerfile", { A: "1", B: "3" }, ["x", "y"])).not.toBe(a);
    expect(imageHash("f", "Dockerfile", { A: "1", B: "2" }, ["x", "z"])).not.toBe(a);
    expect(imageHash("f", "other.Dockerfile", { A: "1", B: "2" }, ["x", "y"])).not.toBe(a);
  });
});

describe("reaper decisions", () => {
  const me = { id: "aaaaaa", host: "h1", pid: 100 };
  const now = 1_000_000;
  const alive = (pid: number) => pid === 100 || pid === 200;
  const labels = (over: Record<string, string>): Record<string, string> => ({
    ...labelsFor({ id: "bbbbbb", host: "h1", pid: 200 }, "sidecar", "ep1", now + 60),
    ...over,
  });

  it("keeps our live episodes and removes ours that are not live", () => {
    const mine = labelsFor(me, "agent", "ep-live", now + 60);
    expect(reapDecision(mine, me, new Set(["ep-live"]), now, alive)).toBeUndefined();
    expect(reapDecision(mine, me, new Set(), now, alive)).toBe("not_live");
  });

  it("leaves a live sibling process alone, reaps a dead owner on this host and anything expired", () => {
    expect(reapDecision(labels({}), me, new Set(), now, alive)).toBeUndefined();
    expect(reapDecision(labels({ [LABEL.pid]: "999" }), me, new Set(), now, alive)).toBe("owner_dead");
    // A dead pid on another host means nothing here: only expiry applies.
    expect(
      reapDecision(labels({ [LABEL.pid]: "999", [LABEL.host]: "h2" }), me, new Set(), now, alive),
    ).toBeUndefined();
    expect(reapDecision(labels({ [LABEL.expires]: String(now - 1) }), me, new Set(), now, alive)).toBe(
      "expired",
    );
    expect(reapDecision({ "other.label": "x" }, me, new Set(), now, alive)).toBeUndefined();
  });

  it("a pid started again (a restarted daemon container) is a dead owner; so is an owner container the engine lost", () => {
    const boots: Record<number, string> = { 200: "k1:500" };
    const sameStart = (pid: number, boot: string | undefined) =>
      alive(pid) && (boot === undefined || boots[pid] === boot);
    expect(reapDecision(labels({ [LABEL.boot]: "k1:500" }), me, new Set(), now, sameStart)).toBeUndefined();
    // Same host, same pid, another start: the container restarted and its new process got the old pid.
    expect(reapDecision(labels({ [LABEL.boot]: "k1:400" }), me, new Set(), now, sameStart)).toBe(
      "owner_dead",
    );
    // Another kernel boot (a reboot) likewise.
    expect(reapDecision(labels({ [LABEL.boot]: "k0:500" }), me, new Set(), now, sameStart)).toBe(
      "owner_dead",
    );
    // A recreated daemon container: another hostname, and the engine no longer has the old one.
    const old = labels({ [LABEL.host]: "oldhost", [LABEL.container]: "c".repeat(64) });
    expect(reapDecision(old, me, new Set(), now, alive, () => false)).toBeUndefined();
    expect(reapDecision(old, me, new Set(), now, alive, (id) => id === "c".repeat(64))).toBe("owner_dead");
    // Our own container is never judged gone.
    const inside = { ...me, container: "c".repeat(64) };
    expect(reapDecision(old, inside, new Set(), now, alive, () => true)).toBeUndefined();
  });

  it("reads a process's start and its container from /proc", () => {
    const files: Record<string, string> = {
      "/proc/sys/kernel/random/boot_id": "0dce6778-19c4\n",
      // A command name with spaces and a parenthesis: fields are counted after the last ')'.
      "/proc/7/stat": `7 (node (x) y) S 1 7 7 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 11 0 121904 1000 50 ${"0 ".repeat(30)}`,
    };
    expect(processBoot(7, (p) => files[p])).toBe("0dce6778-19c4:121904");
    expect(processBoot(8, (p) => files[p])).toBeUndefined();
    // This process: a real /proc answers, and the same pid read twice is the same start.
    expect(processBoot(process.pid)).toMatch(/^[0-9a-f-]+:\d+$/);
    expect(processBoot(process.pid)).toBe(processBoot(process.pid));
    const id = "ab".repeat(32);
    expect(
      containerIdFromMountinfo(
        `612 590 254:0 /var/lib/docker/containers/${id}/resolv.conf /etc/resolv.conf rw - ext4 /dev/vda rw\n`,
      ),
    ).toBe(id);
    expect(containerIdFromMountinfo("22 1 0:21 / /proc rw - proc proc rw\n")).toBeUndefined();
    // On a host, the mount table lists the files of a container being started, mounted into its
    // root: that container is not this process's (taking it made other processes reap our episodes).
    const other = "cd".repeat(32);
    const starting = ["resolv.conf", "hostname", "hosts"]
      .map(
        (f, k) =>
          `${105 + k} 104 254:0 /var/lib/docker/containers/${other}/${f} /var/lib/docker/overlay2/6a08/merged/etc/${f} rw,relatime - ext4 /dev/vda rw`,
      )
      .join("\n");
    expect(containerIdFromMountinfo(`22 1 0:21 / /proc rw - proc proc rw\n${starting}\n`)).toBeUndefined();
    // In a container, its own files are on /etc; another container's being started does not matter.
    expect(
      containerIdFromMountinfo(
        `${starting}\n612 590 254:0 /var/lib/docker/containers/${id}/hostname /etc/hostname rw - ext4 /dev/vda rw\n`,
      ),
    ).toBe(id);
    // A data root on its own file system: the root is relative to it.
    expect(
      containerIdFromMountinfo(`612 590 254:3 /containers/${id}/hosts /etc/hosts rw - ext4 /dev/vdb rw\n`),
    ).toBe(id);
    // A file mounted on another name is not Docker's.
    expect(
      containerIdFromMountinfo(
        `612 590 254:0 /var/lib/docker/containers/${id}/hosts /etc/hostname rw - ext4 /dev/vda rw\n`,
      ),
    ).toBeUndefined();
  });

  it("labels every object with role, session, episode, expiry, host and pid", () => {
    const s = newSession();
    const l = labelsFor(s, "verifier", "ep9", 123.4);
    expect(l).toEqual({
      [LABEL.role]: "verifier",
      [LABEL.session]: s.id,
      [LABEL.episode]: "ep9",
      [LABEL.expires]: "124",
      [LABEL.host]: s.host,
      [LABEL.pid]: String(process.pid),
      [LABEL.boot]: processBoot(process.pid),
    });
    expect(safeName("../ep 1/x")).toBe("ep-1-x");
    // Long ids that differ only in their tail (scenario, attempt) keep distinct names.
    const a = uniqueName("ev_0mx6ufq390120296072.binary-flag-hunt.1");
    const b = uniqueName("ev_0mx6ufq390120296072.binary-flag-hunt.2");
    expect(a).not.toBe(b);
    expect(a.length).toBeLessThanOrEqual(40);
    expect(uniqueName("short.1")).toBe("short.1");
  });
});

describe("firewall rules", () => {
  it("accept replies, nothing from agent bridges, the meter port from the rest sent here; drop the rest", () => {
    expect(chainRules(4, 8790)).toEqual([
      "-A TRAJRL-EPISODE -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
      "-A TRAJRL-EPISODE -i tja+ -j DROP",
      "-A TRAJRL-EPISODE -p tcp -m tcp --dport 8790 -j ACCEPT",
      "-A TRAJRL-EPISODE -j DROP",
    ]);
    expect(chainRules(6, 8790)).toEqual([
      "-A TRAJRL-EPISODE -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
      "-A TRAJRL-EPISODE -i tja+ -j DROP",
      "-A TRAJRL-EPISODE -j DROP",
    ]);
  });

  it("sends episode bridges and, where the interfaces are ethN (the daemon's container), the pool to the chain", () => {
    expect(jumpRules(4)).toEqual([
      ["-i", "tja+", "-j", "TRAJRL-EPISODE"],
      ["-i", "tjm+", "-j", "TRAJRL-EPISODE"],
      ["-i", "tjv+", "-j", "TRAJRL-GRADER"],
    ]);
    // iptables prints (and -C matches) the network address, whatever host bits the setting carries.
    expect(jumpRules(4, "10.213.7.9/16").at(-1)).toEqual(["-s", "10.213.0.0/16", "-j", "TRAJRL-EPISODE"]);
    expect(jumpRules(6, "10.213.0.0/16")).toHaveLength(3);
    expect(canonicalCidr("172.30.255.1/20")).toBe("172.30.240.0/20");
  });
});

describe("the grader's chain", () => {
  it("drops everything the registry bench's verifier network sends to the host", () => {
    expect(graderRules()).toEqual(["-A TRAJRL-GRADER -j DROP"]);
    expect(chainsOf(4, 8790).map((c) => c.chain)).toEqual(["TRAJRL-EPISODE", "TRAJRL-GRADER"]);
  });
});

describe("DNS out of an episode (CVE-2024-29018)", () => {
  it("names the engines whose embedded resolver forwards internal networks' queries through the host", () => {
    const affected = (v: string) => engineDnsVerdict(v).affected;
    // Debian bookworm's package: its changelog carries CVE-2024-41110 only.
    expect(affected("20.10.24+dfsg1")).toBe(true);
    expect(engineDnsVerdict("20.10.24+dfsg1").reason).toContain("Debian");
    expect(affected("23.0.10")).toBe(true);
    expect(affected("23.0.11")).toBe(false);
    expect(affected("24.0.9")).toBe(true);
    expect(affected("25.0.3")).toBe(true);
    expect(affected("25.0.4")).toBe(false);
    expect(affected("26.0.0")).toBe(false);
    expect(affected("28.2.2")).toBe(false);
    expect(affected("26.1.5+dfsg1")).toBe(false);
    expect(affected("nightly")).toBe(true);
  });

  it("gives every container an upstream resolver on its own loopback, whatever its network", () => {
    const base = { name: "x", image: "i", labels: {}, limits: SIDECAR_LIMITS };
    for (const network of [{ kind: "none" as const }, { kind: "network" as const, name: "n" }])
      expect(createOptions({ ...base, network }, RUNC_RUNTIME).HostConfig?.Dns).toEqual(["127.0.0.1"]);
  });
});

describe("log capture", () => {
  it("keeps head and tail within the cap and says how much was dropped", () => {
    const t = new CappedText(10);
    t.push(Buffer.from("0123456789"));
    t.push(Buffer.from("abcdefghij"));
    expect(t.truncated).toBe(true);
    expect(t.toString()).toBe("01234\n[… 10 bytes dropped …]\nfghij");
    const small = new CappedText(100);
    small.push(Buffer.from("hello"));
    expect(small.toString()).toBe("hello");
  });

  it("splits multiplexed stdout/stderr frames", () => {
    const frame = (kind: number, s: string) => {
      const body = Buffer.from(s);
      const h = Buffer.alloc(8);
      h[0] = kind;
      h.writeUInt32BE(body.length, 4);
      return Buffer.concat([h, body]);
    };
    const out = new CappedText(100);
    const err = new CappedText(100);
    demuxFrames(Buffer.concat([frame(1, "a"), frame(2, "Traceback"), frame(1, "b")]), out, err);
    expect(out.toString()).toBe("ab");
    expect(err.toString()).toBe("Traceback");
  });
});

describe("daemon address on the meter network", () => {
  it("is the last host of the /28, never an address the episode pins (.2, .3)", async () => {
    const { daemonAddressOn } = await import("../../src/sandbox/sandbox.js");
    expect(daemonAddressOn("10.213.0.16/28")).toBe("10.213.0.30");
    expect(daemonAddressOn("10.213.255.240/28")).toBe("10.213.255.254");
  });
});

describe("own container id", () => {
  it("is read from the bind mounts Docker makes, whatever the hostname", async () => {
    const { ownContainerId } = await import("../../src/sandbox/sandbox.js");
    const id = `${"a".repeat(12) + "0123456789abcdef".repeat(3)}0123`;
    const mountinfo = `612 590 254:0 /var/lib/docker/containers/${id}/hostname /etc/hostname rw,relatime - ext4 /dev/vda rw\n`;
    expect(ownContainerId(mountinfo)).toBe(id);
    const { hostname } = await import("node:os");
    expect(ownContainerId("no docker here\n")).toBe(hostname());
  });
});
