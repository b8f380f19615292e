/**
 * `trajrl-validator check` as an operator runs it (a child process), against the subtensor test
 * node, the fake platform, a model provider stub and the real Docker engine, all on loopback:
 * each check says ok / warn / FAIL with the fix, and the exit code is 1 only when one FAILed.
 */
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IDENTITY, USER_AGENT } from "../../src/version.js";
import { FakePlatform } from "../fakes/platform.js";
import { runCli } from "../helpers/cli.js";
import { startSubnet, type TestSubnet, type TestWallet, testEnv, writeWallet } from "../helpers/daemon.js";
import { requireDocker } from "../helpers/docker.js";

const check = (env: Record<string, string>, ...args: string[]) =>
  runCli(["check", "--timeout", "8000", ...args], { base: "clean", env, timeoutMs: 90_000 });

const line = (out: string, name: string) =>
  out.split("\n").find((l) => l.slice(6).startsWith(`${name} `)) ?? "";

let dir: string;
let wallet: TestWallet;
let subnet: TestSubnet;
let fake: FakePlatform;
let llm: Server;
let llmUrl: string;
let env: Record<string, string>;

beforeAll(async () => {
  await requireDocker();
  dir = mkdtempSync(join(tmpdir(), "check-cli-"));
  wallet = await writeWallet(dir);
  subnet = await startSubnet(wallet.ss58);
  fake = await FakePlatform.start({ validators: [wallet.ss58] });
  // A provider that knows one key.
  llm = createServer((req, res) => {
    const ok = req.url === "/v1/models" && req.headers.authorization === "Bearer good-key";
    res.writeHead(ok ? 200 : 401, { "content-type": "application/json" });
    res.end(ok ? '{"data":[]}' : '{"error":"bad key"}');
  });
  await new Promise<void>((r) => llm.listen(0, "127.0.0.1", r));
  llmUrl = `http://127.0.0.1:${(llm.address() as { port: number }).port}/v1`;
  env = {
    ...testEnv({ dataDir: join(dir, "data"), wallet, platformUrl: fake.url, chainUrl: subnet.node.url }),
    OFFLINE_LLM_BASE_URL: llmUrl,
    LLM_API_KEY: "good-key",
    EVAL_ENABLED: "1",
  };
}, 60_000);

afterAll(async () => {
  await fake?.close();
  await subnet?.node.stop();
  await new Promise((r) => llm?.close(r));
  rmSync(dir, { recursive: true, force: true });
});

describe("trajrl-validator check", () => {
  it("passes on a working set-up: wallet, registration with a permit, signed platform call, key, Docker, disk", async () => {
    const r = await check(env, "--only", "wallet,chain,platform,llm,docker,disk");
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(line(r.stdout, "wallet")).toBe(`ok    wallet    validator/default: ${wallet.ss58}`);
    expect(line(r.stdout, "chain")).toMatch(
      /^ok {4}chain {5}.* \(finney\) at block \d+, netuid 11: uid 3, validator permit$/,
    );
    expect(line(r.stdout, "platform")).toMatch(
      /^ok {4}platform {2}http:\/\/127\.0\.0\.1:\d+: no winner seated; no challenge epoch open \(signed request accepted\)$/,
    );
    expect(line(r.stdout, "llm")).toBe(`ok    llm       ${llmUrl}: the key is accepted`);
    // This host's engine is Debian's 20.10: named, with the setting that closes the hole.
    expect(line(r.stdout, "docker")).toMatch(/^(ok|warn) +docker +engine \S+ \(API/);
    expect(line(r.stdout, "disk")).toMatch(/^(ok|warn) +disk +\d+\.\d GiB free under /);
    expect(r.stdout.trim().split("\n").at(-1)).toMatch(/^all checks passed/);
    // The first line names this build and the upstream release it votes as; its platform calls say so too.
    expect(r.stdout.split("\n")[0]).toBe(IDENTITY);
    expect(fake.received.map((q) => q.userAgent)).toContain(USER_AGENT);
  }, 120_000);

  it("in weight-only mode (EVAL_ENABLED off) the model key, Docker and the firewall are not needed", async () => {
    const r = await check(
      { ...env, EVAL_ENABLED: "", LLM_API_KEY: "wrong" },
      "--only",
      "llm,docker,firewall",
    );
    expect(r.code, r.stdout).toBe(0);
    for (const name of ["llm", "docker", "firewall"])
      expect(line(r.stdout, name)).toMatch(/^ok +\S+ +not used: weight-only mode \(EVAL_ENABLED off\)$/);
  }, 60_000);

  it("without a provider key: a warning for a rehearsal, a failure where the daemon would refuse to evaluate", async () => {
    const finney = await check({ ...env, LLM_API_KEY: "" }, "--only", "llm");
    expect(finney.code, finney.stdout).toBe(1);
    expect(line(finney.stdout, "llm")).toMatch(
      /^FAIL +llm +LLM_API_KEY is empty: .*; the daemon refuses to evaluate on finney without the key$/,
    );
    const local = await check({ ...env, LLM_API_KEY: "", NETWORK: "local" }, "--only", "llm");
    expect(local.code, local.stdout).toBe(0);
    expect(line(local.stdout, "llm")).toMatch(
      /^warn +llm +LLM_API_KEY is empty: the built-in Engy simulator answers every model call$/,
    );
  }, 60_000);

  it("fails, naming what to change: a refused key, an unregistered hotkey, an unreachable platform", async () => {
    const other = await writeWallet(join(dir, "other"));
    const deadPlatform = "http://127.0.0.1:9"; // discard port: nothing listens on loopback there
    const r = await check(
      {
        ...env,
        LLM_API_KEY: "wrong",
        WALLET_PATH: other.walletPath,
        TRAJECTORYRL_API_BASE_URL: deadPlatform,
      },
      "--only",
      "wallet,chain,platform,llm",
      "--json",
    );
    expect(r.code).toBe(1);
    const res = JSON.parse(r.stdout) as Array<{ name: string; level: string; detail: string; fix?: string }>;
    const by = Object.fromEntries(res.map((x) => [x.name, x]));
    expect(by.wallet).toMatchObject({ level: "ok" });
    expect(by.chain).toMatchObject({ level: "fail" });
    expect(by.chain!.detail).toContain(`hotkey ${other.ss58} is not registered on netuid 11`);
    expect(by.chain!.fix).toContain("btcli subnet register --netuid 11");
    expect(by.platform).toMatchObject({ level: "fail" });
    expect(by.platform!.fix).toContain("TRAJECTORYRL_API_BASE_URL");
    expect(by.llm).toMatchObject({ level: "fail", detail: `${llmUrl}: the key is refused (HTTP 401)` });

    // An endpoint that does not answer: the fix names the setting in use (the offline override
    // here; the locked endpoint has none to change).
    const dead = await check(
      { ...env, OFFLINE_LLM_BASE_URL: `${deadPlatform}/v1` },
      "--only",
      "llm",
      "--json",
    );
    const llmDead = (JSON.parse(dead.stdout) as Array<{ name: string; level: string; fix?: string }>)[0]!;
    expect(llmDead).toMatchObject({ name: "llm", level: "fail" });
    expect(llmDead.fix).toBe("check OFFLINE_LLM_BASE_URL and this host's route to it");
  }, 120_000);

  it("a missing or unreadable hotkey: FAIL with the setting to change, outside a container and in one", async () => {
    const missing = await check({ ...env, WALLET_HOTKEY: "nope" }, "--only", "wallet");
    expect(missing.code).toBe(1);
    expect(line(missing.stdout, "wallet")).toContain("hotkey file not found:");
    expect(missing.stdout).toContain("→ no hotkey validator/hotkeys/nope under WALLET_PATH");
    expect(missing.stdout).toContain("Wallets there: validator.");

    // The compose deployment: the hint names the host's directory and docker/.env, not /wallets.
    const inContainer = await check(
      {
        ...env,
        WALLET_NAME: "cold",
        DAEMON_IN_CONTAINER: "1",
        TRAJRL_HOST_WALLETS_DIR: "/srv/btcli-wallets",
      },
      "--only",
      "wallet",
    );
    expect(inContainer.code).toBe(1);
    expect(inContainer.stdout).toContain(
      "→ no hotkey cold/hotkeys/default in the wallets directory mounted from the host (/srv/btcli-wallets; WALLETS_DIR in docker/.env). Wallets there: validator.",
    );

    // A key only its owner may read, and a process of another uid (a root-owned 0600 btcli key).
    const key = join(wallet.walletPath, "validator/hotkeys/default");
    chmodSync(key, 0o600);
    chmodSync(dir, 0o755); // mkdtemp's 0700 would hide the file itself from uid 4242
    const asOther = await asUid(4242, ["check", "--only", "wallet"], {
      ...env,
      DAEMON_IN_CONTAINER: "1",
      TRAJRL_HOST_WALLETS_DIR: "/root/.bittensor/wallets",
    });
    expect(asOther.code, asOther.stdout).toBe(1);
    expect(asOther.stdout).toContain(
      "→ the hotkey file belongs to uid 0 (mode 0600) and the validator runs as uid 4242: set VALIDATOR_UID=0 in docker/.env (the key is root's: the validator then runs as root)",
    );

    // A root-owned 0700 wallet tree (sudo btcli): the file cannot even be looked at; the hint names
    // the directory as on the host and VALIDATOR_UID.
    const tree = await writeWallet(join(dir, "root-tree"));
    chmodSync(join(dir, "root-tree"), 0o755);
    chmodSync(tree.walletPath, 0o700);
    const closed = await asUid(4242, ["check", "--only", "wallet"], {
      ...env,
      WALLET_PATH: tree.walletPath,
      DAEMON_IN_CONTAINER: "1",
      TRAJRL_HOST_WALLETS_DIR: "/root/.bittensor/wallets",
    });
    expect(closed.code, closed.stdout).toBe(1);
    expect(closed.stdout).toContain(
      "→ the wallets directory /root/.bittensor/wallets on the host belongs to uid 0 (mode 0700) and the validator runs as uid 4242, which may not enter it: set VALIDATOR_UID=0 in docker/.env (the wallet is root's, e.g. made with sudo btcli: the validator then runs as root)",
    );
    // One level down (the wallet's own directory 0700).
    chmodSync(tree.walletPath, 0o755);
    chmodSync(join(tree.walletPath, "validator"), 0o700);
    const inner = await asUid(4242, ["check", "--only", "wallet"], {
      ...env,
      WALLET_PATH: tree.walletPath,
      DAEMON_IN_CONTAINER: "1",
      TRAJRL_HOST_WALLETS_DIR: "/root/.bittensor/wallets",
    });
    expect(inner.stdout).toContain(
      "→ /root/.bittensor/wallets/validator on the host belongs to uid 0 (mode 0700) and the validator runs as uid 4242, which may not enter it: set VALIDATOR_UID=0",
    );
  }, 180_000);

  it("names the runtime episodes get on this host's engine: gVisor by default, runc a warning where a vote comes of it", async () => {
    // The set-up registered gVisor with this engine (scripts/runsc-up.sh): auto picks it.
    const auto = await check({ ...env, EPISODE_RUNTIME: "auto" }, "--only", "runtime");
    expect(auto.code, auto.stdout).toBe(0);
    expect(line(auto.stdout, "runtime")).toBe("ok    runtime   EPISODE_RUNTIME=auto: local runsc (gVisor)");
    const runc = await check({ ...env, EPISODE_RUNTIME: "runc" }, "--only", "runtime");
    expect(runc.code, runc.stdout).toBe(0);
    expect(line(runc.stdout, "runtime")).toBe(
      "warn  runtime   EPISODE_RUNTIME=runc: local runc (the host's kernel); miners' and models' code shares the host's kernel on local (finney)",
    );
    expect(runc.stdout).toContain("→ register gVisor on each engine");
    const rehearsal = await check({ ...env, EPISODE_RUNTIME: "runc", NETWORK: "local" }, "--only", "runtime");
    expect(line(rehearsal.stdout, "runtime")).toMatch(/^ok +runtime +EPISODE_RUNTIME=runc: local runc/);
  }, 120_000);

  it("settings: a name that looks like a setting, or EVAL_ENABLED outside its words, is a warning with the fix; a bad value names itself", async () => {
    const r = await check({ ...env, EVAL_ENABLE: "1", EVAL_ENABLED: "ture" }, "--only", "config");
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(line(r.stdout, "config")).toMatch(
      /^warn {2}config {4}EVAL_ENABLED="ture" is not one of .*: read as off, weight-only \(upstream's rule\); EVAL_ENABLE is not a setting of this validator and is ignored: did you mean EVAL_ENABLED\?$/,
    );
    const ok = await check(env, "--only", "config");
    expect(line(ok.stdout, "config")).toBe("ok    config    every setting read");
    const bad = await check({ ...env, DEGRADED_AFTER_S: "30s" }, "--only", "config");
    expect(bad.code).toBe(1);
    expect(bad.stderr.trim()).toBe('error: invalid environment: DEGRADED_AFTER_S="30s" is not a number');
  }, 120_000);
});

/** The CLI as another uid (setpriv), as the image's entrypoint runs it. */
function asUid(uid: number, args: string[], env: Record<string, string>) {
  return runCli(args, {
    base: "clean",
    env,
    timeoutMs: 60_000,
    under: ["setpriv", `--reuid=${uid}`, `--regid=${uid}`, "--clear-groups"],
  });
}
