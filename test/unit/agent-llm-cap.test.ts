/**
 * A policy that answers with gigabytes (one huge JSON body, or an SSE stream that never ends) costs
 * the agent at most MAX_ANSWER_BYTES: it stops reading, ends the session with
 * llm_response_too_large (not retried), and does not hold the bytes.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChatClient, MAX_ANSWER_BYTES } from "../../agent/src/llm.js";

let server: Server;
let base = "";
let mode: "json" | "sse" = "json";
let served = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    const chunk = Buffer.alloc(256 * 1024, 0x61);
    res.writeHead(200, { "content-type": mode === "json" ? "application/json" : "text/event-stream" });
    if (mode === "json") res.write('{"choices":[{"message":{"role":"assistant","content":"');
    const pump = () => {
      while (!res.destroyed) {
        served += chunk.length;
        const line =
          mode === "json"
            ? chunk
            : Buffer.from(`data: {"choices":[{"index":0,"delta":{"content":"${chunk.toString()}"}}]}\n\n`);
        if (!res.write(line)) return;
      }
    };
    res.on("drain", pump);
    pump();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const client = () =>
  new ChatClient({
    baseUrl: base,
    model: "auto",
    apiKey: undefined,
    timeoutMs: 60_000,
    retries: 3,
    retryBaseMs: 1,
    userAgent: "test",
  });

describe("agent: answers are bounded", () => {
  it.each(["json", "sse"] as const)(
    "an endless %s answer ends the session as llm_response_too_large, unretried",
    async (m) => {
      mode = m;
      served = 0;
      const out = await client().complete(
        [{ role: "user", content: "hi" }],
        [],
        1,
        new AbortController().signal,
      );
      expect(out).toMatchObject({
        kind: "fatal",
        reason: "llm_error",
        code: "llm_response_too_large",
        retries: 0,
      });
      // It stopped reading near the cap: the server could not push much past it (socket buffers).
      expect(served).toBeLessThan(MAX_ANSWER_BYTES * 3);
    },
  );
});
