import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterEach, describe, expect, it } from "vitest";
import { type CliProcess, runCli, startCli } from "../helpers/cli.js";

const root = new URL("../..", import.meta.url).pathname;
const FIXTURES = join(root, "test/fixtures/sim-scenarios");

describe("trajrl-validator engy-sim (the CLI as an operator runs it)", { timeout: 120_000 }, () => {
  let sim: CliProcess | undefined;
  afterEach(() => {
    if (sim && sim.child.exitCode === null) sim.child.kill("SIGKILL");
  });

  it("prints its base URL first, serves the API, and exits 0 on SIGTERM", async () => {
    sim = startCli(
      ["engy-sim", "--port", "0", "--seed", "5", "--scenarios", FIXTURES, "--latency-scale", "0"],
      { env: { LOG_LEVEL: "info" } },
    );
    const child = sim.child;
    const first = await new Promise<string>((resolve, reject) => {
      const rl = createInterface({ input: child.stdout! });
      rl.once("line", resolve);
      child.once("exit", (code) =>
        reject(new Error(`exited ${code} before printing a URL: ${sim!.stderr()}`)),
      );
    });
    expect(first).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    const auth = { authorization: "Bearer anything" };
    const models = (await (await fetch(`${first}/models`, { headers: auth })).json()) as {
      data: { id: string }[];
    };
    expect(models.data).toHaveLength(8);
    const r = await fetch(`${first}/chat/completions`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ model: "glm-5.2", messages: [{ role: "user", content: "hello" }] }),
    });
    expect(r.status).toBe(200);
    expect(r.headers.get("x-engy-request-id")).toMatch(/^req_/);
    expect(((await r.json()) as { choices: { finish_reason: string }[] }).choices[0]!.finish_reason).toBe(
      "stop",
    );
    child.kill("SIGTERM");
    expect(await sim.exited).toBe(0);
    // Logs are JSON on stderr, never on stdout (whose first line is the URL).
    expect(sim.stderr()).toContain('"msg":"engy_sim.listening"');
    expect(sim.stderr()).not.toContain("Bearer");
  });

  it("bad flags and a missing profile file are one-line input errors", async () => {
    const bad = await runCli(["engy-sim", "--latency-scale", "-1"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr.trim().split("\n")).toHaveLength(1);
    expect(bad.stderr).toContain("--latency-scale");
    const missing = await runCli(["engy-sim", "--port", "0", "--profile", "/nonexistent/p.json"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("/nonexistent/p.json");
    expect(missing.stderr).not.toMatch(/\n\s+at /);
  });
});
