/**
 * `trajrl-validator engines` (list, drain, resume) and `check --only engines` as an operator runs
 * them (child processes): the drain flag lands in DATA_DIR's database where the daemon's pool reads
 * it; an unknown name is refused; the check names each engine that does not answer.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { readDrained } from "../../src/pool/index.js";
import { KvRepo, openDb } from "../../src/store/index.js";
import { runCli } from "../helpers/cli.js";
import { requireDocker } from "../helpers/docker.js";

const cli = (env: Record<string, string>, ...args: string[]) =>
  runCli(args, { base: "clean", env, timeoutMs: 90_000 });

let env: Record<string, string>;
let dataDir: string;

beforeAll(async () => {
  await requireDocker();
  const dir = mkdtempSync(join(tmpdir(), "engines-cli-"));
  dataDir = join(dir, "data");
  const tls = join(dir, "b");
  mkdirSync(tls);
  for (const f of ["ca.pem", "cert.pem", "key.pem"]) writeFileSync(join(tls, f), "");
  env = {
    DATA_DIR: dataDir,
    // Nothing listens on loopback port 1: engine b never answers.
    ENGINES: `name=local url=local slots=2; name=b url=tcp://127.0.0.1:1 slots=3 tls=${tls}`,
    STATUS_PORT: "1",
  };
});

describe("engines (cli)", () => {
  it("drain and resume write the flag the daemon reads; the list shows it; an unknown engine is refused", async () => {
    const drained = await cli(env, "engines", "drain", "b");
    expect(drained.code, drained.stderr).toBe(0);
    expect(drained.stdout).toContain("engine b drained");
    const db = openDb(join(dataDir, "validator.sqlite"), { readonly: true });
    expect(Object.keys(readDrained(new KvRepo(db)))).toEqual(["b"]);
    db.close();

    const list = await cli(env, "engines", "--json");
    expect(list.code, list.stderr).toBe(0);
    const json = JSON.parse(list.stdout) as {
      explicit: boolean;
      engines: Array<{ name: string; drained: string | null; slots: number }>;
    };
    expect(json.explicit).toBe(true);
    expect(json.engines.map((e) => [e.name, e.slots, e.drained !== null])).toEqual([
      ["local", 2, false],
      ["b", 3, true],
    ]);
    const text = await cli(env, "engines");
    expect(text.stdout).toMatch(/b \s*tcp:\/\/127\.0\.0\.1:1\s+slots 3\s+DRAINED since/);

    const resumed = await cli(env, "engines", "resume", "b");
    expect(resumed.code).toBe(0);
    const db2 = openDb(join(dataDir, "validator.sqlite"), { readonly: true });
    expect(readDrained(new KvRepo(db2))).toEqual({});
    db2.close();

    const unknown = await cli(env, "engines", "drain", "nope");
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("no engine named nope in ENGINES (engines: local, b)");
  }, 120_000);

  it("check names the engine that does not answer (a warning while the first engine works)", async () => {
    const r = await cli({ ...env, EVAL_ENABLED: "1" }, "check", "--only", "engines", "--timeout", "5000");
    const line = r.stdout.split("\n").find((l) => l.includes("engines")) ?? "";
    expect(line).toMatch(/^warn +engines +local Docker [\d.]+\S*; b \(tcp:\/\/127\.0\.0\.1:1\): /);
    expect(r.code).toBe(0);
    const bad = await cli(
      { ...env, EVAL_ENABLED: "1", ENGINES: env.ENGINES!.split("; ").reverse().join("; ") },
      "check",
      "--only",
      "engines",
      "--timeout",
      "5000",
    );
    expect(bad.stdout).toMatch(/^FAIL +engines +b \(tcp/m);
    expect(bad.code).toBe(1);
  }, 120_000);
});
