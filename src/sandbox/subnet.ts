/**
 * Pure IPv4 arithmetic for the episode address pool: a CIDR (default 10.213.0.0/16) carved into
 * /28 blocks, each block one episode network. Docker's own default pools are left alone, so
 * hundreds of episodes a day never exhaust them.
 */
import { InputError } from "../errors.js";

export interface Cidr {
  /** Network address as an unsigned 32-bit integer. */
  base: number;
  prefix: number;
}

export function ipToInt(ip: string): number {
  const parts = ip.split(".");
  if (parts.length !== 4) throw new InputError("invalid_ip", `not an IPv4 address: ${ip}`);
  let n = 0;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255)
      throw new InputError("invalid_ip", `not an IPv4 address: ${ip}`);
    n = n * 256 + Number(p);
  }
  return n >>> 0;
}

export function intToIp(n: number): string {
  return [(n >>> 24) & 255, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
}

export function parseCidr(s: string): Cidr {
  const m = /^(\d+\.\d+\.\d+\.\d+)\/(\d{1,2})$/.exec(s.trim());
  if (!m) throw new InputError("invalid_cidr", `not an IPv4 CIDR: ${s}`);
  const prefix = Number(m[2]);
  if (prefix < 0 || prefix > 32) throw new InputError("invalid_cidr", `bad prefix length in ${s}`);
  const ip = ipToInt(m[1]!);
  const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  return { base: (ip & mask) >>> 0, prefix };
}

export function formatCidr(c: Cidr): string {
  return `${intToIp(c.base)}/${c.prefix}`;
}

export function cidrSize(c: Cidr): number {
  return 2 ** (32 - c.prefix);
}

export function overlaps(a: Cidr, b: Cidr): boolean {
  const aEnd = a.base + cidrSize(a) - 1;
  const bEnd = b.base + cidrSize(b) - 1;
  return a.base <= bEnd && b.base <= aEnd;
}

export const BLOCK_PREFIX = 28;

/** Number of /28 blocks in the pool. */
export function blockCount(pool: Cidr, blockPrefix = BLOCK_PREFIX): number {
  if (pool.prefix > blockPrefix)
    throw new InputError("invalid_cidr", `pool ${formatCidr(pool)} is smaller than one /${blockPrefix}`);
  return 2 ** (blockPrefix - pool.prefix);
}

export function blockAt(pool: Cidr, index: number, blockPrefix = BLOCK_PREFIX): Cidr {
  return { base: (pool.base + index * 2 ** (32 - blockPrefix)) >>> 0, prefix: blockPrefix };
}

/** Gateway of a block: its first host address (the bridge's IP on the host). */
export function gatewayOf(block: Cidr): string {
  return intToIp(block.base + 1);
}

/**
 * The first free block scanning from `start` (wrapping), or undefined when the pool is full.
 * Starting at a random index spreads concurrent allocators (several processes) apart; a clash that
 * still happens is rejected by the engine and the caller moves on.
 */
export function pickFreeBlock(
  pool: Cidr,
  used: readonly Cidr[],
  start = 0,
  skip: ReadonlySet<number> = new Set(),
  blockPrefix = BLOCK_PREFIX,
): { index: number; block: Cidr } | undefined {
  const n = blockCount(pool, blockPrefix);
  const relevant = used.filter((u) => overlaps(u, pool));
  for (let k = 0; k < n; k++) {
    const index = (((start + k) % n) + n) % n;
    if (skip.has(index)) continue;
    const block = blockAt(pool, index, blockPrefix);
    if (!relevant.some((u) => overlaps(u, block))) return { index, block };
  }
  return undefined;
}

/** The n-th host address of a network's subnet (1 is the gateway): fixed addresses, no inspect round trip. */
export function hostAddress(subnet: string, n: number): string {
  return intToIp(ipToInt(subnet.split("/")[0]!) + n);
}
