/**
 * `trajrl-validator backup FILE | -`: a consistent copy of the database while the daemon runs
 * (src/store backupDatabase). `-` writes the copy to stdout, so the compose deployment needs no path
 * on the host's side of the volume: `docker compose … exec -T validator trajrl-validator backup - > copy.sqlite`.
 */
import { createReadStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import type { Command } from "commander";
import { warn } from "./io.js";

export function registerBackup(program: Command): void {
  program
    .command("backup")
    .description("a consistent copy of the database while the daemon runs (FILE, or - for stdout)")
    .argument("<file>", "a new file for the copy, or - to write it to stdout")
    .action(async (file: string) => {
      const [{ loadConfig }, { backupDatabase }] = await Promise.all([
        import("../config.js"),
        import("../store/index.js"),
      ]);
      const source = loadConfig().dbPath;
      if (file !== "-") {
        const r = await backupDatabase(source, file);
        warn(`${file}: a copy of ${source} (${r.pages} pages, ${(r.bytes / 1e6).toFixed(1)} MB)`);
        return;
      }
      const dir = await mkdtemp(join(tmpdir(), "trajrl-backup-"));
      try {
        const tmp = join(dir, "validator.sqlite");
        await backupDatabase(source, tmp);
        await pipeline(createReadStream(tmp), process.stdout, { end: false });
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
}
