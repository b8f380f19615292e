import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterEach, describe, expect, it } from "vitest";

const root = new URL("../..", import.meta.url).pathname;
const FIXTURES = join(root, "test/fixtures/sim-scenarios");
const cliArgs = (...args: string[]) => ["--import", "tsx", join(root, "src/cli.ts"), ...args];

describe("trajrl-validator engy-sim (the CLI as an operator runs it)", { timeout: 120_000 }, () => {
  let child: ChildProcess | undefined;
  afterEach(() => {
    if (child && child.exitCode === null) child.kill("SIGKILL");
  });

  it("prints its base URL first, serves the API, and exits 0 on SIGTERM", async () => {
    child = spawn(
      process.execPath,
      cliArgs("engy-sim", "--port", "0", "--seed", "5", "--scenarios", FIXTURES, "--latency-scale", "0"),
      { cwd: root, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, LOG_LEVEL: "info" } },
    );
    let stderr = "";
    child.stderr!.on("data", (c) => {
      stderr += c;
    });
    const first = await new Promise<string>((resolve, reject) => {
      const rl = createInterface({ input: child!.stdout! });
      rl.once("line", resolve);
      child!.once("exit", (code) => reject(new Error(`exited ${code} before printing a URL: ${stderr}`)));
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
    const code = await new Promise<number | null>((resolve) => {
      child!.once("exit", (c) => resolve(c));
      child!.kill("SIGTERM");
    });
    expect(code).toBe(0);
    // Logs are JSON on stderr, never on stdout (whose first line is the URL).
    expect(stderr).toContain('"msg":"engy_sim.listening"');
    expect(stderr).not.toContain("Bearer");
  });

  it("bad flags and a missing profile file are one-line input errors", () => {
    const bad = spawnSync(process.execPath, cliArgs("engy-sim", "--latency-scale", "-1"), {
      cwd: root,
      encoding: "utf8",
    });
    expect(bad.status).toBe(1);
    expect(bad.stderr.trim().split("\n")).toHaveLength(1);
    expect(bad.stderr).toContain("--latency-scale");
    const missing = spawnSync(
      process.execPath,
      cliArgs("engy-sim", "--port", "0", "--profile", "/nonexistent/p.json"),
      {
        cwd: root,
        encoding: "utf8",
      },
    );
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain("/nonexistent/p.json");
    expect(missing.stderr).not.toMatch(/\n\s+at /);
  });
});
