/**
 * Firewall for episode networks. Docker's "internal" networks stop forwarding, but a host service
 * bound on 0.0.0.0 (or on the bridge's gateway IP) is still reachable from any container through
 * the gateway: that traffic goes to the INPUT chain, which Docker leaves open. One small chain
 * closes that hole: agent networks reach nothing; meter networks reach only the meter's port.
 *
 * A second chain, TRAJRL-GRADER, drops everything the registry bench's verifier sends to the host:
 * its network (`tjv…`, src/sandbox/networks.ts) keeps a route out for graders that fetch tools, but
 * no host address — the host's own services, every episode's meter listener on its gateway — answers
 * it. (Its way to episode containers is closed by Docker itself: internal networks take no
 * forwarded traffic, and bridges are isolated from each other.)
 *
 * Traffic is sent to the chain by two keys, because the same rules run in two places:
 * - on the host, episode bridges carry fixed name prefixes (`tja…`, `tjm…`): `-i tja+`, `-i tjm+`;
 * - inside the daemon's own container (DAEMON_IN_CONTAINER: it joins every meter network), the
 *   interfaces are `ethN` and no name says which is an episode's, but every episode address comes
 *   from EPISODE_SUBNET_POOL: `-s <pool>`. Only meter networks are joined there, so the meter port
 *   is what answers (issue 20 item 2: bridge names alone matched nothing inside the container).
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { InfraError } from "../errors.js";
import type { Logger } from "../log.js";
import { silentLogger } from "../log.js";
import { formatCidr, parseCidr } from "./subnet.js";

const run = promisify(execFile);

/** Bridge name prefixes (Linux interface names are at most 15 characters). */
export const AGENT_BRIDGE_PREFIX = "tja";
export const METER_BRIDGE_PREFIX = "tjm";
/** The registry bench's verifier network (egress, no host). */
export const GRADER_BRIDGE_PREFIX = "tjv";
export const FIREWALL_CHAIN = "TRAJRL-EPISODE";
export const GRADER_CHAIN = "TRAJRL-GRADER";
/** The port the meter listens on at each meter network's gateway (the sidecar's meter:8790). */
export const METER_EPISODE_PORT = 8790;

export interface FirewallOptions {
  /** EPISODE_SUBNET_POOL: traffic from it is sent to the chain whatever interface it arrives on. */
  poolCidr?: string;
  meterPort?: number;
  log?: Logger;
  /** Binary names, for tests of the failure path. */
  iptables?: string;
  ip6tables?: string;
}

/**
 * The rules of our chain, in iptables -S form (pure; compared with what is installed). Only what
 * the INPUT jumps send here is judged: replies pass, agent bridges get nothing, the meter port is
 * open to the rest (meter bridges on the host; episode addresses inside the daemon's container).
 */
export function chainRules(family: 4 | 6, meterPort: number | null): string[] {
  const c = FIREWALL_CHAIN;
  const rules = [
    `-A ${c} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
    `-A ${c} -i ${AGENT_BRIDGE_PREFIX}+ -j DROP`,
  ];
  // null: an engine other than the daemon's own, where the meter is a relay container on the
  // bridge itself and nothing of ours listens on the host: every port of the host stays closed.
  if (family === 4 && meterPort !== null) rules.push(`-A ${c} -p tcp -m tcp --dport ${meterPort} -j ACCEPT`);
  rules.push(`-A ${c} -j DROP`);
  return rules;
}

/** The grader's chain: nothing a grader sends reaches the host (what it sends out is forwarded, not here). */
export function graderRules(): string[] {
  return [`-A ${GRADER_CHAIN} -j DROP`];
}

/** Our chains and their rules for one family (meterPort as in chainRules). */
export function chainsOf(family: 4 | 6, meterPort: number | null): Array<{ chain: string; rules: string[] }> {
  return [
    { chain: FIREWALL_CHAIN, rules: chainRules(family, meterPort) },
    { chain: GRADER_CHAIN, rules: graderRules() },
  ];
}

/** The INPUT jumps to our chains (argument lists for iptables -C / -I). */
export function jumpRules(family: 4 | 6, poolCidr?: string): string[][] {
  const jumps = [
    ["-i", `${AGENT_BRIDGE_PREFIX}+`, "-j", FIREWALL_CHAIN],
    ["-i", `${METER_BRIDGE_PREFIX}+`, "-j", FIREWALL_CHAIN],
    ["-i", `${GRADER_BRIDGE_PREFIX}+`, "-j", GRADER_CHAIN],
  ];
  if (family === 4 && poolCidr) jumps.push(["-s", canonicalCidr(poolCidr), "-j", FIREWALL_CHAIN]);
  return jumps;
}

/** `10.213.7.9/16` → `10.213.0.0/16`, the form iptables prints and matches with -C. */
export function canonicalCidr(cidr: string): string {
  return formatCidr(parseCidr(cidr));
}

async function ipt(bin: string, args: string[], input?: string): Promise<{ stdout: string }> {
  if (input === undefined) return run(bin, ["-w", "10", ...args], { timeout: 20_000 });
  return new Promise((resolve, reject) => {
    const child = execFile(bin, ["-w", "10", ...args], { timeout: 20_000 }, (err, stdout) =>
      err ? reject(err) : resolve({ stdout }),
    );
    child.stdin?.end(input);
  });
}

async function installFamily(
  family: 4 | 6,
  bin: string,
  restoreBin: string,
  opts: FirewallOptions,
): Promise<void> {
  const port = opts.meterPort ?? METER_EPISODE_PORT;
  for (const { chain, rules: want } of chainsOf(family, port)) {
    let have: string[] = [];
    try {
      have = (await ipt(bin, ["-S", chain])).stdout
        .split("\n")
        .map((l) => l.trim())
        .filter((l) => l.startsWith("-A "));
    } catch {
      have = [];
    }
    if (have.join("\n") === want.join("\n")) continue;
    // One atomic table commit: the chain is never seen half-written (no window where it accepts all).
    const body = ["*filter", `:${chain} - [0:0]`, ...want, "COMMIT", ""].join("\n");
    await ipt(restoreBin, ["--noflush"], body);
  }
  for (const jump of jumpRules(family, opts.poolCidr)) {
    try {
      await ipt(bin, ["-C", "INPUT", ...jump]);
    } catch {
      await ipt(bin, ["-I", "INPUT", "1", ...jump]);
    }
  }
}

/**
 * Install (idempotently) the chain and the INPUT jumps for IPv4, and for IPv6 when available
 * (containers also get IPv6 disabled by sysctl). Fails with `firewall_unavailable` when iptables
 * cannot be run: episodes must not start with the hole open.
 */
export async function installFirewall(opts: FirewallOptions): Promise<void> {
  const log = opts.log ?? silentLogger;
  const v4 = opts.iptables ?? "iptables";
  try {
    await installFamily(4, v4, `${v4}-restore`, opts);
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string };
    throw new InfraError(
      "firewall_unavailable",
      `cannot install the episode firewall with ${v4} (${e.code === "ENOENT" ? "not installed" : (e.stderr?.trim() ?? e.message)}); ` +
        "episodes need it to stop containers reaching host services through the bridge gateway. " +
        "Run the validator as root on the host (or with NET_ADMIN in the host network namespace), or install iptables.",
      { cause: err, retryable: false },
    );
  }
  const v6 = opts.ip6tables ?? "ip6tables";
  try {
    await installFamily(6, v6, `${v6}-restore`, opts);
  } catch (err) {
    log.warn({ err: (err as Error).message }, "firewall.ipv6.unavailable");
  }
  log.info({ chain: FIREWALL_CHAIN, pool: opts.poolCidr ?? null }, "firewall.installed");
}

// ------------------------------------------------------------------------------------------------
// The firewall of an engine other than the daemon's own (the pool's remote engines).
// ------------------------------------------------------------------------------------------------

const ENGINE_JUMPS = jumpRules(4).map((j) => j.join(" "));

/**
 * The shell script the engine's firewall helper runs in the engine host's network namespace (pure):
 * the chain with the meter port closed (chainRules(…, null)), installed atomically when it differs,
 * the INPUT jumps for the episode bridges, IPv6 alike (best effort), then what is installed, for
 * verifyEngineFirewall to read.
 */
export function engineFirewallScript(): string {
  const family = (bin: string, v: 4 | 6, required: boolean) => {
    const fail = required ? "exit 3" : "true";
    const chains = chainsOf(v, null).map(({ chain, rules }) =>
      [
        `want='${rules.join("\n")}'`,
        `have=$(${bin} -w 10 -S ${chain} 2>/dev/null | grep '^-A ' || true)`,
        `if [ "$have" != "$want" ]; then printf '*filter\\n:${chain} - [0:0]\\n%s\\nCOMMIT\\n' "$want" | ${bin}-restore -w 10 --noflush || ${fail}; fi`,
      ].join("\n"),
    );
    const jumps = ENGINE_JUMPS.map(
      (j) => `${bin} -w 10 -C INPUT ${j} 2>/dev/null || ${bin} -w 10 -I INPUT 1 ${j} || ${fail}`,
    );
    return [...chains, ...jumps].join("\n");
  };
  return [
    "set -u",
    family("iptables", 4, true),
    `if command -v ip6tables >/dev/null 2>&1 && ip6tables -w 10 -S INPUT >/dev/null 2>&1; then`,
    family("ip6tables", 6, false),
    "fi",
    "echo '#chain'",
    `iptables -w 10 -S ${FIREWALL_CHAIN}`,
    "echo '#grader'",
    `iptables -w 10 -S ${GRADER_CHAIN}`,
    "echo '#input'",
    "iptables -w 10 -S INPUT",
  ].join("\n");
}

/** What is wrong with the firewall the helper reported (pure); empty when it is as it must be. */
export function verifyEngineFirewall(output: string): string[] {
  const chainAt = output.indexOf("#chain");
  const graderAt = output.indexOf("#grader");
  const inputAt = output.indexOf("#input");
  if (chainAt < 0 || graderAt < 0 || inputAt < 0) return ["the firewall helper printed no rules"];
  const lines = (from: number, to: number) =>
    output
      .slice(from, to)
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l.startsWith("-A "));
  const input = lines(inputAt, output.length);
  const problems: string[] = [];
  const found = [lines(chainAt, graderAt), lines(graderAt, inputAt)];
  chainsOf(4, null).forEach(({ chain, rules }, k) => {
    const have = found[k]!;
    if (have.join("\n") !== rules.join("\n"))
      problems.push(`chain ${chain} is ${have.length ? have.join(" | ") : "empty"}`);
  });
  for (const j of ENGINE_JUMPS) if (!input.includes(`-A INPUT ${j}`)) problems.push(`INPUT lacks \`${j}\``);
  return problems;
}
