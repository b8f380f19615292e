/**
 * `trajrl-validator localnet` as an operator runs it (a child process on loopback): it registers the
 * wallet's hotkey, opens the challenge epoch `--epoch` names, serves a genesis hash of its own (never
 * finney's: a validator's rows of the rehearsal stay apart from a real network's), prints the settings
 * to point a validator at, and a validator's preflight pointed there finds its hotkey registered with
 * a permit and the epoch open. A wallet it cannot read is refused with the validator's own hint.
 * The whole loop (evaluation, verdict, weights) runs in test/integration/deploy-compose.test.ts.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GENESIS_HASHES } from "../../src/chain/index.js";
import { LOCALNET_GENESIS_HASH } from "../../src/localnet/index.js";
import { type TestWallet, writeWallet } from "../helpers/daemon.js";

const root = new URL("../..", import.meta.url).pathname;
let dir: string;
let wallet: TestWallet;
let child: ChildProcess;
let stderr = "";
let stdout = "";

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "localnet-cli-"));
  wallet = await writeWallet(dir);
  child = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      join(root, "src/cli.ts"),
      "localnet",
      "--chain-port",
      "0",
      "--platform-port",
      "0",
      "--epoch",
      "1234",
    ],
    {
      cwd: root,
      env: { PATH: process.env.PATH ?? "", HOME: "/nonexistent", WALLET_PATH: wallet.walletPath },
    },
  );
  child.stderr!.on("data", (b: Buffer) => {
    stderr += b.toString();
  });
  child.stdout!.on("data", (b: Buffer) => {
    stdout += b.toString();
  });
  const deadline = performance.now() + 60_000;
  // (The log line on stdout goes through pino's asynchronous writer: it may come after stderr.)
  while (
    !(stderr.includes("EVAL_ENABLED=1") && stdout.includes('"localnet.ready"')) &&
    performance.now() < deadline
  )
    await new Promise((r) => setTimeout(r, 100));
}, 90_000);

afterAll(async () => {
  // A child killed by a signal has exitCode null too: its signalCode says it is gone.
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    await exited;
  }
  rmSync(dir, { recursive: true, force: true });
});

describe("trajrl-validator localnet", () => {
  it("registers this wallet's hotkey, opens an epoch with the pin pack, and says what to point the validator at", async () => {
    expect(stderr).toContain(`validator ${wallet.ss58} registered at uid 3 with a validator permit`);
    expect(stderr).toMatch(/challenge epoch 1234: pack [0-9a-f]{12} \(pin\.json\), spec 27/);
    expect(LOCALNET_GENESIS_HASH).not.toBe(GENESIS_HASHES.finney);
    expect(stderr).toContain(`(genesis ${LOCALNET_GENESIS_HASH})`);
    const env =
      /NETWORK=local SUBTENSOR_ENDPOINT=(\S+) TRAJECTORYRL_API_BASE_URL=(\S+) NETUID=11 EVAL_ENABLED=1/.exec(
        stderr,
      );
    expect(env).not.toBeNull();
    const ready = JSON.parse(stdout.split("\n").find((l) => l.includes('"localnet.ready"'))!);
    expect(ready).toMatchObject({
      NETWORK: "local",
      validator: wallet.ss58,
      uid: 3,
      epoch: 1234,
      spec: 27,
      genesis: LOCALNET_GENESIS_HASH,
    });

    // A validator pointed there: its preflight finds the registration and the open epoch.
    const check = await new Promise<{ code: number; out: string }>((resolve) => {
      execFile(
        process.execPath,
        [
          "--import",
          "tsx",
          join(root, "src/cli.ts"),
          "check",
          "--only",
          "wallet,chain,platform",
          "--timeout",
          "8000",
        ],
        {
          cwd: root,
          env: {
            PATH: process.env.PATH ?? "",
            HOME: "/nonexistent",
            WALLET_PATH: wallet.walletPath,
            NETWORK: "local",
            SUBTENSOR_ENDPOINT: env![1]!,
            TRAJECTORYRL_API_BASE_URL: env![2]!,
          },
          timeout: 60_000,
        },
        (err, out) => resolve({ code: err ? (typeof err.code === "number" ? err.code : 1) : 0, out }),
      );
    });
    expect(check.code, check.out).toBe(0);
    expect(check.out).toMatch(
      /^ok {4}chain {5}.*\(local\) at block \d+, netuid 11: uid 3, validator permit$/m,
    );
    expect(check.out).toMatch(/^ok {4}platform .*challenge epoch 1234 open \(signed request accepted\)$/m);
  }, 90_000);

  it("stops on SIGTERM and says what it saw", async () => {
    const exited = new Promise<number | null>((r) => child.once("close", (code) => r(code)));
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(stdout).toMatch(/"verdicts":0,"weights":0,"msg":"localnet\.stopped"/);
  }, 30_000);

  it("a wallet it cannot read: one line with the validator's own hint (the compose deployment's names)", async () => {
    const run = (args: string[], env: Record<string, string>) =>
      new Promise<{ code: number; out: string; err: string }>((resolve) => {
        execFile(
          process.execPath,
          ["--import", "tsx", join(root, "src/cli.ts"), ...args],
          { cwd: root, env: { PATH: process.env.PATH ?? "", HOME: "/nonexistent", ...env }, timeout: 60_000 },
          (err, out, errOut) =>
            resolve({ code: err ? (typeof err.code === "number" ? err.code : 1) : 0, out, err: errOut }),
        );
      });
    // As in the container: the wallets mounted from the host's WALLETS_DIR, started by the rehearsal's compose pair.
    const env = {
      WALLET_PATH: wallet.walletPath,
      WALLET_NAME: "nobody",
      DAEMON_IN_CONTAINER: "1",
      TRAJRL_HOST_WALLETS_DIR: "/srv/btcli-wallets",
      TRAJRL_COMPOSE:
        "docker compose -f docker/docker-compose.validator.yml -f docker/docker-compose.localnet.yml",
    };
    const [localnet, check] = await Promise.all([
      run(["localnet", "--chain-port", "0", "--platform-port", "0"], env),
      run(["check", "--only", "wallet"], env),
    ]);
    expect(localnet.code).toBe(1);
    expect(localnet.err.trim().split("\n")).toHaveLength(1);
    const hint = /^ {16}→ (.*)$/m.exec(check.out)![1]!;
    expect(hint).toContain("WALLETS_DIR in docker/.env");
    expect(hint).toContain("(/srv/btcli-wallets; WALLETS_DIR in docker/.env). Wallets there: validator.");
    expect(hint).toMatch(
      /then `docker compose -f docker\/docker-compose\.validator\.yml -f docker\/docker-compose\.localnet\.yml up -d`$/,
    );
    expect(localnet.err).toBe(
      `error: hotkey file not found: ${join(wallet.walletPath, "nobody", "hotkeys", "default")} → ${hint}\n`,
    );
  }, 90_000);
});
