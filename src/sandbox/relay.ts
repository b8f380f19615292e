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
 *   DIAL (daemon → relay, ids from 2^31): connect to the payload's `ip:port` and carry it.
 * The container's stdout reaches us in Docker's multiplexed form (8-byte headers: stream 1 or 2, size).
 */
import { type AddressInfo, connect, createServer, type Server, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import type Dockerode from "dockerode";
import { InfraError } from "../errors.js";
import type { Logger } from "../log.js";
import { engine } from "./docker.js";

export const FRAME = { OPEN: 1, DATA: 2, END: 3, CLOSE: 4, READY: 5, DIAL: 6 } as const;
/** Ids of connections the daemon opens (DIAL); the relay numbers its own from 1. */
const DIAL_BASE = 0x80000000;
export const FRAME_HEADER = 9;
/** The relay never sends more per frame; anything larger is a broken stream. */
export const MAX_FRAME_PAYLOAD = 1 << 20;

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

/**
 * The daemon's end of a relay over any byte stream: its output (Docker's multiplexed attach stream
 * when `multiplexed`, else the raw frames, e.g. a relay run as a local process) in, our frames out.
 */
export function linkRelay(
  stream: Duplex,
  opts: {
    multiplexed: boolean;
    target: RelayTarget;
    log: Logger;
    timeoutMs?: number;
    /** The stream ended without close(): the episode lost its meter (the engine or its connection went). */
    onLost?: () => void;
  },
): RelayLink {
  const { target, log } = opts;
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const demux = new DockerStreamDemux();
  const frames = new FrameDecoder();
  const sockets = new Map<number, Socket>();
  let stderr = "";
  let connections = 0;
  let closed = false;
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

  const send = (id: number, type: number, payload?: Buffer) => {
    if (closed || stream.destroyed) return;
    stream.write(encodeFrame(id, type, payload));
  };

  const dropSocket = (id: number, tell: boolean) => {
    const s = sockets.get(id);
    if (!s) return;
    sockets.delete(id);
    s.destroy();
    if (tell) send(id, FRAME.CLOSE);
  };

  const carry = (id: number, s: Socket) => {
    sockets.set(id, s);
    s.on("data", (d: Buffer) => {
      for (let at = 0; at < d.length; at += MAX_FRAME_PAYLOAD)
        send(id, FRAME.DATA, d.subarray(at, at + MAX_FRAME_PAYLOAD));
    });
    s.on("end", () => send(id, FRAME.END));
    s.on("close", () => {
      if (sockets.get(id) === s) dropSocket(id, true);
    });
    s.on("error", () => undefined);
  };
  const listeners: Server[] = [];
  const forwards = new Map<string, Promise<{ host: string; port: number }>>();
  let nextDial = DIAL_BASE;

  const onFrame = (f: Frame) => {
    if (f.type === FRAME.READY) {
      clearTimeout(timer);
      markReady(Number(f.payload.toString("utf8")) || 0);
      return;
    }
    if (f.type === FRAME.OPEN) {
      connections++;
      carry(f.id, connect({ host: target.host, port: target.port }));
      return;
    }
    const s = sockets.get(f.id);
    if (!s) return;
    if (f.type === FRAME.DATA) {
      // A slow listener holds the whole relay stream until it drains (the budget is per episode anyway).
      if (!s.write(f.payload) && !stream.isPaused()) {
        stream.pause();
        s.once("drain", () => stream.resume());
        s.once("close", () => stream.resume());
      }
    } else if (f.type === FRAME.END) s.end();
    else if (f.type === FRAME.CLOSE) dropSocket(f.id, false);
  };

  const close = () => {
    if (closed) return;
    closed = true;
    clearTimeout(timer);
    for (const id of [...sockets.keys()]) dropSocket(id, false);
    for (const l of listeners) l.close();
    stream.end();
    stream.destroy();
    failReady(new InfraError("relay_closed", "the meter relay closed before it was ready"));
  };

  stream.on("data", (chunk: Buffer) => {
    try {
      const parts = opts.multiplexed ? demux.push(chunk) : [{ stream: "stdout" as const, data: chunk }];
      for (const part of parts) {
        if (part.stream === "stderr") {
          stderr = (stderr + part.data.toString("utf8")).slice(-2000);
          continue;
        }
        for (const f of frames.push(part.data)) onFrame(f);
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
    ready,
    get connections() {
      return connections;
    },
    close,
    stderrTail: () => stderr,
    forward(ip, port) {
      const key = `${ip}:${port}`;
      let f = forwards.get(key);
      if (!f) {
        f = new Promise((resolve, reject) => {
          const server = createServer((sock) => {
            if (closed) return sock.destroy();
            const id = nextDial++;
            send(id, FRAME.DIAL, Buffer.from(key));
            carry(id, sock);
          });
          server.once("error", reject);
          server.listen(0, target.host, () => {
            listeners.push(server);
            resolve({ host: target.host, port: (server.address() as AddressInfo).port });
          });
        });
        forwards.set(key, f);
      }
      return f;
    },
  };
}
