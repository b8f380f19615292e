/**
 * `trajrl-validator localnet` as an operator runs it (a child process on loopback): it registers the
 * wallet's hotkey, opens the challenge epoch `--epoch` names, serves a genesis hash of its own (never
 * finney's: a validator's rows of the rehearsal stay apart from a real network's), prints the settings
 * to point a validator at, and a validator's preflight pointed there finds its hotkey registered with
 * a permit and the epoch open. A wallet it cannot read is refused with the validator's own hint.
 * The whole loop (evaluation, verdict, weights) runs in test/integration/deploy-compose.test.ts.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GENESIS_HASHES } from "../../src/chain/index.js";
import { LOCALNET_GENESIS_HASH } from "../../src/localnet/index.js";
import { type CliProcess, runCli, startCli } from "../helpers/cli.js";
import { type TestWallet, writeWallet } from "../helpers/daemon.js";

let dir: string;
let wallet: TestWallet;
let localnet: CliProcess;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "localnet-cli-"));
  wallet = await writeWallet(dir);
  localnet = startCli(["localnet", "--chain-port", "0", "--platform-port", "0", "--epoch", "1234"], {
    base: "clean",
    env: { WALLET_PATH: wallet.walletPath },
  });
  const deadline = performance.now() + 60_000;
  // (The log line on stdout goes through pino's asynchronous writer: it may come after stderr.)
  while (
    !(localnet.stderr().includes("EVAL_ENABLED=1") && localnet.stdout().includes('"localnet.ready"')) &&
    performance.now() < deadline
  )
    await new Promise((r) => setTimeout(r, 100));
}, 90_000);

afterAll(async () => {
  // A child killed by a signal has exitCode null too: its signalCode says it is gone.
  const child = localnet?.child;
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    await exited;
  }
  rmSync(dir, { recursive: true, force: true });
});

describe("trajrl-validator localnet", () => {
  it("registers this wallet's hotkey, opens an epoch with the pin pack, and says what to point the validator at", async () => {
    expect(localnet.stderr()).toContain(
      `validator ${wallet.ss58} registered at uid 3 with a validator permit`,
    );
    expect(localnet.stderr()).toMatch(/challenge epoch 1234: pack [0-9a-f]{12} \(pin\.json\), spec 27/);
    expect(LOCALNET_GENESIS_HASH).not.toBe(GENESIS_HASHES.finney);
    expect(localnet.stderr()).toContain(`(genesis ${LOCALNET_GENESIS_HASH})`);
    const env =
      /NETWORK=local SUBTENSOR_ENDPOINT=(\S+) TRAJECTORYRL_API_BASE_URL=(\S+) NETUID=11 EVAL_ENABLED=1/.exec(
        localnet.stderr(),
      );
    expect(env).not.toBeNull();
    const ready = JSON.parse(
      localnet
        .stdout()
        .split("\n")
        .find((l) => l.includes('"localnet.ready"'))!,
    );
    expect(ready).toMatchObject({
      NETWORK: "local",
      validator: wallet.ss58,
      uid: 3,
      epoch: 1234,
      spec: 27,
      genesis: LOCALNET_GENESIS_HASH,
    });

    // A validator pointed there: its preflight finds the registration and the open epoch.
    const ran = await runCli(["check", "--only", "wallet,chain,platform", "--timeout", "8000"], {
      base: "clean",
      env: {
        WALLET_PATH: wallet.walletPath,
        NETWORK: "local",
        SUBTENSOR_ENDPOINT: env![1]!,
        TRAJECTORYRL_API_BASE_URL: env![2]!,
      },
      timeoutMs: 60_000,
    });
    const check = { code: ran.code, out: ran.stdout };
    expect(check.code, check.out).toBe(0);
    expect(check.out).toMatch(
      /^ok {4}chain {5}.*\(local\) at block \d+, netuid 11: uid 3, validator permit$/m,
    );
    expect(check.out).toMatch(/^ok {4}platform .*challenge epoch 1234 open \(signed request accepted\)$/m);
  }, 90_000);

  it("stops on SIGTERM and says what it saw", async () => {
    // Still running (as the first test found it) until this SIGTERM.
    expect(localnet.child.exitCode).toBeNull();
    localnet.child.kill("SIGTERM");
    expect(await localnet.exited).toBe(0);
    expect(localnet.stdout()).toMatch(/"verdicts":0,"weights":0,"msg":"localnet\.stopped"/);
  }, 30_000);

  it("a wallet it cannot read: one line with the validator's own hint (the compose deployment's names)", async () => {
    const run = async (args: string[], env: Record<string, string>) => {
      const r = await runCli(args, { base: "clean", env, timeoutMs: 60_000 });
      return { code: r.code, out: r.stdout, err: r.stderr };
    };
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
