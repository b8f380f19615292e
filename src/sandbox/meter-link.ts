/**
 * The meter's path to an episode on an engine other than the daemon's own. The meter and the key
 * stay in the daemon; on the remote engine a relay container (docker/images/meter-relay) sits on the
 * episode's meter network as `meter` and carries each connection the sidecar opens to it, framed,
 * over its own stdin/stdout. The daemon attaches to that container through the engine's API — the
 * engine's TLS connection with client certificates (or SSH), one attach per episode — and hands each
 * connection to the episode's own meter listener on a loopback address of the daemon's host, which
 * answers that episode's token alone. The relay has no network but the episode's meter network, no
 * route out, and holds no credential: whoever reaches it reaches that episode's budget and nothing else.
 *
 * The daemon's own way into the meter network (its health probe of the sidecar) is the reverse:
 * a loopback listener here whose connections the relay dials on the meter network (`forward`).
 *
 * Frames (both directions): u32 stream id, u8 type, u32 payload length (big-endian), payload.
 *   OPEN (relay → daemon): a new connection; DATA: bytes; END: that side finished writing;
 *   CLOSE: the connection is gone; READY (id 0, relay → daemon): the relay listens;
 *   DIAL (daemon → relay, ids from 2^31): connect to the payload's `ip:port` and carry it;
 *   WINDOW: u32 more bytes of that connection the sender's peer may send (flow control, below).
 * The container's stdout reaches us in Docker's multiplexed form (8-byte headers: stream 1 or 2, size).
 */
import { type AddressInfo, connect, createServer, type Server, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import type Dockerode from "dockerode";
import { InfraError } from "../errors.js";
import type { Logger } from "../log.js";
import { engine } from "./docker.js";

export const FRAME = { OPEN: 1, DATA: 2, END: 3, CLOSE: 4, READY: 5, DIAL: 6, WINDOW: 7 } as const;
/** Ids of connections the daemon opens (DIAL); the relay numbers its own from 1. */
const DIAL_BASE = 0x80000000;
export const FRAME_HEADER = 9;
/** The relay never sends more per frame; anything larger is a broken stream. */
export const MAX_FRAME_PAYLOAD = 1 << 20;
/**
 * Per-connection window, the same in relay.cjs: a side sends at most this many bytes of a
 * connection that the other side's socket has not taken yet; WINDOW frames give credit back
 * (in steps of RELAY_GRANT_AT). What waits for a peer that does not read is bounded by it.
 */
export const RELAY_WINDOW = 128 * 1024;
const RELAY_GRANT_AT = RELAY_WINDOW / 4;

export interface Frame {
  id: number;
  type: number;
  payload: Buffer;
}

export function encodeFrame(id: number, type: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(FRAME_HEADER);
  head.writeUInt32BE(id, 0);
  head.writeUInt8(type, 4);
  head.writeUInt32BE(payload.length, 5);
  return payload.length ? Buffer.concat([head, payload]) : head;
}

/** Incremental frame parser (pure): push bytes, get whole frames; throws on an oversized frame. */
export class FrameDecoder {
  private buf: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): Frame[] {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    const out: Frame[] = [];
    while (this.buf.length >= FRAME_HEADER) {
      const len = this.buf.readUInt32BE(5);
      if (len > MAX_FRAME_PAYLOAD) throw new Error(`relay frame of ${len} bytes`);
      if (this.buf.length < FRAME_HEADER + len) break;
      out.push({
        id: this.buf.readUInt32BE(0),
        type: this.buf.readUInt8(4),
        payload: this.buf.subarray(FRAME_HEADER, FRAME_HEADER + len),
      });
      this.buf = this.buf.subarray(FRAME_HEADER + len);
    }
    return out;
  }
}

/** Docker's multiplexed attach stream (pure, incremental): stdout and stderr payloads in order. */
export class DockerStreamDemux {
  private buf: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): Array<{ stream: "stdout" | "stderr"; data: Buffer }> {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    const out: Array<{ stream: "stdout" | "stderr"; data: Buffer }> = [];
    while (this.buf.length >= 8) {
      const size = this.buf.readUInt32BE(4);
      if (this.buf.length < 8 + size) break;
      const kind = this.buf[0];
      const data = this.buf.subarray(8, 8 + size);
      this.buf = this.buf.subarray(8 + size);
      if (kind === 1) out.push({ stream: "stdout", data });
      else if (kind === 2) out.push({ stream: "stderr", data });
    }
    return out;
  }
}

export interface RelayLink {
  /** Resolves (with the port it listens on) once the relay listens; rejects when it ends first or `timeoutMs` passes. */
  ready: Promise<number>;
  /** Connections carried so far. */
  readonly connections: number;
  /** Stop carrying: every connection closed, the relay's stdin ended (it exits). Idempotent. */
  close(): void;
  /** The relay's last stderr lines (for an error report). */
  stderrTail(): string;
  /**
   * A loopback address of this host whose connections the relay carries to `ip:port` on the meter
   * network (the daemon's health probe of the sidecar). One listener per target, closed with the link.
   */
  forward(ip: string, port: number): Promise<{ host: string; port: number }>;
}

export interface RelayTarget {
  /** The episode's meter listener, on a loopback address of this host. */
  host: string;
  port: number;
}

/**
 * Attach to a created (not yet started) relay container and carry its connections to `target`.
 * Start the container after this returns, then await `ready`.
 */
export async function attachRelay(
  container: Dockerode.Container,
  target: RelayTarget,
  log: Logger,
  timeoutMs = 30_000,
  onLost?: () => void,
): Promise<RelayLink> {
  const stream = (await engine("relay_attach_failed", `attaching to relay ${container.id.slice(0, 12)}`, () =>
    container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true }),
  )) as unknown as Duplex;
  return linkRelay(stream, { multiplexed: true, target, log, timeoutMs, ...(onLost ? { onLost } : {}) });
}

/** One carried connection: its socket and the two sides of its window (see RELAY_WINDOW). */
interface Carried {
  sock: Socket;
  /** Bytes we may still send the relay before it gives credit back. */
  credit: number;
  /** Bytes the relay sent that the socket has not taken yet. */
  held: number;
  /** Bytes the socket took that we have not credited back yet. */
  taken: number;
}

/**
 * The connections of one link and their flow control, over `send` (a frame to the relay).
 * Each connection reads from its socket only while it has credit and the link's stream keeps up
 * (`blocked`), and gives the relay credit back as its socket takes what the relay sent. A bad
 * frame (past the window) throws: the link treats it as a broken stream.
 */
class Connections {
  private readonly map = new Map<number, Carried>();
  private blocked = false;

  constructor(private readonly send: (id: number, type: number, payload?: Buffer) => void) {}

  carry(id: number, sock: Socket): void {
    const c: Carried = { sock, credit: RELAY_WINDOW, held: 0, taken: 0 };
    this.map.set(id, c);
    sock.on("data", (d: Buffer) => {
      c.credit -= d.length;
      for (let at = 0; at < d.length; at += MAX_FRAME_PAYLOAD)
        this.send(id, FRAME.DATA, d.subarray(at, at + MAX_FRAME_PAYLOAD));
      this.flow(c);
    });
    sock.on("end", () => this.send(id, FRAME.END));
    sock.on("close", () => {
      if (this.map.get(id) === c) this.drop(id, true);
    });
    sock.on("error", () => undefined);
    this.flow(c);
  }

  /** A frame from the relay for connection `id` (DATA, WINDOW, END, CLOSE). */
  onFrame(f: Frame): void {
    const c = this.map.get(f.id);
    if (!c) return;
    if (f.type === FRAME.DATA) this.deliver(f.id, c, f.payload);
    else if (f.type === FRAME.WINDOW && f.payload.length === 4) {
      c.credit += f.payload.readUInt32BE(0);
      this.flow(c);
    } else if (f.type === FRAME.END) c.sock.end();
    else if (f.type === FRAME.CLOSE) this.drop(f.id, false);
  }

  /** The link's stream is full (or drained again): every connection waits for it (or reads again). */
  setBlocked(blocked: boolean): void {
    this.blocked = blocked;
    for (const c of this.map.values()) this.flow(c);
  }

  drop(id: number, tell: boolean): void {
    const c = this.map.get(id);
    if (!c) return;
    this.map.delete(id);
    c.sock.destroy();
    if (tell) this.send(id, FRAME.CLOSE);
  }

  dropAll(): void {
    for (const id of [...this.map.keys()]) this.drop(id, false);
  }

  private flow(c: Carried): void {
    if (c.credit > 0 && !this.blocked) c.sock.resume();
    else c.sock.pause();
  }

  private deliver(id: number, c: Carried, payload: Buffer): void {
    c.held += payload.length;
    if (c.held > RELAY_WINDOW + MAX_FRAME_PAYLOAD)
      throw new Error(`relay connection ${id} sent ${c.held} bytes past its window`);
    const n = payload.length;
    c.sock.write(payload, () => {
      c.held -= n;
      c.taken += n;
      if (c.taken >= RELAY_GRANT_AT && this.map.get(id) === c) {
        const credit = Buffer.alloc(4);
        credit.writeUInt32BE(c.taken, 0);
        this.send(id, FRAME.WINDOW, credit);
        c.taken = 0;
      }
    });
  }
}

interface LinkOptions {
  multiplexed: boolean;
  target: RelayTarget;
  log: Logger;
  timeoutMs?: number;
  /** The stream ended without close(): the episode lost its meter (the engine or its connection went). */
  onLost?: () => void;
}

/** READY within the time allowed, or a rejection (the relay did not start, or the link closed first). */
function readyGate(timeoutMs: number) {
  let markReady: (port: number) => void = () => undefined;
  let failReady: (err: Error) => void = () => undefined;
  const ready = new Promise<number>((resolve, reject) => {
    markReady = resolve;
    failReady = reject;
  });
  ready.catch(() => undefined);
  const timer = setTimeout(
    () =>
      failReady(new InfraError("relay_not_ready", `the meter relay did not start within ${timeoutMs} ms`)),
    timeoutMs,
  );
  timer.unref();
  return {
    ready,
    resolve: (port: number) => {
      clearTimeout(timer);
      markReady(port);
    },
    reject: (err: Error) => {
      clearTimeout(timer);
      failReady(err);
    },
  };
}

/**
 * The daemon's end of a relay over any byte stream: its output (Docker's multiplexed attach stream
 * when `multiplexed`, else the raw frames, e.g. a relay run as a local process) in, our frames out.
 * Each connection has its own window (RELAY_WINDOW): a sidecar that stops reading one connection
 * holds that connection alone, and neither end buffers more than the window for it.
 */
export function linkRelay(stream: Duplex, opts: LinkOptions): RelayLink {
  const { target, log } = opts;
  const gate = readyGate(opts.timeoutMs ?? 30_000);
  const demux = new DockerStreamDemux();
  const frames = new FrameDecoder();
  let stderr = "";
  let connections = 0;
  let closed = false;
  let full = false;

  const send = (id: number, type: number, payload?: Buffer) => {
    if (closed || stream.destroyed) return;
    if (stream.write(encodeFrame(id, type, payload)) || full) return;
    full = true;
    conns.setBlocked(true);
    stream.once("drain", () => {
      full = false;
      conns.setBlocked(false);
    });
  };
  const conns = new Connections(send);
  const listeners: Server[] = [];

  const onFrame = (f: Frame) => {
    if (f.type === FRAME.READY) gate.resolve(Number(f.payload.toString("utf8")) || 0);
    else if (f.type === FRAME.OPEN) {
      connections++;
      conns.carry(f.id, connect({ host: target.host, port: target.port }));
    } else conns.onFrame(f);
  };

  const close = () => {
    if (closed) return;
    closed = true;
    conns.dropAll();
    for (const l of listeners) l.close();
    stream.end();
    stream.destroy();
    gate.reject(new InfraError("relay_closed", "the meter relay closed before it was ready"));
  };

  stream.on("data", (chunk: Buffer) => {
    try {
      const parts = opts.multiplexed ? demux.push(chunk) : [{ stream: "stdout" as const, data: chunk }];
      for (const part of parts) {
        if (part.stream === "stderr") stderr = (stderr + part.data.toString("utf8")).slice(-2000);
        else for (const f of frames.push(part.data)) onFrame(f);
      }
    } catch (err) {
      log.warn({ err: (err as Error).message }, "relay.protocol_error");
      close();
    }
  });
  const ended = () => {
    if (closed) return;
    log.warn({ connections, stderr: stderr.slice(-300) }, "relay.ended");
    close();
    opts.onLost?.();
  };
  stream.on("end", ended);
  stream.on("close", ended);
  stream.on("error", ended);

  return {
    ready: gate.ready,
    get connections() {
      return connections;
    },
    close,
    stderrTail: () => stderr,
    forward: forwarder(target.host, listeners, () => closed, send, conns),
  };
}

/** `forward(ip, port)`: one loopback listener per target whose connections the relay dials (DIAL). */
function forwarder(
  host: string,
  listeners: Server[],
  isClosed: () => boolean,
  send: (id: number, type: number, payload?: Buffer) => void,
  conns: Connections,
): RelayLink["forward"] {
  const forwards = new Map<string, Promise<{ host: string; port: number }>>();
  let nextDial = DIAL_BASE;
  return (ip, port) => {
    const key = `${ip}:${port}`;
    let f = forwards.get(key);
    if (!f) {
      f = new Promise((resolve, reject) => {
        const server = createServer((sock) => {
          if (isClosed()) return sock.destroy();
          const id = nextDial++;
          send(id, FRAME.DIAL, Buffer.from(key));
          conns.carry(id, sock);
        });
        server.once("error", reject);
        server.listen(0, host, () => {
          listeners.push(server);
          resolve({ host, port: (server.address() as AddressInfo).port });
        });
      });
      forwards.set(key, f);
    }
    return f;
  };
}
