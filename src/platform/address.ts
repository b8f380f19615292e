/**
 * Which addresses a pack host may redirect us to: public unicast only. A miner controls the pack
 * URL and whatever it redirects to; a redirect into loopback, a private network or link-local
 * (cloud metadata at 169.254.169.254) would have the validator probe its own side of the network.
 */
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions } from "node:dns";
import { BlockList, isIP, type LookupFunction } from "node:net";

const blocked = new BlockList();
for (const [net, prefix] of [
  ["0.0.0.0", 8], // "this network"
  ["10.0.0.0", 8],
  ["100.64.0.0", 10], // carrier-grade NAT
  ["127.0.0.0", 8],
  ["169.254.0.0", 16], // link-local, cloud metadata
  ["172.16.0.0", 12],
  ["192.0.0.0", 24], // IETF protocol assignments
  ["192.0.2.0", 24], // documentation
  ["192.168.0.0", 16],
  ["198.18.0.0", 15], // benchmarking
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, broadcast
] as const)
  blocked.addSubnet(net, prefix, "ipv4");
for (const [net, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["64:ff9b:1::", 48], // local-use NAT64
  ["100::", 64], // discard
  ["2001:db8::", 32], // documentation
  ["fc00::", 7], // unique local
  ["fe80::", 10], // link-local
  ["fec0::", 10], // site-local (deprecated)
  ["ff00::", 8], // multicast
] as const)
  blocked.addSubnet(net, prefix, "ipv6");

/** True for a public unicast IP address (v4, v6, or v4 inside v6: mapped, compatible, NAT64). */
export function isPublicAddress(ip: string): boolean {
  const family = isIP(ip);
  if (family === 4) return !blocked.check(ip, "ipv4");
  if (family !== 6) return false;
  const embedded = embeddedIpv4(ip);
  if (embedded !== null) return isPublicAddress(embedded);
  return !blocked.check(ip, "ipv6");
}

/** The IPv4 address inside ::ffff:a.b.c.d, ::a.b.c.d and 64:ff9b::a.b.c.d (any spelling), or null. */
function embeddedIpv4(ip: string): string | null {
  const words = expandIpv6(ip);
  if (!words) return null;
  const zero = (from: number, to: number) => words.slice(from, to).every((w) => w === 0);
  const mapped = zero(0, 5) && (words[5] === 0xffff || words[5] === 0);
  const nat64 = words[0] === 0x64 && words[1] === 0xff9b && zero(2, 6);
  if (!mapped && !nat64) return null;
  if (mapped && words[5] === 0 && words[6] === 0 && words[7]! <= 1) return null; // :: and ::1
  return `${words[6]! >> 8}.${words[6]! & 0xff}.${words[7]! >> 8}.${words[7]! & 0xff}`;
}

function expandIpv6(ip: string): number[] | null {
  let s = ip.split("%")[0]!;
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (v4) {
    const o = v4[1]!.split(".").map(Number);
    s = `${s.slice(0, -v4[1]!.length)}${((o[0]! << 8) | o[1]!).toString(16)}:${((o[2]! << 8) | o[3]!).toString(16)}`;
  }
  const [head, tail] = s.split("::") as [string, string | undefined];
  const part = (x: string) => (x === "" ? [] : x.split(":").map((w) => Number.parseInt(w, 16)));
  const h = part(head);
  const t = tail === undefined ? [] : part(tail);
  const fill = tail === undefined ? 0 : 8 - h.length - t.length;
  const words = [...h, ...new Array<number>(Math.max(0, fill)).fill(0), ...t];
  return words.length === 8 && words.every((w) => Number.isInteger(w) && w >= 0 && w <= 0xffff)
    ? words
    : null;
}

/** Thrown by publicOnlyLookup; the fetcher turns it into an InputError with its own code. */
export class NonPublicAddressError extends Error {
  readonly code = "ENONPUBLIC";
  constructor(
    readonly host: string,
    readonly address: string,
  ) {
    super(`${host} resolves to ${address}, not a public address`);
  }
}

/**
 * A `lookup` for the sockets of redirect hops: resolves as usual and refuses the connection when
 * any address is not public. It runs at connect time, so a name cannot resolve to a public address
 * when checked and to a private one when connected (DNS rebinding).
 */
export const publicOnlyLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(
    hostname,
    { ...(options as object), all: true } as LookupAllOptions,
    (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, "", 0);
      const bad = addresses.find((a) => !isPublicAddress(a.address));
      if (bad || addresses.length === 0)
        return callback(
          new NonPublicAddressError(hostname, bad?.address ?? "nothing") as NodeJS.ErrnoException,
          "",
          0,
        );
      if ((options as { all?: boolean }).all)
        return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      const first = addresses[0]!;
      callback(null, first.address, first.family);
    },
  );
};
