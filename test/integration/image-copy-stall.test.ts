/**
 * An image copy between engines never waits forever: the real local engine saves an image into an
 * "engine" on loopback (a server of ours speaking the API's load route) that stops answering, once
 * after reading the whole stream and once without reading it. Either way the copy fails as
 * `image_copy_failed` after the stall limit, and the connection to the silent engine is closed.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InfraError } from "../../src/errors.js";
import { copyImages } from "../../src/sandbox/image-copy.js";
import { requireDocker } from "../helpers/docker.js";

const IMAGE = "debian:bookworm-slim";
/**
 * The stall limit the copies get here (production: 10 min). Long enough that a loaded engine's
 * `docker save` has produced its first bytes and the load request reached the silent engine before it
 * fires (1.5 s was not, under a CI run's gVisor group: 0 bytes read, no connection to close).
 */
const STALL_MS = 5_000;

let source: Docker;
let server: Server;
let mode: "read-then-silent" | "never-read" = "read-then-silent";
let received = 0;
let closed = 0;
let held: IncomingMessage | undefined;

beforeAll(async () => {
  source = await requireDocker();
  await source.getImage(IMAGE).inspect(); // the local base every project image is built FROM
  server = createServer((req: IncomingMessage, _res: ServerResponse) => {
    req.socket.once("close", () => closed++);
    if (!req.url?.includes("/images/load")) return;
    if (mode === "never-read") {
      req.pause();
      held = req;
      return;
    }
    req.on("data", (c: Buffer) => {
      received += c.length;
    });
    // The whole tar is read; no answer ever comes.
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
});

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
});

function silentEngine(): Docker {
  const port = (server.address() as AddressInfo).port;
  return new Docker({ protocol: "http", host: "127.0.0.1", port });
}

describe("copyImages against an engine that stops answering", () => {
  for (const m of ["read-then-silent", "never-read"] as const) {
    it(`${m}: image_copy_failed after the stall limit, the connection closed`, async () => {
      mode = m;
      received = 0;
      const closedBefore = closed;
      const t0 = performance.now();
      const err = await copyImages(source, silentEngine(), [IMAGE], { stallMs: STALL_MS }).then(
        () => undefined,
        (e: unknown) => e,
      );
      const ms = performance.now() - t0;
      expect(err).toBeInstanceOf(InfraError);
      expect((err as InfraError).code).toBe("image_copy_failed");
      expect((err as Error).message).toMatch(/no progress for 5 s/);
      // It waited for the silence (not a failure of its own making right away).
      expect(ms).toBeGreaterThanOrEqual(STALL_MS);
      if (m === "read-then-silent") expect(received).toBeGreaterThan(10 * 1024 * 1024);
      else expect(received).toBe(0);
      // (A paused server socket cannot see the client's close: it reads on now, to the end the client made.)
      held?.resume();
      await expect.poll(() => closed - closedBefore, { timeout: 5_000 }).toBeGreaterThan(0);
    }, 120_000);
  }
});
