/**
 * @polkadot/util's logger writes to the console; the bridge (src/chain/console-bridge.ts) turns its
 * lines into pino JSON lines and leaves every other console call alone.
 */
import { logger as polkadotLogger } from "@polkadot/util";
import pino from "pino";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { maskUrls, polkadotOrigin, routePolkadotLogs } from "../../src/chain/index.js";

// What reaches the console, recorded before the bridge wraps it (it wraps the console it finds).
const METHODS = ["log", "warn", "error"] as const;
const originals = METHODS.map((m) => console[m]);
const passed: Array<{ method: string; args: unknown[] }> = [];
for (const method of METHODS) console[method] = (...args: unknown[]) => void passed.push({ method, args });
afterAll(() => {
  METHODS.forEach((m, i) => {
    console[m] = originals[i]!;
  });
});

function capture() {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: "trace" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
  return { log, lines };
}

afterEach(() => {
  routePolkadotLogs(undefined);
  passed.length = 0;
});

describe("the @polkadot console bridge", () => {
  it("recognises @polkadot/util's logger lines, and only those", () => {
    expect(polkadotOrigin(["2026-12-04 20:51:24", "          API-WS:", "disconnected"])).toBe("API-WS");
    expect(polkadotOrigin(["2026-12-04 20:51:24", "        RPC-CORE:", "x"])).toBe("RPC-CORE");
    expect(polkadotOrigin(["2026-12-04 20:51:24", "        API/INIT:", "x"])).toBe("API/INIT");
    expect(polkadotOrigin(["hello", "WORLD:"])).toBeUndefined();
    expect(polkadotOrigin(["2026-12-04 20:51:24", "not an origin"])).toBeUndefined();
    expect(polkadotOrigin(['{"level":"info"}'])).toBeUndefined();
  });

  it("routes API-WS, RPC-CORE and friends through pino as one JSON line each, URLs masked", () => {
    const { log, lines } = capture();
    routePolkadotLogs(log);
    polkadotLogger("api-ws").error(
      "disconnected from wss://user:pw@node.example:443/ws?token=s3cret: 1006:: Abnormal Closure",
    );
    polkadotLogger("rpc-core").warn("getStorage(key):: Unable to decode", { n: 1 });
    polkadotLogger("api/init").log("RPC methods not decorated");
    expect(passed).toEqual([]);
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatchObject({ level: 40, msg: "chain.polkadot", origin: "API-WS" });
    expect(lines[0]!.text).toBe(
      "disconnected from wss://node.example/ws?[redacted]: 1006:: Abnormal Closure",
    );
    expect(lines[1]).toMatchObject({
      level: 40,
      origin: "RPC-CORE",
      text: "getStorage(key):: Unable to decode { n: 1 }",
    });
    expect(lines[2]).toMatchObject({ level: 30, origin: "API/INIT" });
  });

  it("names the endpoint as written (a colon after it is the message's), masking only credentials and queries", () => {
    expect(maskUrls("disconnected from ws://127.0.0.1:9: 1006:: connect ECONNREFUSED 127.0.0.1:9")).toBe(
      "disconnected from ws://127.0.0.1:9: 1006:: connect ECONNREFUSED 127.0.0.1:9",
    );
    expect(maskUrls("to wss://entrypoint-finney.opentensor.ai:443. retrying")).toBe(
      "to wss://entrypoint-finney.opentensor.ai:443. retrying",
    );
    expect(maskUrls("at https://u:p@h:1/x?sig=1, then")).toBe("at https://h:1/x?[redacted], then");
  });

  it("an origin's lines within a minute of its warning (a lost endpoint, every 2.5 s) are debug lines", () => {
    const { log, lines } = capture();
    routePolkadotLogs(log);
    for (let k = 0; k < 4; k++)
      polkadotLogger("api-ws").error("disconnected from ws://127.0.0.1:9: 1006:: connect ECONNREFUSED");
    polkadotLogger("api-ws").error("disconnected from ws://127.0.0.1:9: 1006:: Abnormal Closure");
    polkadotLogger("rpc-core").error("getHeader(hash?: BlockHash): Header:: WebSocket is not connected");
    polkadotLogger("rpc-core").error("getBlockHash(n): BlockHash:: WebSocket is not connected");
    expect(lines.map((l) => [l.level, l.origin])).toEqual([
      [40, "API-WS"],
      [20, "API-WS"],
      [20, "API-WS"],
      [20, "API-WS"],
      [20, "API-WS"],
      [40, "RPC-CORE"],
      [20, "RPC-CORE"],
    ]);
    expect(lines[0]!.text).toBe("disconnected from ws://127.0.0.1:9: 1006:: connect ECONNREFUSED");
  });

  it("leaves every other console call alone, and lets @polkadot through again without a sink", () => {
    const { log, lines } = capture();
    routePolkadotLogs(log);
    console.error("an ordinary line");
    console.log("2026-12-04 20:51:24", "no origin here");
    expect(passed.map((p) => p.args)).toEqual([
      ["an ordinary line"],
      ["2026-12-04 20:51:24", "no origin here"],
    ]);
    expect(lines).toHaveLength(0);
    routePolkadotLogs(undefined);
    passed.length = 0;
    polkadotLogger("api-ws").error("disconnected");
    expect(passed).toHaveLength(1);
    expect(passed[0]!.method).toBe("error");
    expect(lines).toHaveLength(0);
  });
});
