/**
 * `trajrl-validator backup` as the README tells an operator to run it, while another connection (the
 * daemon's stand-in) keeps writing in WAL mode: the copy — to a file, or to stdout with `-` — is one
 * committed state that SQLite checks as intact, with every row committed before it began; an
 * existing file is never overwritten. No sqlite3 binary involved (the image has none).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { KvRepo, openDb } from "../../src/store/index.js";
import { runCli } from "../helpers/cli.js";

const dir = mkdtempSync(join(tmpdir(), "backup-cli-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function backup(...args: string[]) {
  const r = await runCli(["backup", ...args], {
    base: "clean",
    env: { HOME: dir, DATA_DIR: join(dir, "data") },
    timeoutMs: 90_000,
  });
  return { code: r.code, stdout: r.stdoutBytes, stderr: r.stderr };
}

function check(file: string): { ok: string; before: number; last: number } {
  const db = openDb(file, { readonly: true });
  try {
    const ok = db.pragma("integrity_check", { simple: true }) as string;
    const kv = new KvRepo(db);
    return { ok, before: kv.get<number>("before") ?? -1, last: kv.get<number>("tick") ?? -1 };
  } finally {
    db.close();
  }
}

describe("trajrl-validator backup", () => {
  it("copies the live database to a file and to stdout, intact, while it is written; never overwrites", async () => {
    const live = openDb(join(dir, "data", "validator.sqlite"));
    const kv = new KvRepo(live);
    // Enough pages that the copy takes a while, then writes all along.
    live.exec("CREATE TABLE filler (x BLOB)");
    const ins = live.prepare("INSERT INTO filler (x) VALUES (randomblob(4096))");
    live.transaction(() => {
      for (let k = 0; k < 4000; k++) ins.run();
    })();
    kv.set("before", 42);
    let tick = 0;
    const writer = setInterval(() => {
      kv.set("tick", ++tick);
      ins.run();
    }, 5);
    try {
      const file = join(dir, "copy.sqlite");
      const r = await backup(file);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toMatch(
        new RegExp(`^${file}: a copy of .*validator\\.sqlite \\(\\d+ pages, \\d+\\.\\d MB\\)\\n$`),
      );
      expect(check(file)).toMatchObject({ ok: "ok", before: 42 });

      const piped = await backup("-");
      expect(piped.code, piped.stderr).toBe(0);
      expect(piped.stdout.subarray(0, 16).toString("latin1")).toBe("SQLite format 3\0");
      const out = join(dir, "piped.sqlite");
      writeFileSync(out, piped.stdout);
      expect(check(out)).toMatchObject({ ok: "ok", before: 42 });
      expect(tick).toBeGreaterThan(0);

      const again = await backup(file);
      expect(again.code).toBe(1);
      expect(again.stderr).toBe(`error: ${file} exists: name a new file (nothing is overwritten)\n`);
    } finally {
      clearInterval(writer);
      live.close();
    }
    const none = await backup(join(dir, "x.sqlite")).then(async () => {
      rmSync(join(dir, "data"), { recursive: true, force: true });
      return backup(join(dir, "y.sqlite"));
    });
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/^error: no database at .*validator\.sqlite \(DATA_DIR\)\n$/);
  }, 180_000);
});
