/** `trajrl-validator meter` as a miner runs it: token first, serves one episode, receipts in DATA_DIR. */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { request } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { openDb, ReceiptRepo } from "../../src/store/index.js";
import { runCli, startCli } from "../helpers/cli.js";
import { startTestUpstream, type TestUpstream } from "../helpers/meter-upstream.js";

let up: TestUpstream | undefined;
afterEach(async () => {
  await up?.close();
});

describe("trajrl-validator meter (standalone)", () => {
  it("prints the token, meters calls with the named key, writes receipts, summarises on SIGTERM", async () => {
    up = await startTestUpstream({ apiKey: "sk-miner-own" });
    const dataDir = mkdtempSync(join(tmpdir(), "meter-cli-"));
    const meter = startCli(
      [
        "meter",
        "--upstream",
        up.url,
        "--cap",
        "0.05",
        "--port",
        "0",
        "--api-key-env",
        "MINER_KEY",
        "--episode",
        "cli-ep",
      ],
      { env: { DATA_DIR: dataDir, MINER_KEY: "sk-miner-own", LOG_LEVEL: "info" } },
    );
    const child = meter.child;
    const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
    const token = (await lines.next()).value as string;
    const base = (await lines.next()).value as string;
    expect(token).toMatch(/^ep-[A-Za-z0-9_-]{32}$/);
    expect(base).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);

    const r = await request(`${base}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "glm-5.3-flash", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(r.statusCode).toBe(200);
    expect(Number(r.headers["x-trajrl-budget-remaining-usd"])).toBeLessThan(0.05);
    await r.body.dump();
    expect(up.received[0]!.authorization).toBe("Bearer sk-miner-own");

    child.kill("SIGTERM");
    const summary = JSON.parse((await lines.next()).value as string);
    expect(await meter.exited).toBe(0);
    expect(summary).toMatchObject({ episode_id: "cli-ep", cap_usd: 0.05, calls: 1 });
    expect(meter.stderr()).not.toContain("sk-miner-own");
    expect(meter.stderr()).not.toContain(token);
    const receipts = new ReceiptRepo(openDb(join(dataDir, "validator.sqlite"))).listByEpisode("cli-ep");
    expect(receipts).toHaveLength(1);
    expect(receipts[0]).toMatchObject({ model: "glm-5.3-flash", status: 200, completion_tokens: 10 });
  });

  it("a missing key variable is one line on stderr and exit 1", async () => {
    const r = await runCli(
      ["meter", "--upstream", "http://127.0.0.1:9/v1", "--cap", "0.1", "--api-key-env", "NOPE_NOT_SET"],
      { env: { NOPE_NOT_SET: "" } },
    );
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe("error: --api-key-env NOPE_NOT_SET: the variable is not set");
  });
});
