/**
 * A second Docker engine on this machine, in a network namespace of its own: its own data root,
 * exec root, bridge, socket and cgroup parent, and a TLS listener (client certificates the helper
 * makes with openssl) on the namespace's end of a veth pair. The namespace gets no route out: it
 * reaches the veth's host end (10.251.X.1) and its own addresses, nothing else; the tests address
 * only loopback, the two veth addresses and what the engines themselves start.
 *
 * dockerd runs in the namespace's network and a private mount namespace (a fresh /sys with the
 * host's cgroup hierarchy bound back, which `ip netns exec` would lose). `stop()` removes everything
 * on every path (containers, processes of its cgroup, shims, the namespace, the veth, the files);
 * `sweepStaleNetnsEngines()` removes what a killed test process left.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes, randomInt } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { connect, createServer } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import Docker from "dockerode";
import { pingWithin } from "../../src/pool/engine.js";
import { boundEngineCalls } from "../../src/sandbox/docker.js";

const ROOT_PREFIX = "/var/tmp/trajrl-netns-";

export interface NetnsEngine {
  /** Random tag of this engine (names of the namespace, interfaces, directories). */
  tag: string;
  netns: string;
  /** The host's end of the veth (the daemon side) and the namespace's (the engine's TLS listener). */
  hostIp: string;
  nsIp: string;
  /** tcp://nsIp:2376 */
  url: string;
  /** ca.pem, cert.pem, key.pem of a client the engine trusts. */
  tlsDir: string;
  /** The engine's unix socket (for the test's own inspection). */
  socketPath: string;
  docker: Docker;
  /** dockerd's pid (undefined while killed). */
  pid(): number | undefined;
  /** SIGKILL dockerd and its containerd: the engine dies mid-work. */
  kill(): Promise<void>;
  /** Start it again on the same data root, and wait until it answers. */
  restart(): Promise<void>;
  /** Copy images from another engine through the two APIs (docker save | docker load). */
  loadFrom(source: Docker, refs: readonly string[]): Promise<void>;
  /** Run a command inside the namespace (network only). */
  nsExec(argv: readonly string[]): string;
  /**
   * A path of our own from the namespace to one port of this host's loopback (the local registry):
   * a forwarder listening on the namespace's 127.0.0.1:PORT, through a unix socket, to ours. Nothing
   * else of this host becomes reachable. Resolves once it listens; the returned function closes it.
   */
  openLoopbackPath(port: number): Promise<() => void>;
  /** Take the host's end of the veth down: the engine is cut off (no reset, just silence); `reconnect` undoes it. */
  cut(): void;
  reconnect(): void;
  stop(): Promise<void>;
}

function run(
  cmd: string,
  args: readonly string[],
  opts: { input?: string; allowFail?: boolean } = {},
): string {
  try {
    return execFileSync(cmd, args, {
      encoding: "utf8",
      stdio: ["pipe", "pipe", "pipe"],
      ...(opts.input !== undefined ? { input: opts.input } : {}),
      timeout: 60_000,
    });
  } catch (err) {
    if (opts.allowFail) return "";
    const e = err as { stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(" ")}: ${e.stderr?.trim() || e.message}`);
  }
}

function pidAlive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function readPid(file: string): number | undefined {
  try {
    const n = Number(readFileSync(file, "utf8").trim());
    return Number.isInteger(n) && n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}

function makeCerts(dir: string, serverIp: string): void {
  mkdirSync(dir, { recursive: true });
  const o = (args: string[]) => run("openssl", args);
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
  o([
    "req",
    "-x509",
    ...ec,
    "-keyout",
    join(dir, "ca-key.pem"),
    "-out",
    join(dir, "ca.pem"),
    "-days",
    "2",
    "-subj",
    "/CN=trajrl-test-ca",
  ]);
  const sign = (name: string, csr: string, ext: string) => {
    writeFileSync(join(dir, `${name}.ext`), ext);
    o([
      "x509",
      "-req",
      "-in",
      csr,
      "-CA",
      join(dir, "ca.pem"),
      "-CAkey",
      join(dir, "ca-key.pem"),
      "-CAcreateserial",
      "-out",
      join(dir, `${name}.pem`),
      "-days",
      "2",
      "-extfile",
      join(dir, `${name}.ext`),
    ]);
  };
  o([
    "req",
    ...ec,
    "-keyout",
    join(dir, "server-key.pem"),
    "-out",
    join(dir, "server.csr"),
    "-subj",
    "/CN=engine",
  ]);
  sign(
    "server-cert",
    join(dir, "server.csr"),
    `subjectAltName=IP:${serverIp}\nextendedKeyUsage=serverAuth\n`,
  );
  o([
    "req",
    ...ec,
    "-keyout",
    join(dir, "key.pem"),
    "-out",
    join(dir, "client.csr"),
    "-subj",
    "/CN=validator",
  ]);
  sign("cert", join(dir, "client.csr"), "extendedKeyUsage=clientAuth\n");
}

/** Every cgroup directory under `parent` (deepest first), across the v1 controllers and v2. */
function cgroupDirs(parent: string): string[] {
  const out: string[] = [];
  const roots = existsSync("/sys/fs/cgroup")
    ? readdirSync("/sys/fs/cgroup").map((c) => join("/sys/fs/cgroup", c, parent))
    : [];
  roots.push(join("/sys/fs/cgroup", parent));
  const walk = (d: string) => {
    let entries: string[] = [];
    try {
      if (!statSync(d).isDirectory()) return;
      entries = readdirSync(d);
    } catch {
      return;
    }
    for (const e of entries) {
      const p = join(d, e);
      try {
        if (statSync(p).isDirectory()) walk(p);
      } catch {
        // gone
      }
    }
    out.push(d);
  };
  for (const r of roots) walk(r);
  return out;
}

function killCgroup(parent: string): void {
  for (let round = 0; round < 5; round++) {
    let found = 0;
    for (const d of cgroupDirs(parent)) {
      let procs: string[] = [];
      try {
        procs = readFileSync(join(d, "cgroup.procs"), "utf8").split("\n").filter(Boolean);
      } catch {
        continue;
      }
      for (const p of procs) {
        found++;
        try {
          process.kill(Number(p), "SIGKILL");
        } catch {
          // gone
        }
      }
    }
    if (!found) break;
    execFileSync("sleep", ["0.2"]);
  }
  for (const d of cgroupDirs(parent)) {
    try {
      rmSync(d, { recursive: false });
    } catch {
      try {
        execFileSync("rmdir", [d], { stdio: "ignore" });
      } catch {
        // busy or gone
      }
    }
  }
}

/** Processes whose command line mentions `needle` (the engine's shims name its containerd socket). */
function pidsMentioning(needle: string): number[] {
  const out: number[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, "utf8");
      if (cmd.includes(needle) && Number(d) !== process.pid) out.push(Number(d));
    } catch {
      // gone
    }
  }
  return out;
}

/**
 * SIGKILL `pid` only while its command line still names `needle`. A pid file outlives its process,
 * and on a busy host (pid_max 32768) the number is soon another process's: a test's verifier, an
 * agent, the suite itself. A pid read from a file is never killed on its number alone.
 */
function killIfMentions(pid: number | undefined, needle: string): void {
  if (!pid) return;
  try {
    if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(needle)) return;
    process.kill(pid, "SIGKILL");
  } catch {
    // gone
  }
}

function teardown(tag: string): void {
  const root = `${ROOT_PREFIX}${tag}`;
  const netns = `trajrl-netns-${tag}`;
  // dockerd (--data-root ROOT/data), its containerd (--config ROOT/exec/…) and the shims
  // (-address ROOT/exec/…): every one names the root; nothing is killed by a pid file's number.
  for (const pid of pidsMentioning(`${root}/`)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
  }
  killCgroup(`trajrl-netns-${tag}`);
  run("ip", ["netns", "del", netns], { allowFail: true });
  run("ip", ["link", "del", `tjn${tag}h`], { allowFail: true });
  for (let i = 0; i < 5; i++) {
    try {
      rmSync(root, { recursive: true, force: true });
      break;
    } catch {
      execFileSync("sleep", ["0.5"]);
    }
  }
}

/** Remove the engines of test processes that are gone (a killed vitest worker cannot clean up). */
export function sweepStaleNetnsEngines(): number {
  let n = 0;
  for (const d of readdirSync("/var/tmp")) {
    if (!d.startsWith("trajrl-netns-")) continue;
    const tag = d.slice("trajrl-netns-".length);
    const owner = readPid(join("/var/tmp", d, "owner.pid"));
    if (owner && pidAlive(owner)) continue;
    teardown(tag);
    n++;
  }
  return n;
}

export async function startNetnsEngine(): Promise<NetnsEngine> {
  sweepStaleNetnsEngines();
  const tag = randomBytes(3).toString("hex");
  const root = `${ROOT_PREFIX}${tag}`;
  const netns = `trajrl-netns-${tag}`;
  // An octet no interface of this host uses yet (another test's engine may be running).
  const used = new Set(
    [...run("ip", ["-4", "-o", "addr", "show"]).matchAll(/inet 10\.25[12]\.(\d+)\./g)].map((m) =>
      Number(m[1]),
    ),
  );
  const free = [...Array(256).keys()].filter((o) => !used.has(o));
  const octet = free[randomInt(0, free.length)]!;
  const hostIp = `10.251.${octet}.1`;
  const nsIp = `10.251.${octet}.2`;
  const tlsDir = join(root, "certs");
  const socketPath = join(root, "docker.sock");
  let child: ChildProcess | undefined;
  // The root appears with its owner in it (a rename): another process's sweep never sees it ownerless.
  const staging = `/var/tmp/.trajrl-netns-staging-${tag}`;
  mkdirSync(staging, { recursive: true });
  writeFileSync(join(staging, "owner.pid"), String(process.pid));
  renameSync(staging, root);
  try {
    makeCerts(tlsDir, nsIp);
    writeFileSync(join(root, "daemon.json"), "{}\n");
    run("ip", ["netns", "add", netns]);
    run("ip", ["link", "add", `tjn${tag}h`, "type", "veth", "peer", "name", `tjn${tag}n`]);
    run("ip", ["link", "set", `tjn${tag}n`, "netns", netns]);
    run("ip", ["addr", "add", `${hostIp}/30`, "dev", `tjn${tag}h`]);
    run("ip", ["link", "set", `tjn${tag}h`, "up"]);
    const ns = (args: string[]) => run("ip", ["netns", "exec", netns, ...args]);
    ns(["ip", "addr", "add", `${nsIp}/30`, "dev", `tjn${tag}n`]);
    ns(["ip", "link", "set", `tjn${tag}n`, "up"]);
    ns(["ip", "link", "set", "lo", "up"]);
    ns(["ip", "link", "add", `tjn${tag}b`, "type", "bridge"]);
    ns(["ip", "addr", "add", `10.252.${octet}.1/24`, "dev", `tjn${tag}b`]);
    ns(["ip", "link", "set", `tjn${tag}b`, "up"]);
  } catch (err) {
    teardown(tag);
    throw err;
  }

  const launch = () => {
    mkdirSync(join(root, "cg"), { recursive: true });
    const dockerd = [
      "dockerd",
      "--config-file",
      join(root, "daemon.json"),
      "--data-root",
      join(root, "data"),
      "--exec-root",
      join(root, "exec"),
      "--pidfile",
      join(root, "docker.pid"),
      "-H",
      `unix://${socketPath}`,
      "-H",
      `tcp://${nsIp}:2376`,
      "--tlsverify",
      "--tlscacert",
      join(tlsDir, "ca.pem"),
      "--tlscert",
      join(tlsDir, "server-cert.pem"),
      "--tlskey",
      join(tlsDir, "server-key.pem"),
      "--bridge",
      `tjn${tag}b`,
      "--default-address-pool",
      "base=10.253.0.0/16,size=24",
      "--cgroup-parent",
      `/trajrl-netns-${tag}`,
    ].join(" ");
    const script = `mount --rbind /sys/fs/cgroup ${root}/cg && mount -t sysfs sysfs /sys && mount --rbind ${root}/cg /sys/fs/cgroup && exec ${dockerd} >>${root}/dockerd.log 2>&1`;
    child = spawn(
      "nsenter",
      [`--net=/var/run/netns/${netns}`, "unshare", "-m", "--propagation", "slave", "sh", "-c", script],
      { stdio: ["ignore", "ignore", "ignore"], detached: false },
    );
    child.unref();
  };
  // The test's own client: no call waits forever on an engine the test killed or wedged.
  const docker = boundEngineCalls(new Docker({ socketPath }), { callMs: 60_000 });
  // A process killed by a signal keeps exitCode null: both say it is gone.
  const running = () => child !== undefined && child.exitCode === null && child.signalCode === null;
  const waitUp = async () => {
    for (let i = 0; i < 120; i++) {
      try {
        await pingWithin(docker, 5_000);
        return;
      } catch {
        if (child && !running()) break;
        await sleep(250);
      }
    }
    let tail = "";
    try {
      tail = readFileSync(join(root, "dockerd.log"), "utf8").split("\n").slice(-6).join("\n");
    } catch {
      // no log
    }
    throw new Error(
      `the netns engine ${tag} did not answer (dockerd ${child?.exitCode ?? child?.signalCode}): ${tail}`,
    );
  };
  try {
    launch();
    await waitUp();
  } catch (err) {
    teardown(tag);
    throw err;
  }

  let stopped = false;
  const engine: NetnsEngine = {
    tag,
    netns,
    hostIp,
    nsIp,
    url: `tcp://${nsIp}:2376`,
    tlsDir,
    socketPath,
    docker,
    pid: () => (running() ? child?.pid : undefined),
    async kill() {
      const containerd = readPid(join(root, "exec/containerd/containerd.pid"));
      if (child?.pid && running()) process.kill(child.pid, "SIGKILL");
      killIfMentions(containerd, `${root}/`);
      for (let i = 0; i < 40 && running(); i++) await sleep(50);
    },
    async restart() {
      // A killed containerd can linger as a zombie of whoever adopted it; dockerd would wait for it.
      rmSync(join(root, "docker.pid"), { force: true });
      rmSync(join(root, "exec/containerd/containerd.pid"), { force: true });
      launch();
      await waitUp();
    },
    async loadFrom(source, refs) {
      const tar = (await (
        source as unknown as { getImages(o: object): Promise<NodeJS.ReadableStream> }
      ).getImages({
        names: [...refs],
      })) as NodeJS.ReadableStream;
      const answer = (await docker.loadImage(
        tar as never,
        { quiet: true } as never,
      )) as unknown as NodeJS.ReadableStream;
      for await (const _ of answer) {
        // drain
      }
    },
    nsExec(argv) {
      return run("ip", ["netns", "exec", netns, ...argv]);
    },
    async openLoopbackPath(port) {
      const sock = join(root, "exec", `path-${port}.sock`);
      rmSync(sock, { force: true });
      const host = createServer((c) => {
        const up = connect(port, "127.0.0.1");
        c.pipe(up).pipe(c);
        c.on("error", () => up.destroy());
        up.on("error", () => c.destroy());
      });
      await new Promise<void>((resolve) => host.listen(sock, resolve));
      const script = `const n=require("node:net");n.createServer(c=>{const u=n.connect(process.argv[1]);c.pipe(u).pipe(c);c.on("error",()=>u.destroy());u.on("error",()=>c.destroy())}).listen(${port},"127.0.0.1",()=>console.log("ready"))`;
      const fwd = spawn("ip", ["netns", "exec", netns, process.execPath, "-e", script, sock], {
        stdio: ["ignore", "pipe", "ignore"],
      });
      await new Promise<void>((resolve, reject) => {
        fwd.stdout!.once("data", () => resolve());
        fwd.once("exit", (code) => reject(new Error(`the namespace's forwarder exited (${code})`)));
      });
      return () => {
        fwd.kill("SIGKILL");
        host.close();
      };
    },
    cut() {
      run("ip", ["link", "set", `tjn${tag}h`, "down"]);
    },
    reconnect() {
      run("ip", ["link", "set", `tjn${tag}h`, "up"]);
      run("ip", ["addr", "replace", `${hostIp}/30`, "dev", `tjn${tag}h`]);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      if (child && running()) {
        try {
          const all = await docker.listContainers({ all: true });
          await Promise.all(
            all.map((c) =>
              docker
                .getContainer(c.Id)
                .remove({ force: true })
                .catch(() => undefined),
            ),
          );
        } catch {
          // the engine is not answering: the kill below
        }
        child.kill("SIGTERM");
        for (let i = 0; i < 150 && running(); i++) await sleep(100);
      }
      teardown(tag);
    },
  };
  return engine;
}
