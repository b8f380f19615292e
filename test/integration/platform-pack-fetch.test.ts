import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { Agent } from "undici";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { packHashOf, pyJsonParse } from "../../src/pack/index.js";
import { fetchPack, obtainPack, PackCache, publicOnlyLookup } from "../../src/platform/index.js";

const fixtures = new URL("../fixtures/packs/", import.meta.url);
const PACK = readFileSync(new URL("ivanov-tech__trajectoryrl-packs__20260516-36B.json", fixtures));
const PACK_HASH = "1cf2caea1261c9322d7e16168404b39c58d8f145c11ab6990be47fbb02a6ddd4";
const STREAM_TOTAL = 64 * 1024 * 1024;
/** Upstream skips a non-text entry of `files` (tests/test_policy.py: `"n": 3`); we say so in the log. */
const SKIPPING = Buffer.from('{"files": {"SKILL.md": "# hi", "policy.py": "print(1)", "n": 3, "m": null}}');

interface Loopback {
  url: string;
  server: Server;
  sockets: Set<Socket>;
  hits: Map<string, number>;
  /** The Accept header of the last request. */
  accept: { last: string | undefined };
  /** Bytes the streaming route had written when its connection closed. */
  streamed: { written: number; closed: boolean };
}

/** A miner's pack host, on loopback, with the ways such hosts misbehave. */
async function packHost(other?: () => string): Promise<Loopback> {
  const hits = new Map<string, number>();
  const accept: { last: string | undefined } = { last: undefined };
  const streamed = { written: 0, closed: false };
  const sockets = new Set<Socket>();
  const redirect = (res: ServerResponse, status: number, to: string) => {
    res.writeHead(status, { location: to });
    res.end();
  };
  const server = createServer((req, res) => {
    const path = req.url ?? "/";
    hits.set(path, (hits.get(path) ?? 0) + 1);
    accept.last = req.headers.accept;
    const loop = /^\/loop\/(\d+)$/.exec(path);
    const to = /^\/to\/(.+)$/.exec(path);
    if (path === "/skipping.json") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(SKIPPING);
    } else if (path === "/pack.json") {
      res.writeHead(200, { "content-type": "application/json", "content-length": PACK.length });
      res.end(PACK);
    } else if (path === "/r1") redirect(res, 302, "/r2");
    else if (path === "/r2") redirect(res, 301, "/pack.json");
    else if (path === "/cross" && other) redirect(res, 307, `${other()}/pack.json`);
    else if (loop) redirect(res, 302, `/loop/${Number(loop[1]) + 1}`);
    else if (to) redirect(res, 302, decodeURIComponent(to[1]!));
    else if (path === "/declared-big") {
      res.writeHead(200, { "content-length": 100_000 });
      res.write(Buffer.alloc(1000, 0x20));
      // …and never finish: the client must refuse on the header alone.
    } else if (path === "/stream-big") {
      // No content-length and 64 MiB on offer, written as fast as the reader takes it (backpressure
      // respected): the client must stop reading at the cap and close the connection.
      res.writeHead(200, { "content-type": "application/json" });
      res.on("close", () => {
        streamed.closed = true;
      });
      const chunk = Buffer.alloc(16 * 1024, 0x20);
      const pump = () => {
        while (!res.destroyed && streamed.written < STREAM_TOTAL) {
          streamed.written += chunk.length;
          if (!res.write(chunk)) return void res.once("drain", pump);
        }
        if (!res.destroyed) res.end();
      };
      pump();
    } else if (path === "/exact-limit") {
      const body = Buffer.alloc(64 * 1024, 0x20);
      res.writeHead(200, { "content-length": body.length });
      res.end(body);
    } else if (path === "/slow") {
      res.writeHead(200, { "content-type": "application/json" });
      res.write("{");
      // Headers and a byte arrive in time; the rest never does.
    } else if (path === "/hang") {
      // Nothing at all.
    } else if (path === "/missing") {
      res.writeHead(404);
      res.end("not found");
    } else if (path === "/broken") {
      res.writeHead(503);
      res.end("down");
    } else if (path === "/no-location") {
      res.writeHead(302);
      res.end();
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    server,
    sockets,
    hits,
    accept,
    streamed,
  };
}

let host: Loopback;
let second: Loopback;
let dir: string;

beforeAll(async () => {
  second = await packHost();
  host = await packHost(() => second.url);
  dir = mkdtempSync(join(tmpdir(), "pack-fetch-"));
});
afterAll(async () => {
  for (const h of [host, second]) {
    for (const s of h.sockets) s.destroy();
    await new Promise<void>((r) => h.server.close(() => r()));
  }
  rmSync(dir, { recursive: true, force: true });
});

describe("fetchPack limits (against hosts of our own on loopback)", () => {
  it("returns the exact bytes of a pack, asked for as JSON (as upstream's fetcher asks)", async () => {
    const bytes = await fetchPack(`${host.url}/pack.json`);
    expect(Buffer.from(bytes).equals(PACK)).toBe(true);
    expect(host.accept.last).toBe("application/json");
  });

  // The hosts are on loopback: following their redirects needs the tests' explicit allow.
  const allow = { allowPrivateRedirects: true };

  it("follows redirects, including to another origin", async () => {
    expect(Buffer.from(await fetchPack(`${host.url}/r1`, allow)).equals(PACK)).toBe(true);
    expect(host.hits.get("/r2")).toBe(1);
    const before = second.hits.get("/pack.json") ?? 0;
    expect(Buffer.from(await fetchPack(`${host.url}/cross`, allow)).equals(PACK)).toBe(true);
    expect(second.hits.get("/pack.json")).toBe(before + 1);
  });

  it("refuses a redirect into loopback, by address or by name, before connecting to it", async () => {
    const port = new URL(second.url).port;
    const before = second.hits.get("/pack.json") ?? 0;
    const r2 = host.hits.get("/r2") ?? 0;
    for (const target of [
      "/r2", // relative: the same loopback host
      `${second.url}/pack.json`,
      `http://localhost:${port}/pack.json`, // a name that resolves to loopback
      `http://127.0.0.2:${port}/pack.json`,
      `http://[::1]:${port}/pack.json`,
      `http://[::ffff:127.0.0.1]:${port}/pack.json`,
      `http://[::ffff:7f00:1]:${port}/pack.json`,
      `http://0x7f000001:${port}/pack.json`, // WHATWG URL spells it 127.0.0.1
    ]) {
      await expect(fetchPack(`${host.url}/to/${encodeURIComponent(target)}`), target).rejects.toMatchObject({
        code: "pack_fetch_forbidden_redirect",
        failureClass: "input",
        retryable: false,
      });
    }
    expect(second.hits.get("/pack.json") ?? 0).toBe(before);
    expect(host.hits.get("/r2") ?? 0).toBe(r2);
  });

  it("the socket's own lookup refuses too, so a name cannot change its answer between check and connect", async () => {
    // Only the guarded agent stands between this request and loopback (no name check before it).
    const port = new URL(second.url).port;
    const before = second.hits.get("/pack.json") ?? 0;
    const guarded = new Agent({ connect: { lookup: publicOnlyLookup } });
    try {
      await expect(
        fetchPack(`http://localhost:${port}/pack.json`, { dispatcher: guarded }),
      ).rejects.toMatchObject({ code: "pack_fetch_forbidden_redirect" });
    } finally {
      await guarded.close();
    }
    expect(second.hits.get("/pack.json") ?? 0).toBe(before);
  });

  it("a refused redirect is a fetch error like any other: the pack is not obtained", async () => {
    await expect(obtainPack(`${host.url}/r1`, PACK_HASH)).rejects.toMatchObject({
      code: "pack_fetch_forbidden_redirect",
    });
  });

  it("stops after maxRedirects hops with pack_fetch_too_many_redirects", async () => {
    await expect(fetchPack(`${host.url}/loop/0`, { maxRedirects: 3, ...allow })).rejects.toMatchObject({
      code: "pack_fetch_too_many_redirects",
      failureClass: "input",
    });
    expect(host.hits.get("/loop/3")).toBe(1);
    expect(host.hits.get("/loop/4")).toBeUndefined();
  });

  it("accepts exactly 64 KiB; refuses a larger declared length without reading it", async () => {
    expect((await fetchPack(`${host.url}/exact-limit`)).byteLength).toBe(64 * 1024);
    const t0 = performance.now();
    await expect(fetchPack(`${host.url}/declared-big`, { timeoutMs: 30_000 })).rejects.toMatchObject({
      code: "pack_too_large",
      failureClass: "input",
    });
    expect(performance.now() - t0).toBeLessThan(15_000);
  });

  it("stops reading an undeclared body at the cap (it does not download the rest)", async () => {
    await expect(fetchPack(`${host.url}/stream-big`)).rejects.toMatchObject({ code: "pack_too_large" });
    // The server learns of the closed socket on its own time.
    await vi.waitFor(() => expect(host.streamed.closed).toBe(true), { timeout: 5_000, interval: 20 });
    // What was written is bounded by the socket buffers, far from the whole body.
    expect(host.streamed.written).toBeLessThan(STREAM_TOTAL / 4);
  });

  it("times out on a host that stalls mid-body or never answers", async () => {
    for (const path of ["/slow", "/hang"]) {
      const t0 = performance.now();
      await expect(fetchPack(`${host.url}${path}`, { timeoutMs: 300 })).rejects.toMatchObject({
        code: "pack_fetch_timeout",
        failureClass: "infra",
      });
      expect(performance.now() - t0).toBeLessThan(10_000);
    }
  });

  it("non-200 answers and bad URLs", async () => {
    await expect(fetchPack(`${host.url}/missing`)).rejects.toMatchObject({
      code: "pack_fetch_failed",
      retryable: false,
    });
    await expect(fetchPack(`${host.url}/broken`)).rejects.toMatchObject({
      code: "pack_fetch_failed",
      retryable: true,
    });
    await expect(fetchPack(`${host.url}/no-location`)).rejects.toMatchObject({ code: "pack_fetch_failed" });
    await expect(fetchPack("file:///etc/passwd")).rejects.toMatchObject({ code: "pack_url_invalid" });
    await expect(fetchPack("not a url")).rejects.toMatchObject({ code: "pack_url_invalid" });
  });

  it("the caller's abort is 'aborted', not a timeout", async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    await expect(fetchPack(`${host.url}/hang`, { signal: ac.signal })).rejects.toMatchObject({
      code: "aborted",
    });
  });
});

describe("obtainPack with the cache under DATA_DIR/packs", () => {
  it("fetches and verifies once, then serves from the cache", async () => {
    const cache = PackCache.forDataDir(dir);
    expect(cache.dir).toBe(join(dir, "packs"));
    const before = host.hits.get("/pack.json") ?? 0;
    const first = await obtainPack(`${host.url}/pack.json`, PACK_HASH, { cache });
    expect(first.fromCache).toBe(false);
    expect(first.result.ok && first.result.pack.hash).toBe(PACK_HASH);
    expect(readFileSync(cache.pathOf(PACK_HASH)).equals(PACK)).toBe(true);
    const second = await obtainPack(`${host.url}/pack.json`, PACK_HASH.toUpperCase(), { cache });
    expect(second.fromCache).toBe(true);
    expect(second.result.ok).toBe(true);
    expect(host.hits.get("/pack.json")).toBe(before + 1);
  });

  it("a pack that fails verification is returned as a rejection and never cached", async () => {
    const cache = new PackCache(join(dir, "other"));
    const wrong = "0".repeat(64);
    const r = await obtainPack(`${host.url}/pack.json`, wrong, { cache });
    expect(r.result.ok).toBe(false);
    expect(!r.result.ok && r.result.rejection.code).toBe("pack_verify_failed");
    expect(await cache.get(wrong)).toBeUndefined();
  });

  it("a cache file damaged on disk is discarded and the pack fetched again", async () => {
    const cache = new PackCache(join(dir, "damaged"));
    await cache.put(PACK_HASH, PACK);
    writeFileSync(cache.pathOf(PACK_HASH), '{"schema_version": 1, "files": {"SKILL.md": "tampered"}}');
    const before = host.hits.get("/pack.json") ?? 0;
    const r = await obtainPack(`${host.url}/pack.json`, PACK_HASH, { cache });
    expect(r.fromCache).toBe(false);
    expect(r.result.ok).toBe(true);
    expect(host.hits.get("/pack.json")).toBe(before + 1);
    expect(readFileSync(cache.pathOf(PACK_HASH)).equals(PACK)).toBe(true);
  });

  it("says in the log which entries of files it skipped as upstream does", async () => {
    const lines: string[] = [];
    const log = pino({ level: "info" }, { write: (l: string) => void lines.push(l) });
    const hash = packHashOf(pyJsonParse(SKIPPING.toString()));
    const r = await obtainPack(`${host.url}/skipping.json`, hash, { log });
    expect(r.result.ok && Object.keys(r.result.pack.policyFiles)).toEqual(["policy.py"]);
    const line = lines.map((l) => JSON.parse(l)).find((l) => l.msg === "pack.files_skipped");
    expect(line?.skipped).toEqual([
      { name: "n", type: "int" },
      { name: "m", type: "NoneType" },
    ]);
    expect(line?.pack).toBe(hash.slice(0, 12));
  });

  it("never logs the pack URL, fetched or failed (it is secret until the epoch reveals it)", async () => {
    const lines: string[] = [];
    const log = pino({ level: "debug" }, { write: (l: string) => void lines.push(l) });
    await obtainPack(`${host.url}/pack.json`, PACK_HASH, { log });
    await expect(obtainPack(`${host.url}/missing?token=abc`, PACK_HASH, { log })).rejects.toMatchObject({
      code: "pack_fetch_failed",
    });
    expect(lines.some((l) => l.includes("pack.fetched"))).toBe(true);
    expect(lines.some((l) => l.includes("pack.fetch_failed"))).toBe(true);
    const port = new URL(host.url).port;
    for (const l of lines) expect(l).not.toMatch(new RegExp(`${port}|/pack\\.json|/missing|token=abc`));
  });

  it("cache paths are only ever <64 hex>.json", () => {
    const cache = new PackCache(dir);
    expect(() => cache.pathOf("../../etc/passwd")).toThrow(/64 hex/);
  });
});
