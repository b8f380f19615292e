/**
 * `trajrl-validator run` as an operator meets it: a wallet that is missing or encrypted, a chain of
 * the wrong network or an invalid setting is one JSON log line (`daemon.start_failed`, level fatal,
 * with the code and the fix) and exit 1, no stack trace, nothing but JSON lines on either stream.
 */
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeSubtensorNode, randomAccount } from "../fakes/subtensor-node.js";
import { writeWallet } from "../helpers/daemon.js";
import { badLogLines } from "../helpers/json-lines.js";

const ROOT = join(import.meta.dirname, "../..");
const TSX = join(ROOT, "node_modules/.bin/tsx");

function run(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(TSX, ["src/cli.ts", ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", ...env },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * The run's start failure: stdout and stderr are JSON lines only (each key once), one of them the
 * fatal `daemon.start_failed`; its code and message.
 */
function fatal(r: { stdout: string; stderr: string }): { code: string; err: string } {
  expect(r.stderr).toBe("");
  expect(badLogLines(r.stdout)).toEqual([]);
  const lines = r.stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const failed = lines.filter((l) => l.msg === "daemon.start_failed");
  expect(failed).toHaveLength(1);
  expect(failed[0]!.level).toBe("fatal");
  return { code: failed[0]!.code as string, err: failed[0]!.err as string };
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "daemon-cli-"));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const base = () => ({
  DATA_DIR: join(dir, "data"),
  WALLET_PATH: join(dir, "wallets"),
  WALLET_NAME: "op",
  WALLET_HOTKEY: "hk",
  // Never reached in these tests: they stop before any connection is made (or at the local node).
  TRAJECTORYRL_API_BASE_URL: "http://127.0.0.1:9",
  SUBTENSOR_ENDPOINT: "ws://127.0.0.1:9",
});

describe("trajrl-validator run: operator errors", () => {
  it("lists run in --help", async () => {
    const r = await run(["run", "--help"], base());
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("run the validator");
    expect(r.stdout).toContain("--no-status");
  });

  it("a missing hotkey file is one JSON line naming it, exit 1", async () => {
    const r = await run(["run"], base());
    expect(r.code).toBe(1);
    expect(fatal(r)).toEqual({
      code: "wallet_not_found",
      err: `hotkey file not found: ${join(dir, "wallets", "op", "hotkeys", "hk")}`,
    });
  });

  it("an encrypted hotkey file is one line that says what to do", async () => {
    await mkdir(join(dir, "wallets", "op", "hotkeys"), { recursive: true });
    await writeFile(join(dir, "wallets", "op", "hotkeys", "hk"), "$NACL0123456789abcdef");
    const r = await run(["run"], base());
    expect(r.code).toBe(1);
    expect(fatal(r).err).toMatch(/^hotkey file .* is encrypted; .*--no-use-password/);
    expect(r.stdout).not.toContain("    at ");
  });

  it("an invalid setting is one JSON line naming the value", async () => {
    const r = await run(["run"], { ...base(), DEGRADED_AFTER_S: "30s" });
    expect(r.code).toBe(1);
    expect(fatal(r)).toEqual({
      code: "invalid_config",
      err: 'invalid environment: DEGRADED_AFTER_S="30s" is not a number',
    });
  });

  it("a chain of another network is refused in one line (genesis check against NETWORK)", async () => {
    const wallet = await writeWallet(join(dir, "w2"), "op", "hk");
    const node = await FakeSubtensorNode.start({
      fixture: "finney-spec219",
      subnets: [{ netuid: 11, ownerColdkey: randomAccount(), neurons: [{ hotkey: wallet.ss58 }] }],
    });
    try {
      const r = await run(["run"], {
        ...base(),
        WALLET_PATH: wallet.walletPath,
        NETWORK: "test",
        SUBTENSOR_ENDPOINT: node.url,
      });
      expect(r.code).toBe(1);
      expect(fatal(r).err).toMatch(
        /^endpoint ws:\/\/127\.0\.0\.1:\d+\/? serves genesis 0x2f0555cc.*not test/,
      );
      // The logs said who was starting; no secret reached them.
      expect(r.stdout).toContain(`"hotkey":"${wallet.ss58}"`);
      expect(r.stdout).not.toMatch(/secretSeed|secretPhrase/);
    } finally {
      await node.stop();
    }
  });
});
