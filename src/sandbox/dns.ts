/**
 * DNS as a way out of an episode (issue 20 item 3). Docker's embedded resolver (127.0.0.11) answers
 * every container on a user-defined network. Names it does not know it forwards to "external"
 * resolvers: those given with --dns, else the host's. For a host resolver on loopback (systemd-resolved's
 * 127.0.0.53, a local dnsmasq), engines before 26.0.0 / 25.0.4 / 23.0.11 send that query from the
 * host's namespace, so a container on an *internal* network can tunnel data out through DNS
 * (CVE-2024-29018, GHSA-mq39-4gv4-mvpx). Resolvers given with --dns are always dialled from the
 * container's own namespace, where an internal network has no route out.
 *
 * Debian bookworm's docker.io 20.10.24+dfsg1-1+deb12u1 carries no fix for it (its changelog names
 * CVE-2024-41110 only). Every episode container therefore gets --dns 127.0.0.1 (container-spec.ts): its own
 * loopback, where nothing answers. Engines known to leak are named in a warning at start and by
 * `trajrl-validator check`; episodes run, because the setting closes the hole on them too.
 */

export interface EngineDnsVerdict {
  /** true: this engine version forwards internal networks' DNS through the host's loopback resolver. */
  affected: boolean;
  reason: string;
}

export const DNS_CVE = "CVE-2024-29018";

/** Pure: is this engine version (`docker version` Server.Version) affected by CVE-2024-29018? */
export function engineDnsVerdict(version: string): EngineDnsVerdict {
  const m = /^v?(\d+)\.(\d+)(?:\.(\d+))?/.exec(version.trim());
  if (!m) return { affected: true, reason: `engine version ${version} not understood: assumed affected` };
  const [major, minor, patch] = [Number(m[1]), Number(m[2]), Number(m[3] ?? 0)];
  const fixedIn = (x: string) => ({ affected: false, reason: `engine ${version}: fixed in ${x}` });
  if (major >= 26) return fixedIn("26.0.0");
  if (major === 25 && minor === 0 && patch >= 4) return fixedIn("25.0.4");
  if (major === 25 && minor > 0) return fixedIn("25.0.4");
  if (major === 23 && minor === 0 && patch >= 11) return fixedIn("23.0.11");
  return {
    affected: true,
    reason: `engine ${version} predates the fix (26.0.0, 25.0.4, 23.0.11)${/dfsg/.test(version) ? "; Debian's package does not carry it" : ""}`,
  };
}
