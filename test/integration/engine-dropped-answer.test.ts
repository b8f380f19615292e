/**
 * An engine that dies in the middle of an answer never holds a caller: a server of ours on loopback
 * answers as the engine does (a `wait`'s headers at once, its body when the container exits) and
 * then drops the connection. docker-modem alone never settles such a request, not even when its
 * abort signal fires (the first case shows it); through `boundEngineCalls` the caller hears when
 * its signal fires (a `wait`) or at the call's deadline (a plain call).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InfraError, isAbortError } from "../../src/errors.js";
import { boundEngineCalls, waitExit } from "../../src/sandbox/index.js";

let server: Server;
const url = () => ({
  protocol: "http" as const,
  host: "127.0.0.1",
  port: (server.address() as AddressInfo).port,
});

beforeAll(async () => {
  // Every answer begins (status and headers), then the connection is dropped before its body.
  server = createServer((req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.flushHeaders();
    setTimeout(() => req.socket.destroy(), 100);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

/** How a promise ends within `ms`: its value, its error, or "pending". */
async function within(
  p: Promise<unknown>,
  ms: number,
): Promise<{ ok: unknown } | { err: unknown } | "pending"> {
  return Promise.race([
    p.then(
      (ok) => ({ ok }),
      (err: unknown) => ({ err }),
    ),
    new Promise<"pending">((r) => setTimeout(() => r("pending"), ms)),
  ]);
}

describe("an answer cut off after its headers", () => {
  it("docker-modem alone: a wait stays pending after its signal fired (why the bound exists)", async () => {
    const raw = new Docker(url());
    const signal = AbortSignal.timeout(300);
    const r = await within(
      raw.getContainer("c").wait({ condition: "not-running", abortSignal: signal }),
      1_500,
    );
    expect(signal.aborted).toBe(true);
    expect(r).toBe("pending");
  });

  it("a wait through boundEngineCalls fails when its signal fires", async () => {
    const docker = boundEngineCalls(new Docker(url()));
    const t0 = performance.now();
    const r = await within(waitExit(docker.getContainer("c"), AbortSignal.timeout(300)), 5_000);
    expect(r).not.toBe("pending");
    expect(isAbortError((r as { err: unknown }).err)).toBe(true);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(290);
  });

  it("a plain call through boundEngineCalls fails at its deadline as docker_timeout", async () => {
    const docker = boundEngineCalls(new Docker(url()), { callMs: 300 });
    const r = await within(docker.getContainer("c").inspect(), 5_000);
    expect(r).not.toBe("pending");
    const err = (r as { err: unknown }).err;
    expect(err).toBeInstanceOf(InfraError);
    expect(err).toMatchObject({ code: "docker_timeout" });
    expect((err as Error).message).toMatch(
      /GET \/containers\/c\/json: the engine did not answer within 300 ms/,
    );
  });
});
