/**
 * The meter relay's protocol end to end, without Docker: docker/images/meter-relay/relay.cjs runs
 * as a local process (its stdin/stdout standing in for the attach stream), src/sandbox/meter-link.ts is
 * the daemon's end, and the "meter" and the "sidecar" are servers of our own on loopback.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, request, type Server } from "node:http";
import { connect, createServer as createTcpServer, type Socket } from "node:net";
import { join } from "node:path";
import { Duplex } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/log.js";
import { linkRelay, type RelayLink } from "../../src/sandbox/meter-link.js";

const RELAY = join(import.meta.dirname, "../../docker/images/meter-relay/relay.cjs");

let meter: Server;
let meterPort = 0;
let relay: ChildProcess;
let link: RelayLink;
let relayPort = 0;

function listen(s: Server | ReturnType<typeof createTcpServer>): Promise<number> {
  return new Promise((resolve) =>
    s.listen(0, "127.0.0.1", () => resolve((s.address() as { port: number }).port)),
  );
}

/** POST `body` to the relay; the meter answers with the sha256 of what it received and the path. */
function post(path: string, body: Buffer, port = relayPort): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        method: "POST",
        path,
        headers: { "content-length": body.length },
      },
      (res) => {
        let text = "";
        res.on("data", (d) => (text += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

beforeAll(async () => {
  meter = createServer((req, res) => {
    const h = createHash("sha256");
    let n = 0;
    req.on("data", (d: Buffer) => {
      h.update(d);
      n += d.length;
    });
    req.on("end", () => res.end(`${req.url} ${n} ${h.digest("hex")}`));
  });
  meterPort = await listen(meter);
  relay = spawn(process.execPath, [RELAY], {
    env: { RELAY_HOST: "127.0.0.1", RELAY_PORT: "0" },
    stdio: ["pipe", "pipe", "pipe"],
  });
  link = linkRelay(Duplex.from({ readable: relay.stdout!, writable: relay.stdin! }), {
    multiplexed: false,
    target: { host: "127.0.0.1", port: meterPort },
    log: silentLogger,
  });
  relayPort = await link.ready;
});

afterAll(async () => {
  link?.close();
  relay?.kill();
  meter?.close();
});

describe("meter relay", () => {
  it("carries concurrent calls, bodies intact both ways, each its own connection", async () => {
    const bodies = Array.from({ length: 12 }, (_, i) => Buffer.alloc(300_000 + i * 70_001, i + 1));
    const answers = await Promise.all(bodies.map((b, i) => post(`/v1/chat/completions?i=${i}`, b)));
    answers.forEach((a, i) => {
      expect(a.status).toBe(200);
      expect(a.text).toBe(
        `/v1/chat/completions?i=${i} ${bodies[i]!.length} ${createHash("sha256").update(bodies[i]!).digest("hex")}`,
      );
    });
    expect(link.connections).toBeGreaterThanOrEqual(12);
  });

  it("the daemon's own connection into the meter network (the sidecar's health) goes the other way", async () => {
    const sidecar = createTcpServer((c) => c.end("pong policy\n"));
    const port = await listen(sidecar);
    try {
      const at = await link.forward("127.0.0.1", port);
      expect(at.host).toBe("127.0.0.1");
      const got = await new Promise<string>((resolve, reject) => {
        const s = connect(at.port, at.host);
        let b = "";
        s.on("data", (d) => (b += d));
        s.on("close", () => resolve(b));
        s.on("error", reject);
      });
      expect(got).toBe("pong policy\n");
    } finally {
      sidecar.close();
    }
  });

  it("a connection the meter refuses is closed at once, not left hanging", async () => {
    const dead = createTcpServer();
    const port = await listen(dead);
    dead.close();
    const relay2 = spawn(process.execPath, [RELAY], {
      env: { RELAY_HOST: "127.0.0.1", RELAY_PORT: "0" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    const l2 = linkRelay(Duplex.from({ readable: relay2.stdout!, writable: relay2.stdin! }), {
      multiplexed: false,
      target: { host: "127.0.0.1", port },
      log: silentLogger,
    });
    try {
      const p = await l2.ready;
      const closed = await new Promise<string>((resolve) => {
        const s = connect(p, "127.0.0.1", () => s.write("GET / HTTP/1.0\r\n\r\n"));
        s.on("close", () => resolve("closed"));
        s.on("error", () => undefined);
      });
      expect(closed).toBe("closed");
    } finally {
      l2.close();
      relay2.kill();
    }
  });

  it("a relay that dies is reported as lost (the episode's meter is gone); a closed link is not", async () => {
    const r = spawn(process.execPath, [RELAY], {
      env: { RELAY_HOST: "127.0.0.1", RELAY_PORT: "0" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let lost = 0;
    const l = linkRelay(Duplex.from({ readable: r.stdout!, writable: r.stdin! }), {
      multiplexed: false,
      target: { host: "127.0.0.1", port: meterPort },
      log: silentLogger,
      onLost: () => lost++,
    });
    await l.ready;
    r.kill("SIGKILL");
    for (let i = 0; i < 100 && lost === 0; i++) await new Promise((res) => setTimeout(res, 20));
    expect(lost).toBe(1);
    l.close();
    expect(lost).toBe(1);

    let lost2 = 0;
    const r2 = spawn(process.execPath, [RELAY], {
      env: { RELAY_HOST: "127.0.0.1", RELAY_PORT: "0" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    const l2 = linkRelay(Duplex.from({ readable: r2.stdout!, writable: r2.stdin! }), {
      multiplexed: false,
      target: { host: "127.0.0.1", port: meterPort },
      log: silentLogger,
      onLost: () => lost2++,
    });
    await l2.ready;
    const exited = new Promise((res) => r2.on("exit", res));
    l2.close();
    await exited;
    expect(lost2).toBe(0);
  });

  it("a client that pipelines requests and never reads is held back: the relay stays small, another connection is answered", async () => {
    // issue 36 item 5: each request a few dozen bytes, each answer 16 KiB. Without backpressure
    // the relay took every answer into its own memory (512 MiB here; on a remote engine its
    // 256 MiB limit OOM-killed it and the episode was discarded as infra).
    const ANSWER = Buffer.alloc(16 * 1024, 0x61);
    const PER_CONNECTION = 8192;
    let answered = 0;
    const big = createServer((req, res) => {
      answered++;
      req.resume();
      res.end(ANSWER);
    });
    const bigPort = await listen(big);
    const r = spawn(process.execPath, [RELAY], {
      env: { RELAY_HOST: "127.0.0.1", RELAY_PORT: "0" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    const l = linkRelay(Duplex.from({ readable: r.stdout!, writable: r.stdin! }), {
      multiplexed: false,
      target: { host: "127.0.0.1", port: bigPort },
      log: silentLogger,
    });
    const kib = (field: string) =>
      Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${r.pid}/status`, "utf8"))![1]);
    const flood: Socket[] = [];
    try {
      const p = await l.ready;
      const before = kib("VmRSS");
      const request = "GET /v1/models HTTP/1.1\r\nHost: meter\r\n\r\n";
      // Four connections write their requests as fast as the kernel takes them; none ever reads.
      for (let i = 0; i < 4; i++) {
        const s = connect(p, "127.0.0.1");
        s.on("error", () => undefined);
        flood.push(s);
        s.once("connect", async () => {
          for (let sent = 0; sent < PER_CONNECTION; sent += 256)
            if (!s.write(request.repeat(256))) await new Promise((res) => s.once("drain", res));
        });
      }
      // Until the meter has answered them all, or has stopped answering (held back).
      let last = -1;
      for (let still = 0; answered < 4 * PER_CONNECTION && still < 8; ) {
        await new Promise((res) => setTimeout(res, 250));
        still = answered === last ? still + 1 : 0;
        last = answered;
      }
      // Another connection of the same relay still gets its answer.
      const honest = await post("/v1/chat/completions?honest", Buffer.from("{}"), p);
      expect(honest.status).toBe(200);
      const grewMiB = (kib("VmHWM") - before) / 1024;
      console.log(
        `relay flood: ${answered} of ${4 * PER_CONNECTION} answers produced, relay peak RSS +${grewMiB.toFixed(1)} MiB`,
      );
      expect(grewMiB).toBeLessThan(64);
      expect(answered).toBeLessThan(4 * PER_CONNECTION);
    } finally {
      for (const s of flood) s.destroy();
      l.close();
      r.kill();
      big.close();
    }
  }, 120_000);

  it("closing the link ends the relay process (its stdin closed), and its port with it", async () => {
    const r = spawn(process.execPath, [RELAY], {
      env: { RELAY_HOST: "127.0.0.1", RELAY_PORT: "0" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    const l = linkRelay(Duplex.from({ readable: r.stdout!, writable: r.stdin! }), {
      multiplexed: false,
      target: { host: "127.0.0.1", port: meterPort },
      log: silentLogger,
    });
    const p = await l.ready;
    const exited = new Promise<number | null>((resolve) => r.on("exit", (code) => resolve(code)));
    l.close();
    expect(await exited).toBe(0);
    const refused = await new Promise<string>((resolve) => {
      const s = connect(p, "127.0.0.1");
      s.on("connect", () => resolve("connected"));
      s.on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? "error"));
    });
    expect(refused).toBe("ECONNREFUSED");
  });
});
