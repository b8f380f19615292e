/**
 * A DNS server of our own for the isolation tests: it listens (UDP) on the addresses a test names,
 * records every question it receives, and answers A queries with one fixed address, so a leak would
 * even resolve. Plus a query packet a container can send with bash's /dev/udp.
 */
import { createSocket, type Socket } from "node:dgram";

export interface DnsQuestion {
  name: string;
  type: number;
  /** The local address the query arrived on. */
  on: string;
  from: string;
}

/** Encode a question (type A, class IN) with a fixed id. */
export function dnsQuery(name: string, id = 0x5a5a): Buffer {
  const labels = name.split(".").filter(Boolean);
  const parts: Buffer[] = [
    Buffer.from([id >> 8, id & 255, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]),
    ...labels.map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l, "ascii")])),
    Buffer.from([0, 0, 1, 0, 1]),
  ];
  return Buffer.concat(parts);
}

/** The question of a query packet (undefined when the packet is not one we can read). */
export function parseQuestion(
  msg: Buffer,
): { id: number; name: string; type: number; end: number } | undefined {
  if (msg.length < 17) return undefined;
  const labels: string[] = [];
  let off = 12;
  while (off < msg.length) {
    const len = msg[off]!;
    if (len === 0) break;
    if (len > 63 || off + 1 + len > msg.length) return undefined;
    labels.push(msg.subarray(off + 1, off + 1 + len).toString("ascii"));
    off += 1 + len;
  }
  if (off + 5 > msg.length) return undefined;
  return { id: msg.readUInt16BE(0), name: labels.join("."), type: msg.readUInt16BE(off + 1), end: off + 5 };
}

/** The answer our server gives: the question echoed, one A record. */
function answer(msg: Buffer, q: { end: number; type: number }, ip: string): Buffer {
  const head = Buffer.from(msg.subarray(0, q.end));
  head.writeUInt16BE(0x8180, 2); // response, recursion desired + available, no error
  head.writeUInt16BE(q.type === 1 ? 1 : 0, 6); // answers
  head.writeUInt16BE(0, 8);
  head.writeUInt16BE(0, 10);
  if (q.type !== 1) return head;
  const rr = Buffer.from([0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, ...ip.split(".").map(Number)]);
  return Buffer.concat([head, rr]);
}

export interface OwnDnsServer {
  questions: DnsQuestion[];
  /** Questions whose name contains `marker`. */
  seen(marker: string): DnsQuestion[];
  close(): Promise<void>;
}

export async function startDnsServer(addresses: readonly string[], answerIp: string): Promise<OwnDnsServer> {
  const questions: DnsQuestion[] = [];
  const sockets: Socket[] = [];
  try {
    for (const addr of addresses) {
      const s = createSocket({ type: "udp4" });
      s.on("message", (msg, rinfo) => {
        const q = parseQuestion(msg);
        if (!q) return;
        questions.push({ name: q.name, type: q.type, on: addr, from: rinfo.address });
        s.send(answer(msg, q, answerIp), rinfo.port, rinfo.address);
      });
      await new Promise<void>((resolve, reject) => {
        s.once("error", reject);
        s.bind(53, addr, () => {
          s.off("error", reject);
          resolve();
        });
      });
      sockets.push(s);
    }
  } catch (err) {
    for (const s of sockets) s.close();
    throw err;
  }
  return {
    questions,
    seen: (marker) => questions.filter((q) => q.name.includes(marker)),
    close: () =>
      Promise.all(sockets.map((s) => new Promise<void>((r) => s.close(() => r())))).then(() => undefined),
  };
}

/** A bash line sending `packet` to host:53 over UDP and printing how many bytes came back within `seconds`. */
export function udpQueryScript(host: string, packet: Buffer, seconds = 3): string {
  const esc = [...packet].map((b) => `\\x${b.toString(16).padStart(2, "0")}`).join("");
  return `exec 3<>/dev/udp/${host}/53 && printf '${esc}' >&3 && timeout ${seconds} head -c 12 <&3 | wc -c`;
}
