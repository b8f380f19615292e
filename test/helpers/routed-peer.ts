/**
 * A server of the test's own that a container reaches only by the host's ordinary routing: a
 * network namespace with one veth pair to the host (10.254.X.0/30, the host's end .1, the
 * namespace's .2) and a TCP server in it answering "pong <name>". The namespace has no route out
 * (it reaches the veth's host end and nothing else); a container with a route out (masquerade
 * through the host) reaches it as it would reach anything beyond the host — the way to show a
 * network keeps its egress without addressing anything outside this machine.
 *
 * `stop()` removes the namespace, the veth and the server; `sweepStaleRoutedPeers()` what a killed
 * test process left.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes, randomInt } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const STATE = "/var/tmp";
const PREFIX = "trajrl-peer-";

export interface RoutedPeer {
  /** The server's address (the namespace's end of the veth) and port. */
  ip: string;
  port: number;
  /** The host's end of the veth. */
  hostIp: string;
  stop(): void;
}

function ip(args: readonly string[], allowFail = false): string {
  try {
    return execFileSync("ip", args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 30_000 });
  } catch (err) {
    if (allowFail) return "";
    throw new Error(`ip ${args.join(" ")}: ${(err as { stderr?: string }).stderr?.trim() ?? err}`);
  }
}

function teardown(tag: string): void {
  ip(["netns", "del", `${PREFIX}${tag}`], true);
  ip(["link", "del", `tjp${tag}h`], true);
  rmSync(join(STATE, `${PREFIX}${tag}`), { recursive: true, force: true });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Remove the peers of test processes that are gone. */
export function sweepStaleRoutedPeers(): void {
  for (const d of readdirSync(STATE)) {
    if (!d.startsWith(PREFIX)) continue;
    let owner = 0;
    try {
      owner = Number(readFileSync(join(STATE, d, "owner.pid"), "utf8"));
    } catch {
      // no owner recorded: a test process died while starting it
    }
    if (!alive(owner)) teardown(d.slice(PREFIX.length));
  }
}

export async function startRoutedPeer(name: string): Promise<RoutedPeer> {
  sweepStaleRoutedPeers();
  const tag = randomBytes(3).toString("hex");
  const used = new Set(
    [...ip(["-4", "-o", "addr", "show"]).matchAll(/inet 10\.254\.(\d+)\./g)].map((m) => Number(m[1])),
  );
  const free = [...Array(256).keys()].filter((o) => !used.has(o));
  const octet = free[randomInt(0, free.length)]!;
  const hostIp = `10.254.${octet}.1`;
  const peerIp = `10.254.${octet}.2`;
  const netns = `${PREFIX}${tag}`;
  mkdirSync(join(STATE, netns), { recursive: true });
  writeFileSync(join(STATE, netns, "owner.pid"), String(process.pid));
  let server: ChildProcess | undefined;
  try {
    ip(["netns", "add", netns]);
    ip(["link", "add", `tjp${tag}h`, "type", "veth", "peer", "name", `tjp${tag}n`]);
    ip(["link", "set", `tjp${tag}n`, "netns", netns]);
    ip(["addr", "add", `${hostIp}/30`, "dev", `tjp${tag}h`]);
    ip(["link", "set", `tjp${tag}h`, "up"]);
    ip(["netns", "exec", netns, "ip", "addr", "add", `${peerIp}/30`, "dev", `tjp${tag}n`]);
    ip(["netns", "exec", netns, "ip", "link", "set", `tjp${tag}n`, "up"]);
    const script = `const s = require("node:net").createServer((c) => c.end("pong ${name}\\n")); s.listen(0, "${peerIp}", () => console.log(s.address().port));`;
    server = spawn("ip", ["netns", "exec", netns, process.execPath, "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const port = await new Promise<number>((resolve, reject) => {
      server!.stdout!.once("data", (d: Buffer) => resolve(Number(d.toString().trim())));
      server!.once("exit", (code) => reject(new Error(`the peer's server exited (${code})`)));
    });
    return {
      ip: peerIp,
      port,
      hostIp,
      stop: () => {
        server?.kill("SIGKILL");
        teardown(tag);
      },
    };
  } catch (err) {
    server?.kill("SIGKILL");
    teardown(tag);
    throw err;
  }
}
