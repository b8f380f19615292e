/**
 * `trajrl-validator run` as an operator meets it when the start is refused (issue 35 item 3): a
 * setting the subnet forbids, a wallet that is missing or encrypted, a chain of the wrong network.
 * The process does not exit (a supervisor would restart it in a loop): it holds, says why in one
 * JSON log line, serves its status page with the reason (/readyz 503, `status` prints it first), and
 * exits 0 on SIGTERM. That it starts by itself once the cause is fixed: test/integration/daemon-hold.test.ts.
 */
import type { ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { FakeSubtensorNode, randomAccount } from "../fakes/subtensor-node.js";
import { type CliResult, startCli } from "../helpers/cli.js";
import { writeWallet } from "../helpers/daemon.js";
import { badLogLines } from "../helpers/json-lines.js";
import { freePort } from "../helpers/ports.js";
import { waitFor } from "../helpers/wait.js";

const children: ChildProcess[] = [];

/** The CLI with these variables alone (and PATH, HOME). */
function cli(args: string[], env: Record<string, string>) {
  const run = startCli(args, { base: "clean", env: { HOME: process.env.HOME ?? "/tmp", ...env } });
  children.push(run.child);
  return run;
}

/** The `daemon.start_held` log line, once it is written. */
function heldLine(stdout: string): { code: string; err: string; recheckS: number } | undefined {
  const line = stdout.split("\n").find((l) => l.includes('"msg":"daemon.start_held"'));
  return line ? JSON.parse(line) : undefined;
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "daemon-cli-"));
});
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill("SIGKILL");
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const base = async () => ({
  DATA_DIR: join(dir, "data"),
  WALLET_PATH: join(dir, "wallets"),
  WALLET_NAME: "op",
  WALLET_HOTKEY: "hk",
  STATUS_HOST: "127.0.0.1",
  STATUS_PORT: String(await freePort()),
  // Never reached in these tests: they stop before any connection is made (or at the local node).
  TRAJECTORYRL_API_BASE_URL: "http://127.0.0.1:9",
  SUBTENSOR_ENDPOINT: "ws://127.0.0.1:9",
});

/**
 * Start `run`, wait for it to hold, and check what the operator sees: one log line, the process up,
 * /readyz 503 with the reason first, `status` printing it first (exit 1); then SIGTERM exits 0.
 */
async function expectHeld(
  env: Record<string, string>,
  code: string,
  reason: RegExp,
): Promise<{ done: CliResult; why: string }> {
  const run = cli(["run"], env);
  const held = await waitFor(() => heldLine(run.stdout()), {
    what: "the held start",
    ms: 90_000,
    everyMs: 200,
  });
  expect(held.code).toBe(code);
  expect(held.err).toMatch(reason);
  const url = `http://127.0.0.1:${env.STATUS_PORT}`;
  const ready = await waitFor(
    async () => {
      const r = await fetch(`${url}/readyz`).catch(() => undefined);
      return r
        ? {
            status: r.status,
            body: (await r.json()) as { state: string; reasons: { check: string; message: string }[] },
          }
        : undefined;
    },
    { what: "the held status page", ms: 90_000, everyMs: 200 },
  );
  expect(ready.status).toBe(503);
  expect(ready.body.state).toBe("unhealthy");
  expect(ready.body.reasons[0]).toMatchObject({ check: "start" });
  expect(ready.body.reasons[0]!.message).toMatch(reason);
  const status = await cli(["status", "--url", url], { ...env }).done;
  expect(status.code).toBe(1);
  const lines = status.stdout.split("\n");
  expect(lines[0]).toMatch(/ · UNHEALTHY \(start\) · ALARM start_held /);
  expect(lines[2]).toMatch(new RegExp(`^ {2}! start: the daemon holds its start \\(${code}\\): `));
  expect(lines[2]).toMatch(reason);
  // Still up: held, not exited.
  expect(run.child.exitCode).toBeNull();
  expect(
    run
      .stdout()
      .split("\n")
      .filter((l) => l.includes('"daemon.start_held"')),
  ).toHaveLength(1);
  run.child.kill("SIGTERM");
  const done = await run.done;
  expect(done.code).toBe(0);
  expect(done.stderr).toBe("");
  // Every line a log pipeline reads is JSON, each key once.
  expect(badLogLines(done.stdout)).toEqual([]);
  return { done, why: ready.body.reasons[0]!.message };
}

describe("trajrl-validator run: a refused start is held, not exited", () => {
  it("lists run in --help", async () => {
    const r = await cli(["run", "--help"], await base()).done;
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("run the validator");
    expect(r.stdout).toContain("--no-status");
  });

  it("settings that do not parse: one fatal JSON line naming the value, exit 1 (nothing to hold: the process cannot read them)", async () => {
    const r = await cli(["run"], { ...(await base()), DEGRADED_AFTER_S: "30s" }).done;
    expect(r.code).toBe(1);
    expect(r.stderr).toBe("");
    expect(badLogLines(r.stdout)).toEqual([]);
    const failed = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === "daemon.start_failed");
    expect(failed).toEqual([
      expect.objectContaining({
        level: "fatal",
        code: "invalid_config",
        err: 'invalid environment: DEGRADED_AFTER_S="30s" is not a number',
      }),
    ]);
  });

  it("EVAL_ENABLED=1 without LLM_API_KEY on finney: held with the fix named; the setting needs a restart", async () => {
    const { why } = await expectHeld(
      { ...(await base()), NETWORK: "finney", EVAL_ENABLED: "1" },
      "llm_key_missing_on_subnet",
      /EVAL_ENABLED is on for finney but LLM_API_KEY is not set/,
    );
    expect(why).toMatch(/restart the validator \(compose: `up -d` after editing \.env\.validator\)$/);
  }, 240_000);

  it("a missing hotkey file: held with its path, checked again every 30 s", async () => {
    const env = await base();
    const { done, why } = await expectHeld(
      env,
      "wallet_not_found",
      new RegExp(`hotkey file not found: ${join(dir, "wallets", "op", "hotkeys", "hk")}`),
    );
    expect(done.stdout).toMatch(/"recheckS":30/);
    expect(why).toMatch(/checked again every 30 s; it starts by itself once this is fixed$/);
  }, 240_000);

  it("an encrypted hotkey file: held with what to do", async () => {
    await mkdir(join(dir, "wallets", "op", "hotkeys"), { recursive: true });
    await writeFile(join(dir, "wallets", "op", "hotkeys", "hk"), "$NACL0123456789abcdef");
    const { done } = await expectHeld(await base(), "wallet_encrypted", /is encrypted; .*--no-use-password/);
    expect(done.stdout).not.toContain("    at ");
  }, 240_000);

  it("a chain of another network (genesis check against NETWORK): held, and no secret in the logs", async () => {
    const wallet = await writeWallet(join(dir, "w2"), "op", "hk");
    const node = await FakeSubtensorNode.start({
      fixture: "finney-spec219",
      subnets: [{ netuid: 11, ownerColdkey: randomAccount(), neurons: [{ hotkey: wallet.ss58 }] }],
    });
    try {
      const { done } = await expectHeld(
        { ...(await base()), WALLET_PATH: wallet.walletPath, NETWORK: "test", SUBTENSOR_ENDPOINT: node.url },
        "chain_genesis_mismatch",
        /endpoint ws:\/\/127\.0\.0\.1:\d+\/? serves genesis 0x2f0555cc.*not test/,
      );
      // The logs said who was starting; no secret reached them.
      expect(done.stdout).toContain(`"hotkey":"${wallet.ss58}"`);
      expect(done.stdout).not.toMatch(/secretSeed|secretPhrase/);
    } finally {
      await node.stop();
    }
  }, 240_000);
});
