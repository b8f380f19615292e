/**
 * scripts/compose-preflight.mjs, the check the README runs before `up -d` (compose v1 stops and
 * renames the running validator before it finds out the new one cannot run): each host-side fault
 * is a FAIL with its fix and exit 1, on a scratch project laid out as an operator's; it changes
 * nothing. test/integration/deploy-compose.test.ts runs it against a live deployment.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requireDocker } from "../helpers/docker.js";
import { freePort } from "../helpers/ports.js";
import { BASE_IMAGE } from "../helpers/sandbox.js";

const root = new URL("../..", import.meta.url).pathname;
const PROJECT = `pf${randomBytes(3).toString("hex")}`;
const dir = mkdtempSync(join(tmpdir(), "compose-preflight-"));
const wallets = join(dir, "wallets");
let leftover: string | undefined;
let held: Server | undefined;

function preflight(env: Record<string, string> = {}) {
  return new Promise<{ code: number; out: string }>((resolve) =>
    execFile(
      process.execPath,
      [join(root, "scripts/compose-preflight.mjs")],
      { cwd: dir, env: { PATH: process.env.PATH ?? "", HOME: dir, ...env }, timeout: 60_000 },
      (err, stdout) =>
        resolve({ code: err ? (typeof err.code === "number" ? err.code : 1) : 0, out: stdout }),
    ),
  );
}

function dockerEnv(o: Record<string, string>): void {
  const lines = Object.entries({
    COMPOSE_PROJECT_NAME: PROJECT,
    WALLETS_DIR: wallets,
    STATUS_PORT: "1",
    VALIDATOR_IMAGE: BASE_IMAGE,
    ...o,
  }).map(([k, v]) => `${k}=${v}`);
  writeFileSync(join(dir, "docker/.env"), `# the host's side\n${lines.join("\n")}\n`);
}

const line = (out: string, name: string) => {
  const lines = out.split("\n");
  const k = lines.findIndex((l) => l.slice(6).startsWith(`${name} `));
  return k < 0 ? "" : [lines[k], lines[k + 1]?.startsWith(" ") ? lines[k + 1]!.trim() : ""].join("\n");
};

beforeAll(async () => {
  await requireDocker();
  mkdirSync(join(dir, "docker"));
  writeFileSync(join(dir, "docker/docker-compose.validator.yml"), "services: {}\n");
  writeFileSync(join(dir, ".env.validator"), "WALLET_NAME=op\nWALLET_HOTKEY=hk\n");
  mkdirSync(join(wallets, "op/hotkeys"), { recursive: true });
  writeFileSync(join(wallets, "op/hotkeys/hk"), "{}");
  chmodSync(join(wallets, "op/hotkeys/hk"), 0o600);
  for (const p of ["", "op", "op/hotkeys", "op/hotkeys/hk"]) chownSync(join(wallets, p), 4242, 4242);
});

afterAll(async () => {
  const name = leftover;
  if (name) await new Promise((r) => execFile("docker", ["rm", "-f", name], () => r(undefined)));
  await new Promise((r) => (held ? held.close(r) : r(undefined)));
  rmSync(dir, { recursive: true, force: true });
});

describe("compose-preflight.mjs", () => {
  it("passes a working host side, naming the identity the key is read as", async () => {
    dockerEnv({ STATUS_PORT: String(await freePort()) });
    const r = await preflight();
    expect(r.out).toContain("ok    hotkey    op/hk, readable as uid 4242");
    expect(r.out.trim().split("\n").at(-1)).toBe("all checks passed");
    expect(r.code).toBe(0);
  });

  it("a WALLETS_DIR that does not exist, a key the validator cannot read, a port someone holds: FAIL with the fix", async () => {
    dockerEnv({ WALLETS_DIR: join(dir, "nope"), STATUS_PORT: String(await freePort()) });
    const missing = await preflight();
    expect(missing.code).toBe(1);
    expect(line(missing.out, "wallets")).toBe(
      `FAIL  wallets   WALLETS_DIR ${join(dir, "nope")} does not exist\n→ point WALLETS_DIR in docker/.env at the directory btcli writes (\`btcli wallet list\` shows it)`,
    );
    expect(missing.out).toMatch(/1 failed: fix before `up` .*; nothing was changed\n$/);

    // VALIDATOR_UID set to someone else: the 0600 key is not theirs.
    dockerEnv({ VALIDATOR_UID: "5555", STATUS_PORT: String(await freePort()) });
    const unreadable = await preflight();
    expect(line(unreadable.out, "hotkey")).toBe(
      `FAIL  hotkey    ${join(wallets, "op/hotkeys/hk")} belongs to uid 4242 (mode 0600) and the validator would run as uid 5555\n→ set VALIDATOR_UID=4242 in docker/.env`,
    );

    // The shell's variables win over docker/.env, as in compose.
    held = createServer();
    await new Promise<void>((r) => held!.listen(0, "127.0.0.1", r));
    const port = (held.address() as { port: number }).port;
    dockerEnv({});
    const taken = await preflight({ STATUS_PORT: String(port) });
    expect(taken.code).toBe(1);
    expect(line(taken.out, "port")).toBe(
      `FAIL  port      127.0.0.1:${port} is taken by another process\n→ free it, or choose another STATUS_PORT in docker/.env`,
    );
  });

  it("a validator an earlier failed `up` renamed: FAIL with the --force-recreate that puts it right", async () => {
    dockerEnv({ STATUS_PORT: String(await freePort()) });
    const name = `${randomBytes(6).toString("hex")}_${PROJECT}_validator`;
    await new Promise((r) =>
      execFile(
        "docker",
        ["create", "--name", name, "--label", "trajrl.test=compose-preflight", BASE_IMAGE, "true"],
        r,
      ),
    );
    leftover = name;
    const r = await preflight();
    expect(r.code).toBe(1);
    expect(line(r.out, "renamed")).toBe(
      `FAIL  renamed   ${name}: the validator an earlier failed \`up\` stopped and renamed\n→ once the rest passes: docker compose -f docker/docker-compose.validator.yml up -d --force-recreate (recreates ${PROJECT}_validator and removes ${name})`,
    );
  });
});
