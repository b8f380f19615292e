/**
 * Host firewall for episode bridges. Docker's "internal" networks stop forwarding, but a host
 * service bound on 0.0.0.0 (or on the bridge's gateway IP) is still reachable from any container
 * through the gateway: that traffic goes to the host's INPUT chain, which Docker leaves open.
 * Episode bridges get fixed name prefixes so one small chain closes that hole for all of them:
 * agent bridges reach nothing on the host; meter bridges reach only the meter's port.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { InfraError } from "../errors.js";
import type { Logger } from "../log.js";
import { silentLogger } from "../log.js";

const run = promisify(execFile);

/** Bridge name prefixes (Linux interface names are at most 15 characters). */
export const AGENT_BRIDGE_PREFIX = "tja";
export const METER_BRIDGE_PREFIX = "tjm";
export const FIREWALL_CHAIN = "TRAJRL-EPISODE";
/** The port the meter listens on at each meter network's gateway (the sidecar's meter:8790). */
export const METER_EPISODE_PORT = 8790;

export interface FirewallOptions {
  /** For the log line only: the rules match bridge name prefixes, not addresses. */
  poolCidr?: string;
  meterPort?: number;
  log?: Logger;
  /** Binary names, for tests of the failure path. */
  iptables?: string;
  ip6tables?: string;
}

/** The rules of our chain, in iptables -S form (pure; compared with what is installed). */
export function chainRules(family: 4 | 6, meterPort: number): string[] {
  const c = FIREWALL_CHAIN;
  const rules = [`-A ${c} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`];
  if (family === 4)
    rules.push(`-A ${c} -i ${METER_BRIDGE_PREFIX}+ -p tcp -m tcp --dport ${meterPort} -j ACCEPT`);
  rules.push(`-A ${c} -j DROP`);
  return rules;
}

export function jumpRules(): string[][] {
  return [
    ["-i", `${AGENT_BRIDGE_PREFIX}+`, "-j", FIREWALL_CHAIN],
    ["-i", `${METER_BRIDGE_PREFIX}+`, "-j", FIREWALL_CHAIN],
  ];
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
  const want = chainRules(family, port);
  let have: string[] = [];
  try {
    have = (await ipt(bin, ["-S", FIREWALL_CHAIN])).stdout
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l.startsWith("-A "));
  } catch {
    have = [];
  }
  if (have.join("\n") !== want.join("\n")) {
    // One atomic table commit: the chain is never seen half-written (no window where it accepts all).
    const body = ["*filter", `:${FIREWALL_CHAIN} - [0:0]`, ...want, "COMMIT", ""].join("\n");
    await ipt(restoreBin, ["--noflush"], body);
  }
  for (const jump of jumpRules()) {
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
  log.info({ chain: FIREWALL_CHAIN, pool: opts.poolCidr }, "firewall.installed");
}
