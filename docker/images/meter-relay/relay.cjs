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
const WINDOW = 7;
const HEADER = 9;
const MAX_PAYLOAD = 1 << 20;
const MAX_CONNECTIONS = 256;
/**
 * Per-connection flow control (both ends alike): a side sends at most WINDOW_BYTES of a connection
 * that the other side has not yet handed to its socket; the receiver gives credit back (WINDOW
 * frames) as its socket takes the bytes. A peer that stops reading holds its own connection only,
 * and what waits for it here is bounded: WINDOW_BYTES and one read per connection.
 */
const WINDOW_BYTES = 128 * 1024;
const GRANT_AT = WINDOW_BYTES / 4;
const MAX_HELD = WINDOW_BYTES + MAX_PAYLOAD;

if (process.argv.includes("--check")) {
  process.stdout.write("relay ok\n");
  process.exit(0);
}

const host = process.env.RELAY_HOST || "0.0.0.0";
const port = Number(process.env.RELAY_PORT || 8790);
/** id → { sock, credit (bytes we may still send), held (bytes received, not yet taken by sock), taken (not yet granted back) } */
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

function u32(n) {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n, 0);
  return b;
}

/** A connection reads while it has credit and the daemon keeps up with our stdout. */
function flow(c) {
  if (c.credit > 0 && !paused) c.sock.resume();
  else c.sock.pause();
}

function send(buf) {
  if (process.stdout.write(buf) || paused) return;
  // The daemon reads slower than the sockets deliver: hold every connection until it catches up.
  paused = true;
  for (const c of conns.values()) flow(c);
  process.stdout.once("drain", () => {
    paused = false;
    for (const c of conns.values()) flow(c);
  });
}

function carry(id, sock) {
  const c = { sock, credit: WINDOW_BYTES, held: 0, taken: 0 };
  conns.set(id, c);
  sock.on("data", (d) => {
    c.credit -= d.length;
    for (let at = 0; at < d.length; at += MAX_PAYLOAD)
      send(frame(id, DATA, d.subarray(at, at + MAX_PAYLOAD)));
    flow(c);
  });
  sock.on("end", () => send(frame(id, END)));
  sock.on("close", () => {
    if (conns.get(id) === c) {
      conns.delete(id);
      send(frame(id, CLOSE));
    }
  });
  sock.on("error", () => undefined);
  flow(c);
}

/** Bytes for a connection from the daemon: written, and credited back once the socket took them. */
function deliver(id, c, body) {
  c.held += body.length;
  if (c.held > MAX_HELD) {
    process.stderr.write("relay: the daemon sent past its window\n");
    process.exit(2);
  }
  const n = body.length;
  c.sock.write(body, () => {
    c.held -= n;
    c.taken += n;
    if (c.taken >= GRANT_AT && conns.get(id) === c) {
      send(frame(id, WINDOW, u32(c.taken)));
      c.taken = 0;
    }
  });
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
    const c = conns.get(id);
    if (!c) continue;
    if (type === DATA) deliver(id, c, body);
    else if (type === WINDOW && body.length === 4) {
      c.credit += body.readUInt32BE(0);
      flow(c);
    } else if (type === END) c.sock.end();
    else if (type === CLOSE) {
      conns.delete(id);
      c.sock.destroy();
    }
  }
});
process.stdin.on("end", () => process.exit(0));
process.stdin.on("error", () => process.exit(0));
