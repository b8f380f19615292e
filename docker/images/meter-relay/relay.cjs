"use strict";
/**
 * The meter relay, inside an episode's meter network on an engine other than the daemon's own.
 * Listens on RELAY_PORT (8790, the sidecar's meter:8790) and carries every accepted connection to
 * the daemon as frames on stdout; the daemon's frames arrive on stdin (src/sandbox/relay.ts is the
 * other end and documents the frame format). The daemon's own connections into the meter network
 * (its health probe of the sidecar) arrive as DIAL frames. stdin closing (the daemon detached) ends
 * the relay.
 * Plain Node (Debian's nodejs 18), no dependencies.
 */
const net = require("node:net");

const OPEN = 1;
const DATA = 2;
const END = 3;
const CLOSE = 4;
const READY = 5;
const DIAL = 6;
const HEADER = 9;
const MAX_PAYLOAD = 1 << 20;
const MAX_CONNECTIONS = 256;

if (process.argv.includes("--check")) {
  process.stdout.write("relay ok\n");
  process.exit(0);
}

const host = process.env.RELAY_HOST || "0.0.0.0";
const port = Number(process.env.RELAY_PORT || 8790);
const conns = new Map();
let nextId = 1;
let paused = false;

function frame(id, type, payload) {
  const body = payload || Buffer.alloc(0);
  const head = Buffer.alloc(HEADER);
  head.writeUInt32BE(id, 0);
  head.writeUInt8(type, 4);
  head.writeUInt32BE(body.length, 5);
  return body.length ? Buffer.concat([head, body]) : head;
}

function send(buf) {
  if (process.stdout.write(buf) || paused) return;
  // The daemon reads slower than the sockets deliver: hold every connection until it catches up.
  paused = true;
  for (const s of conns.values()) s.pause();
  process.stdout.once("drain", () => {
    paused = false;
    for (const s of conns.values()) s.resume();
  });
}

function carry(id, sock) {
  conns.set(id, sock);
  if (paused) sock.pause();
  sock.on("data", (d) => {
    for (let at = 0; at < d.length; at += MAX_PAYLOAD)
      send(frame(id, DATA, d.subarray(at, at + MAX_PAYLOAD)));
  });
  sock.on("end", () => send(frame(id, END)));
  sock.on("close", () => {
    if (conns.delete(id)) send(frame(id, CLOSE));
  });
  sock.on("error", () => undefined);
}

const server = net.createServer((sock) => {
  if (conns.size >= MAX_CONNECTIONS) {
    sock.destroy();
    return;
  }
  const id = nextId++;
  send(frame(id, OPEN));
  carry(id, sock);
});
server.on("error", (err) => {
  process.stderr.write(`relay: ${err.message}\n`);
  process.exit(1);
});
// READY carries the port (RELAY_PORT=0 picks one: the relay's tests run it as a local process).
server.listen(port, host, () => send(frame(0, READY, Buffer.from(String(server.address().port)))));

let pending = Buffer.alloc(0);
process.stdin.on("data", (chunk) => {
  pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
  while (pending.length >= HEADER) {
    const len = pending.readUInt32BE(5);
    if (len > MAX_PAYLOAD) {
      process.stderr.write("relay: frame too large\n");
      process.exit(2);
    }
    if (pending.length < HEADER + len) break;
    const id = pending.readUInt32BE(0);
    const type = pending.readUInt8(4);
    const body = pending.subarray(HEADER, HEADER + len);
    pending = pending.subarray(HEADER + len);
    if (type === DIAL) {
      const at = body.toString("utf8");
      const colon = at.lastIndexOf(":");
      if (conns.has(id) || colon < 0 || conns.size >= MAX_CONNECTIONS) {
        send(frame(id, CLOSE));
        continue;
      }
      carry(id, net.connect({ host: at.slice(0, colon), port: Number(at.slice(colon + 1)) }));
      continue;
    }
    const s = conns.get(id);
    if (!s) continue;
    if (type === DATA) s.write(body);
    else if (type === END) s.end();
    else if (type === CLOSE) {
      conns.delete(id);
      s.destroy();
    }
  }
});
process.stdin.on("end", () => process.exit(0));
process.stdin.on("error", () => process.exit(0));
