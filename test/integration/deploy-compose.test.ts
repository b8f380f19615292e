/**
 * The compose deployment as an operator runs it (issue 26): the image built by
 * scripts/validator-image.mjs, docker/docker-compose.validator.yml started with the README's own
 * `docker compose -f docker/docker-compose.validator.yml …` commands from a scratch copy of the
 * project (its own COMPOSE_PROJECT_NAME, image tag, wallets, port), then:
 * - a WALLETS_DIR that does not exist fails `up`, and nothing is created on the host;
 * - a wallet without the hotkey holds the daemon back (no restart loop) with the host-side fix named,
 *   in the logs, in `check`, first in `status` and in the container's health; the rehearsal's localnet
 *   holds with the same hint and `up` returns; the daemon starts once it is fixed;
 * - a start the daemon refuses (EVAL_ENABLED=1 on finney without LLM_API_KEY) is held, not looped:
 *   the container stays up and `status` prints the reason first;
 * - settings of .env.validator the container fixes are named at start with their docker/.env place;
 *   every line the entrypoint writes is JSON, an invalid value included, with the fix that applies;
 * - with the README's preflight (scripts/compose-preflight.mjs) a bad WALLETS_DIR or a taken
 *   STATUS_PORT stops before `up`, the running validator untouched; without it compose v1 stops and
 *   renames the validator, the preflight names the leftover, and `up -d --force-recreate` restores it;
 * - the README's backup (exec -T … backup -) and restore commands work on the live volume;
 * - with the local network's override (docker-compose.localnet.yml) `up` evaluates the epoch, posts the
 *   verdict and sets weights, as the status page shows; while the daemon's evaluation runs, nothing
 *   of its container answers on an episode's meter network but the meter port (the status page
 *   answers on the host's loopback); killed and started again mid-evaluation, the daemon reaps the
 *   old process's leftovers at once (same hostname, same pid: the boot label tells them apart);
 * - the documented exec commands work (status, check, images prune --dry-run, eval), as the daemon's
 *   identity (nothing in /data is left root's);
 * - health degrades (readiness, container health, `status`) when the chain goes away;
 * - a plain `up -d` pulls nothing, makes no anonymous volume, and names everything by the project;
 * - the rehearsal ran on a volume of its own: back on the real network, none of its rows shows.
 *
 * Everything made here is labelled trajrl.test=deploy-compose or belongs to the scratch compose
 * project, and is removed at the end (`down -v`); the image tag is removed without its layers.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chownSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KvRepo, openDb } from "../../src/store/index.js";
import type { StatusSnapshot } from "../../src/web/index.js";
import { type TestWallet, writeWallet } from "../helpers/daemon.js";
import { requireDocker } from "../helpers/docker.js";
import { badLogLines } from "../helpers/json-lines.js";
import { freePort } from "../helpers/ports.js";
import { waitFor } from "../helpers/wait.js";

/** Polls `docker` and the CLI: half a second apart unless a call says otherwise. */
const until = <T>(what: string, fn: () => Promise<T | undefined>, ms: number, everyMs = 500) =>
  waitFor(fn, { what, ms, everyMs });

const pexec = promisify(execFile);
const root = new URL("../..", import.meta.url).pathname;
const LABEL = "trajrl.test=deploy-compose";
// Random, not the pid alone: a pid comes back (pid_max 32768), and a project killed before its
// `down -v` left a data volume whose old verdicts a namesake project would read as its own.
const RUN = randomBytes(4).toString("hex");
const TAG = `trajrl-test/validator:deploy-${RUN}`;
const PROJECT = `trajrltest${RUN}`;
const COMPOSE = ["compose", "-f", "docker/docker-compose.validator.yml"];

interface Run {
  code: number;
  out: string;
  err: string;
}

async function sh(cmd: string, args: string[], opts: { cwd?: string; timeout?: number } = {}): Promise<Run> {
  try {
    const r = await pexec(cmd, args, {
      cwd: opts.cwd ?? root,
      timeout: opts.timeout ?? 120_000,
      maxBuffer: 64 << 20,
    });
    return { code: 0, out: r.stdout, err: r.stderr };
  } catch (e) {
    const x = e as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof x.code === "number" ? x.code : 1, out: x.stdout ?? "", err: x.stderr ?? "" };
  }
}

/** A scratch copy of the project as an operator lays it out: the compose file, docker/.env, .env.validator. */
class Project {
  readonly dir = mkdtempSync(join(tmpdir(), "deploy-compose-"));
  readonly wallets = join(this.dir, "wallets");
  statusPort = 0;

  constructor() {
    mkdirSync(join(this.dir, "docker"));
    for (const f of ["docker-compose.validator.yml", "docker-compose.localnet.yml"])
      copyFileSync(join(root, "docker", f), join(this.dir, "docker", f));
    // Only what the test needs: the healthcheck's timing (the image's 300 s start period would make
    // Docker's own verdict wait five minutes).
    writeFileSync(
      join(this.dir, "docker/test-health.yml"),
      "services:\n  validator:\n    healthcheck:\n      interval: 2s\n      timeout: 5s\n      retries: 1\n      start_period: 1s\n",
    );
  }

  writeEnv(dockerEnv: Record<string, string>, validatorEnv: Record<string, string>): void {
    const lines = (o: Record<string, string>) =>
      `${Object.entries(o)
        .map(([k, v]) => `${k}=${v}`)
        .join("\n")}\n`;
    writeFileSync(
      join(this.dir, "docker/.env"),
      lines({
        COMPOSE_PROJECT_NAME: PROJECT,
        VALIDATOR_IMAGE: TAG,
        STATUS_PORT: String(this.statusPort),
        WALLETS_DIR: this.wallets,
        ...dockerEnv,
      }),
    );
    writeFileSync(join(this.dir, ".env.validator"), lines(validatorEnv));
  }

  compose(args: string[], timeout = 180_000, extraFiles: string[] = []): Promise<Run> {
    const files = extraFiles.flatMap((f) => ["-f", f]);
    return sh("docker", [...COMPOSE, ...files, ...args], { cwd: this.dir, timeout });
  }
}

/**
 * The validator's settings; the chain and the platform answer nowhere until the local network's
 * override points them at it (and turns evaluation on: on finney a daemon evaluates only with a
 * provider key, which no test may use).
 */
const OFFLINE_ENV = {
  LLM_API_KEY: "",
  NETWORK: "finney",
  SUBTENSOR_ENDPOINT: "ws://127.0.0.1:9",
  TRAJECTORYRL_API_BASE_URL: "http://127.0.0.1:9",
  EVAL_POLL_INTERVAL_S: "1",
  WEIGHTS_INTERVAL_S: "1",
  DEGRADED_AFTER_S: "5",
  ENGY_SIM_LATENCY_SCALE: "0.3",
  EVAL_ENABLED: "0",
};

let docker: Docker;
let p: Project;
let wallet: TestWallet;
const probes: string[] = [];

beforeAll(async () => {
  docker = await requireDocker();
  const v = await sh("docker", ["compose", "version", "--short"]);
  if (v.code !== 0) throw new Error("`docker compose` is missing: run bash scripts/web-deps.sh");
  const b = await sh("node", ["scripts/validator-image.mjs", "build", "--tag", TAG, "--label", LABEL], {
    timeout: 25 * 60_000,
  });
  if (b.code !== 0) throw new Error(`image build failed:\n${b.err.slice(-4000)}\n${b.out.slice(-2000)}`);
  p = new Project();
  p.statusPort = await freePort();
}, 26 * 60_000);

afterAll(async () => {
  for (const id of probes) await sh("docker", ["rm", "-f", id]);
  if (p) {
    // With the override: its rehearsal volume goes too.
    const down = await p.compose(["down", "-v", "--remove-orphans", "--timeout", "20"], 180_000, [
      "docker/docker-compose.localnet.yml",
    ]);
    expect(down.code, down.err).toBe(0);
    rmSync(p.dir, { recursive: true, force: true });
  }
  await docker
    ?.getImage(TAG)
    .remove({ noprune: true })
    .catch(() => {});
}, 180_000);

const validatorName = () => `${PROJECT}_validator`;

async function logsOf(name: string): Promise<string> {
  const r = await sh("docker", ["logs", name]);
  return r.out + r.err;
}

describe("compose deployment: wallets", () => {
  it("a WALLETS_DIR that does not exist fails `up` with its path, and creates nothing there", async () => {
    const missing = join(p.dir, "no-such-wallets");
    p.writeEnv({ WALLETS_DIR: missing }, OFFLINE_ENV);
    const r = await p.compose(["up", "-d"]);
    expect(r.code).not.toBe(0);
    expect(r.err + r.out).toContain(missing);
    expect(r.err + r.out).toMatch(/does not exist/);
    expect(existsSync(missing)).toBe(false);
    await p.compose(["down", "--timeout", "5"]);
  }, 240_000);

  it("a wallet without the hotkey holds the daemon back with the host-side fix named, then it starts once fixed", async () => {
    mkdirSync(join(p.wallets, "somebody/hotkeys"), { recursive: true });
    chownSync(p.wallets, 4242, 4242);
    p.writeEnv({}, { ...OFFLINE_ENV, DATA_DIR: "./data", STATUS_PORT: "9999" });
    const up = await p.compose(["up", "-d"], 240_000, ["docker/test-health.yml"]);
    expect(up.code, up.err).toBe(0);

    const held = await until(
      "the wallet message",
      async () => {
        const l = await logsOf(validatorName());
        return l.includes("the daemon starts once this is fixed") ? l : undefined;
      },
      90_000,
    );
    expect(held).toContain(
      `no hotkey validator/hotkeys/default in the wallets directory mounted from the host (${p.wallets}; WALLETS_DIR in docker/.env). Wallets there: somebody.`,
    );
    // The settings the container fixes are named with where to set them instead.
    expect(held).toContain("DATA_DIR=./data (set in .env.validator) is not used in the container");
    expect(held).toContain(
      "STATUS_PORT=9999 (set in .env.validator) is not used in the container: choose the host's port with STATUS_PORT in docker/.env. Using STATUS_PORT=8080.",
    );
    // Every line the entrypoint wrote is a JSON log line.
    expect(badLogLines(held)).toEqual([]);
    // No restart loop: the container keeps running, and Docker's health says why.
    const info = await docker.getContainer(validatorName()).inspect();
    expect(info.State.Running).toBe(true);
    expect(info.RestartCount).toBe(0);
    const health = await until(
      "unhealthy with the reason",
      async () => {
        // (A probe before the status server listens says "no answer": the next one says why.)
        const h = (await docker.getContainer(validatorName()).inspect()).State.Health;
        return h?.Status === "unhealthy" && !h.Log.at(-1)?.Output.startsWith("no answer") ? h : undefined;
      },
      120_000,
    );
    expect(health.Log.at(-1)?.Output).toContain(
      "the validator waits for a set-up fix: hotkey file not found",
    );
    // The preflight says the same, as the documented exec.
    const check = await p.compose([
      "exec",
      "-T",
      "validator",
      "trajrl-validator",
      "check",
      "--only",
      "wallet",
    ]);
    expect(check.code).toBe(1);
    expect(check.out).toContain("WALLETS_DIR in docker/.env");
    // `status` says why first (the daemon is held back, so nothing answers).
    const status = await p.compose(["exec", "-T", "validator", "trajrl-validator", "status"]);
    expect(status.code).toBe(2);
    expect(status.out.split("\n")[0]).toMatch(
      /^HELD BACK {4}the validator waits for a set-up fix: hotkey file not found: .*WALLETS_DIR in docker\/\.env/,
    );

    // The rehearsal with the same wallet: `up` returns, and its localnet says the validator's own hint.
    const hint = `no hotkey validator/hotkeys/default in the wallets directory mounted from the host (${p.wallets}; WALLETS_DIR in docker/.env). Wallets there: somebody.`;
    const rehearsal = ["docker/docker-compose.localnet.yml", "docker/test-health.yml"];
    const upLocal = await p.compose(["up", "-d"], 240_000, rehearsal);
    expect(upLocal.code, upLocal.err).toBe(0);
    const localnetHeld = await until(
      "the localnet's wallet message",
      async () => {
        const l = await logsOf(`${PROJECT}_localnet`);
        return l.includes("the localnet starts once this is fixed") ? l : undefined;
      },
      90_000,
    );
    expect(localnetHeld).toContain(hint);
    expect(localnetHeld).toContain(
      "-f docker/docker-compose.validator.yml -f docker/docker-compose.localnet.yml up -d",
    );
    await until(
      "the rehearsal's validator held with the same hint",
      async () => {
        const l = await logsOf(validatorName());
        return l.includes(hint) && l.includes("docker-compose.localnet.yml up -d") ? true : undefined;
      },
      90_000,
    );
    expect((await docker.getContainer(`${PROJECT}_localnet`).inspect()).State.Running).toBe(true);
    // Back to the real settings (the held localnet removed).
    expect((await p.compose(["rm", "-f", "-s", "localnet"], 120_000, rehearsal)).code).toBe(0);
    const back = await p.compose(["up", "-d"], 240_000, ["docker/test-health.yml"]);
    expect(back.code, back.err).toBe(0);

    // Fixed on the host: the daemon starts by itself.
    wallet = await writeWallet(p.dir);
    for (const d of [
      "wallets",
      "wallets/validator",
      "wallets/validator/hotkeys",
      "wallets/validator/hotkeys/default",
    ])
      chownSync(join(p.dir, d), 4242, 4242);
    await until(
      "daemon.starting",
      async () => ((await logsOf(validatorName())).includes('"daemon.starting"') ? true : undefined),
      90_000,
      1000,
    );
  }, 900_000);

  it("a start the daemon refuses (EVAL_ENABLED=1 on finney without LLM_API_KEY) is held: the container stays up and `status` says why first", async () => {
    p.writeEnv({}, { ...OFFLINE_ENV, EVAL_ENABLED: "1" });
    const up = await p.compose(["up", "-d"], 240_000, ["docker/test-health.yml"]);
    expect(up.code, up.err).toBe(0);
    const held = await until(
      "the held start",
      async () => {
        const l = await logsOf(validatorName());
        return l.includes('"msg":"daemon.start_held"') ? l : undefined;
      },
      120_000,
    );
    expect(held).toContain('"code":"llm_key_missing_on_subnet"');
    const status = await until(
      "`status` from the held daemon",
      async () => {
        const r = await p.compose(["exec", "-T", "validator", "trajrl-validator", "status"]);
        return r.out.includes("! start:") ? r : undefined;
      },
      60_000,
      1000,
    );
    expect(status.code).toBe(1);
    const lines = status.out.split("\n");
    expect(lines[0]).toMatch(/ · UNHEALTHY \(start\) · ALARM start_held /);
    expect(lines[2]).toMatch(
      /^ {2}! start: the daemon holds its start \(llm_key_missing_on_subnet\): EVAL_ENABLED is on for finney but LLM_API_KEY is not set/,
    );
    // No restart loop: the same container, running, never restarted.
    const info = await docker.getContainer(validatorName()).inspect();
    expect(info.State.Running).toBe(true);
    expect(info.RestartCount).toBe(0);
  }, 300_000);
});

describe("compose deployment: a failed `up -d` (compose v1) and the README's preflight", () => {
  /** The README's command: the preflight, then `up -d` only when it passed. */
  const preflightThenUp = () =>
    sh(
      "sh",
      ["-c", `node ${join(root, "scripts/compose-preflight.mjs")} && docker ${COMPOSE.join(" ")} up -d`],
      { cwd: p.dir, timeout: 180_000 },
    );
  const preflight = () =>
    sh("node", [join(root, "scripts/compose-preflight.mjs")], { cwd: p.dir, timeout: 60_000 });
  const renamed = async () =>
    (await docker.listContainers({ all: true })).flatMap((c) =>
      c.Names.map((n) => n.slice(1)).filter((n) => new RegExp(`^[0-9a-f]{12}_${validatorName()}$`).test(n)),
    );

  it("with the preflight a bad WALLETS_DIR or a taken port stops before `up`; without it, the renamed validator is named and --force-recreate restores it", async () => {
    const before = await docker.getContainer(validatorName()).inspect();
    expect(before.State.Running).toBe(true);
    const missing = join(p.dir, "typo-wallets");

    p.writeEnv({ WALLETS_DIR: missing }, OFFLINE_ENV);
    const stopped = await preflightThenUp();
    expect(stopped.code).not.toBe(0);
    expect(stopped.out).toContain(`FAIL  wallets   WALLETS_DIR ${missing} does not exist`);
    const held = createServer();
    await new Promise<void>((r) => held.listen(0, "127.0.0.1", r));
    const port = (held.address() as { port: number }).port;
    try {
      p.writeEnv({ STATUS_PORT: String(port) }, OFFLINE_ENV);
      const taken = await preflightThenUp();
      expect(taken.code).not.toBe(0);
      expect(taken.out).toContain(`FAIL  port      127.0.0.1:${port} is taken by another process`);
    } finally {
      await new Promise((r) => held.close(r));
    }
    // The validator never noticed.
    const same = await docker.getContainer(validatorName()).inspect();
    expect(same.Id).toBe(before.Id);
    expect(same.State.Running).toBe(true);
    expect(same.State.StartedAt).toBe(before.State.StartedAt);

    // Without the preflight, compose v1 stops the validator and renames it before it fails.
    p.writeEnv({ WALLETS_DIR: missing }, OFFLINE_ENV);
    const failed = await p.compose(["up", "-d"]);
    expect(failed.code).not.toBe(0);
    expect(failed.err + failed.out).toContain(missing);
    const left = await renamed();
    expect(left).toEqual([`${before.Id.slice(0, 12)}_${validatorName()}`]);
    expect((await docker.getContainer(left[0]!).inspect()).State.Running).toBe(false);
    // The README's recovery: the preflight names the leftover, --force-recreate puts it right.
    p.writeEnv({}, OFFLINE_ENV);
    const named = await preflight();
    expect(named.code).toBe(1);
    expect(named.out).toContain(
      `FAIL  renamed   ${left[0]}: the validator an earlier failed \`up\` stopped and renamed`,
    );
    expect(named.out).toContain("up -d --force-recreate");
    const recreated = await p.compose(["up", "-d", "--force-recreate"], 240_000, ["docker/test-health.yml"]);
    expect(recreated.code, recreated.err).toBe(0);
    expect(await renamed()).toEqual([]);
    expect((await docker.getContainer(validatorName()).inspect()).State.Running).toBe(true);
    const clean = await preflight();
    expect(clean.out).toContain(
      `ok    port      127.0.0.1:${p.statusPort} is this validator's (${validatorName()})`,
    );
    expect(clean.code, clean.out).toBe(0);
    await until(
      "daemon.starting",
      async () => ((await logsOf(validatorName())).includes('"daemon.starting"') ? true : undefined),
      90_000,
      1000,
    );
  }, 600_000);

  it("an invalid .env.validator value is held with the value named and the fix that applies (`up -d`), in JSON lines", async () => {
    const name = `${PROJECT}_envprobe`;
    probes.push(name);
    const run = await sh("docker", [
      "run",
      "-d",
      "--name",
      name,
      "--label",
      LABEL,
      "--network",
      "none",
      "-e",
      "DEGRADED_AFTER_S=30s",
      "-v",
      `${p.wallets}:/wallets:ro`,
      TAG,
      "run",
    ]);
    expect(run.code, run.err).toBe(0);
    const logs = await until(
      "the entrypoint's follow-up",
      async () => {
        const l = await logsOf(name);
        return l.includes('"msg":"entrypoint.waiting"') ? l : undefined;
      },
      90_000,
    );
    expect(badLogLines(logs)).toEqual([]);
    const lines = logs
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { msg: string; text: string });
    expect(lines.find((l) => l.msg === "entrypoint.setup_blocked")?.text).toBe(
      'error: invalid environment: DEGRADED_AFTER_S="30s" is not a number',
    );
    expect(lines.find((l) => l.msg === "entrypoint.waiting")?.text).toBe(
      "fix it in .env.validator, then: docker compose -f docker/docker-compose.validator.yml up -d (the container reads .env.validator when it is created: no re-check here sees an edit)",
    );
  }, 120_000);

  it("the README's backup and restore: a consistent copy out of the live volume, and back", async () => {
    const copy = join(p.dir, "validator-backup.sqlite");
    const b = await sh(
      "sh",
      ["-c", `docker ${COMPOSE.join(" ")} exec -T validator trajrl-validator backup - > ${copy}`],
      { cwd: p.dir },
    );
    expect(b.code, b.err).toBe(0);
    const db = openDb(copy);
    try {
      expect(db.pragma("integrity_check", { simple: true })).toBe("ok");
      expect(
        (db.prepare("SELECT count(*) AS n FROM schema_migrations").get() as { n: number }).n,
      ).toBeGreaterThan(0);
      // A mark of our own, to see the restore put this copy back.
      new KvRepo(db).set("restored-from-backup", RUN);
    } finally {
      db.close();
    }
    const stop = await p.compose(["stop", "validator"]);
    expect(stop.code, stop.err).toBe(0);
    const restore = await sh("sh", [
      "-c",
      `docker run --rm -i --network none --label ${LABEL} -v ${PROJECT}-validator-data:/data --entrypoint sh ${TAG} -c 'rm -f /data/validator.sqlite-wal /data/validator.sqlite-shm && cat > /data/validator.sqlite && chown --reference=/data /data/validator.sqlite' < ${copy}`,
    ]);
    expect(restore.code, restore.err).toBe(0);
    const start = await p.compose(["start", "validator"]);
    expect(start.code, start.err).toBe(0);
    await until(
      "the daemon on the restored database",
      async () => {
        const r = await sh("docker", [
          "exec",
          validatorName(),
          "node",
          "-e",
          "const D=require('/app/node_modules/better-sqlite3'); const d=new D('/data/validator.sqlite',{readonly:true}); console.log(d.prepare(\"select value from kv where key='restored-from-backup'\").get()?.value ?? '')",
        ]);
        return r.code === 0 && r.out.includes(RUN) ? true : undefined;
      },
      90_000,
      1000,
    );
    const owner = await sh("docker", ["exec", validatorName(), "stat", "-c", "%u", "/data/validator.sqlite"]);
    expect(owner.out.trim()).toBe("4242");
  }, 300_000);
});

describe("compose deployment on the local network (docker-compose.localnet.yml)", () => {
  const LOCALNET = ["docker/docker-compose.localnet.yml", "docker/test-health.yml"];
  let self = "";

  /** /proc/<pid> of the daemon's `run` process inside the validator container, with its owner. */
  async function daemonProcess(): Promise<{ uid: number; pid: number } | undefined> {
    const r = await sh("docker", [
      "exec",
      validatorName(),
      "sh",
      "-c",
      `for p in /proc/[0-9]*; do c=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null); case "$c" in "node /app/bin/trajrl-validator.js run"*) stat -c '%u %n' $p ;; esac; done`,
    ]);
    const m = /^(\d+) \/proc\/(\d+)$/m.exec(r.out);
    return m ? { uid: Number(m[1]), pid: Number(m[2]) } : undefined;
  }

  async function statusDoc(): Promise<StatusSnapshot | undefined> {
    const r = await fetch(`http://127.0.0.1:${p.statusPort}/api/status`).catch(() => undefined);
    return r?.status === 200 ? ((await r.json()) as StatusSnapshot) : undefined;
  }

  it(
    "`up` evaluates the epoch, and while it runs only the meter port of the daemon's container answers on an episode's network; a restarted daemon reaps the old one's leftovers at once; the verdict is posted and weights set",
    async () => {
      p.writeEnv({}, { ...OFFLINE_ENV, EVAL_POLL_INTERVAL_S: "2" });
      const up = await p.compose(["up", "-d"], 300_000, LOCALNET);
      expect(up.code, up.err).toBe(0);
      self = (await docker.getContainer(validatorName()).inspect()).Id;

      // 1. An episode's meter network of the daemon's own evaluation, and a probe on it.
      const net = await until(
        "an episode meter network of the daemon's container",
        async () => {
          const nets = await docker.listNetworks({
            filters: { label: ["trajrl.role=net-meter", `trajrl.container=${self}`] },
          });
          return nets[0];
        },
        10 * 60_000,
        250,
      );
      const oldSession = net.Labels!["trajrl.session"]!;
      const oldPid = Number(net.Labels!["trajrl.pid"]);
      const subnet = net.IPAM?.Config?.[0]?.Subnet as string;
      const base = subnet.split("/")[0]!.split(".").map(Number);
      const probeIp = [...base.slice(0, 3), base[3]! + 12].join(".");
      const probe = await sh("docker", [
        "run",
        "-d",
        "--label",
        LABEL,
        "--network",
        net.Name,
        "--ip",
        probeIp,
        "--entrypoint",
        "sleep",
        "debian:bookworm-slim",
        "600",
      ]);
      expect(probe.code, probe.err).toBe(0);
      probes.push(probe.out.trim());
      const daemonIp = await until(
        "the daemon's address on the meter network",
        async () => {
          const n = await docker
            .getNetwork(net.Id)
            .inspect()
            .catch(() => undefined);
          const ep = (n?.Containers as Record<string, { IPv4Address: string }> | undefined)?.[self];
          return ep?.IPv4Address.split("/")[0];
        },
        30_000,
      );
      // Every port anything listens on in the daemon's network namespace, tried from the probe.
      const scan = async () => {
        const tcp = await sh("docker", ["exec", validatorName(), "cat", "/proc/net/tcp", "/proc/net/tcp6"]);
        const ports = new Set<number>();
        for (const l of tcp.out.split("\n").slice(1)) {
          const f = l.trim().split(/\s+/);
          if (f[3] === "0A") ports.add(Number.parseInt(f[1]!.split(":").at(-1)!, 16));
        }
        const script = [...ports]
          .map(
            (port) =>
              `(timeout 3 bash -c 'exec 3<>/dev/tcp/${daemonIp}/${port}' 2>/dev/null && echo "${port}=open" || echo "${port}=closed") &`,
          )
          .join("\n");
        const r = await sh("docker", ["exec", probe.out.trim(), "bash", "-c", `${script}\nwait`]);
        const res: Record<number, string> = {};
        for (const m of r.out.matchAll(/^(\d+)=(open|closed)$/gm)) res[Number(m[1])] = m[2]!;
        return { ports: [...ports].sort((a, b) => a - b), res };
      };
      const seen = await until(
        "a scan while the meter listens",
        async () => {
          const sc = await scan();
          return sc.res[8790] === "open" ? sc : undefined;
        },
        120_000,
        250,
      );
      // The status page listens in there (0.0.0.0:8080) and answers on the host's loopback …
      expect(seen.ports).toContain(8080);
      expect((await fetch(`http://127.0.0.1:${p.statusPort}/api/status`)).status).toBe(200);
      // … but from the episode's network only the meter answers.
      const open = Object.entries(seen.res)
        .filter(([, v]) => v === "open")
        .map(([k]) => Number(k));
      expect(open).toEqual([8790]);
      expect(Object.keys(seen.res)).toHaveLength(seen.ports.length);

      // 2. The daemon's container killed mid-evaluation and started again: same hostname, and often
      // the old one's pid (the entrypoint's steps before the daemon may differ by one on a second
      // start); either way the old process's leftovers go at its start-up sweep — by their boot id
      // when the pid is the same (test/integration/sandbox-reaper.test.ts proves that case alone).
      const left = async () => {
        const filters = { label: [`trajrl.session=${oldSession}`] };
        const [cs, ns] = await Promise.all([
          docker.listContainers({ all: true, filters }),
          docker.listNetworks({ filters }),
        ]);
        return cs.length + ns.length;
      };
      expect(await left()).toBeGreaterThan(0);
      expect((await sh("docker", ["kill", validatorName()])).code).toBe(0);
      expect(await left()).toBeGreaterThan(0);
      expect((await sh("docker", ["start", validatorName()])).code).toBe(0);
      const restarted = await until("the restarted daemon", daemonProcess, 60_000);
      console.log(`daemon pid before the kill ${oldPid}, after the restart ${restarted.pid}`);
      await until(
        "the old process's leftovers reaped",
        async () => ((await left()) === 0 ? true : undefined),
        120_000,
        1000,
      );

      // 3. The resumed evaluation ends in a verdict the platform accepts, and weights on the chain,
      // both on the status page.
      const done = await until(
        "a delivered verdict and included weights on the status page",
        async () => {
          const st = await statusDoc();
          return st && (st.outbox.counts.delivered ?? 0) >= 1 && st.weights.last?.outcome === "included"
            ? st
            : undefined;
        },
        12 * 60_000,
        2000,
      );
      expect(done.node.network).toBe("local");
      expect(done.verdicts[0]?.status).toBe("scored");
      expect(String(done.verdicts[0]?.epochId)).toBe("1000");
      // The stand-in logs what it received on a 500 ms tick: the status page can see the delivery
      // before that line is written.
      const localnetLog = await until(
        "the stand-in's log of the verdict and the weights",
        async () => {
          const l = await logsOf(`${PROJECT}_localnet`);
          return l.includes('"msg":"localnet.verdict_posted"') && l.includes('"msg":"localnet.weights_set"')
            ? l
            : undefined;
        },
        30_000,
        500,
      ).catch(async () => logsOf(`${PROJECT}_localnet`));
      expect(localnetLog).toContain('"msg":"localnet.verdict_posted"');
      expect(localnetLog).toContain('"msg":"localnet.weights_set"');
      // Healthy while the chain and the platform answer.
      expect((await fetch(`http://127.0.0.1:${p.statusPort}/readyz`)).status).toBe(200);
    },
    30 * 60_000,
  );

  it(
    "the documented exec commands work, as the daemon's identity",
    async () => {
      const run = (...args: string[]) =>
        p.compose(["exec", "-T", "validator", "trajrl-validator", ...args], 600_000, LOCALNET);
      const version = await run("--version");
      expect(version.code, version.err).toBe(0);
      expect(version.out.trim()).toMatch(/^\d+\.\d+\.\d+/);
      // The weights loop keeps setting weights: an attempt is `pending` for a moment every few
      // blocks, and a status taken then says so. Ask again until it shows the included one.
      const status = await until(
        "a status with the weights included",
        async () => {
          const s = await run("status");
          return /WEIGHTS\s+included/.test(s.out) ? s : undefined;
        },
        60_000,
        1000,
      ).catch(async () => run("status"));
      expect(status.code, status.out).toBe(0);
      expect(status.out).toContain("(live, from the daemon at http://127.0.0.1:8080)");
      expect(status.out).toMatch(/WEIGHTS\s+included/);
      const prune = await run("images", "prune", "--dry-run");
      expect(prune.code, prune.err + prune.out).toBe(0);
      const check = await run("check");
      expect(check.code, check.out + check.err).toBe(0);
      expect(check.out).toContain(`ok    wallet    validator/default: ${wallet.ss58}`);
      expect(check.out).toMatch(
        /^ok {4}chain {5}.*\(local\) at block \d+, netuid 11: uid 3, validator permit$/m,
      );
      expect(check.out).toMatch(/^ok {4}platform {2}http:\/\/localnet:8088: .*\(signed request accepted\)$/m);
      expect(check.out).toMatch(
        /^ok {4}firewall {2}host chain kept by \S+_firewall \(healthy\); own chain for 10\.213\.0\.0\/16 installed$/m,
      );
      // An evaluation by hand, as the daemon's identity: nothing in /data is left root's.
      await sh("docker", ["cp", join(root, "examples/packs/pin.json"), `${validatorName()}:/tmp/pin.json`]);
      const ev = await run("eval", "/tmp/pin.json", "--scenarios", "binary-flag-hunt", "--json");
      expect(ev.code, `${ev.err.slice(-3000)}\n${ev.out.slice(-2000)}`).toBe(0);
      const rootOwned = await sh("docker", ["exec", validatorName(), "find", "/data", "-user", "0"]);
      expect(rootOwned.out.trim()).toBe("");
      expect((await daemonProcess())?.uid).toBe(4242);
    },
    12 * 60_000,
  );

  it("health degrades when the chain (and the platform) go away: readiness, Docker's health, status", async () => {
    const stop = await p.compose(["stop", "localnet"], 120_000, LOCALNET);
    expect(stop.code, stop.err).toBe(0);
    const body = await until(
      "/readyz degraded by the chain",
      async () => {
        const r = await fetch(`http://127.0.0.1:${p.statusPort}/readyz`);
        const b = (await r.json()) as { state: string; checks: { upstreams: { unreachable: string[] } } };
        return r.status === 503 && b.checks.upstreams.unreachable.includes("chain") ? b : undefined;
      },
      240_000,
      1000,
    );
    expect(body.state).toBe("degraded");
    expect((await fetch(`http://127.0.0.1:${p.statusPort}/healthz`)).status).toBe(200);
    const health = await until(
      "Docker's health verdict",
      async () => {
        // (The platform may have been named alone by earlier probes: the chain's alarm counts only
        // after a few failed weight ticks. Wait for a probe made since.)
        const h = (await docker.getContainer(validatorName()).inspect()).State.Health;
        const last = h?.Log.at(-1)?.Output ?? "";
        return h?.Status === "unhealthy" && last.startsWith("degraded") && last.includes("chain unreachable")
          ? h
          : undefined;
      },
      60_000,
    );
    expect(health.Log.at(-1)?.Output).toMatch(/^degraded \(503\): .*chain unreachable for/);
    const status = await p.compose(
      ["exec", "-T", "validator", "trajrl-validator", "status"],
      120_000,
      LOCALNET,
    );
    expect(status.code).toBe(1);
    expect(status.out.split("\n")[0]).toMatch(/ · DEGRADED \([a-z, ]*chain[a-z, ]*\) · ALARM /);
  }, 360_000);

  it("a plain `up -d` pulled nothing, made no anonymous volume, and named everything by the project", async () => {
    const all = await docker.listContainers({
      all: true,
      filters: { label: [`com.docker.compose.project=${PROJECT}`] },
    });
    expect(all.map((c) => c.Names[0]).sort()).toEqual([
      `/${PROJECT}_firewall`,
      `/${PROJECT}_localnet`,
      `/${PROJECT}_validator`,
    ]);
    for (const c of all) {
      expect(c.Image).toBe(TAG);
      // Only the mounts the compose files name: no anonymous /data volume behind the other containers.
      const info = await docker.getContainer(c.Id).inspect();
      for (const m of info.Mounts)
        expect(m.Type === "volume" ? m.Name : m.Source).not.toMatch(/^[0-9a-f]{64}$/);
    }
    expect((await docker.getContainer(`${PROJECT}_firewall`).inspect()).Mounts).toEqual([]);
    expect(
      (await docker.getContainer(validatorName()).inspect()).Config.Labels?.[
        "com.centurylinklabs.watchtower.enable"
      ],
    ).toBe("false");
    const nets = await docker.listNetworks({ filters: { label: [`com.docker.compose.project=${PROJECT}`] } });
    expect(nets.map((n) => n.Name)).toEqual([`${PROJECT}_default`]);
    // Watchtower is only in the autoupdate profile.
    expect(await docker.listContainers({ all: true, filters: { name: [`${PROJECT}_watchtower`] } })).toEqual(
      [],
    );
  }, 60_000);

  it("the rehearsal ran on a volume of its own: back on the real network, its status page shows none of the rehearsal's rows", async () => {
    const mounts = (await docker.getContainer(validatorName()).inspect()).Mounts;
    expect(mounts.find((m) => m.Destination === "/data")?.Name).toBe(`${PROJECT}-rehearsal-data`);
    // Back: the real settings (a finney chain that does not answer here; weight-only).
    p.writeEnv({}, OFFLINE_ENV);
    const back = await p.compose(["up", "-d"], 240_000, ["docker/test-health.yml"]);
    expect(back.code, back.err).toBe(0);
    const after = (await docker.getContainer(validatorName()).inspect()).Mounts;
    expect(after.find((m) => m.Destination === "/data")?.Name).toBe(`${PROJECT}-validator-data`);
    const st = await until(
      "the real network's status page",
      async () => {
        const r = await fetch(`http://127.0.0.1:${p.statusPort}/api/status`).catch(() => undefined);
        const s = r?.status === 200 ? ((await r.json()) as StatusSnapshot) : undefined;
        return s && s.node.network === "finney" && s.startedAt !== null ? s : undefined;
      },
      120_000,
      1000,
    );
    expect(st.verdicts.filter((v) => v.source === "epoch")).toEqual([]);
    expect(st.outbox.counts.delivered ?? 0).toBe(0);
    expect(st.weights.recent).toEqual([]);
  }, 300_000);
});
