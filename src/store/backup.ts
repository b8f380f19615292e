/**
 * A consistent copy of the database while the daemon writes it: SQLite's online backup (through
 * better-sqlite3) in one step under a read transaction, so the copy is one committed state, WAL
 * included, while the daemon goes on writing. No sqlite3 binary needed (the image has none).
 */
import { existsSync, statSync } from "node:fs";
import { InfraError, InputError } from "../errors.js";
import { openDb } from "./db.js";

export async function backupDatabase(
  source: string,
  dest: string,
): Promise<{ pages: number; bytes: number }> {
  if (!existsSync(source)) throw new InputError("db_missing", `no database at ${source} (DATA_DIR)`);
  if (existsSync(dest))
    throw new InputError(
      "db_backup_target_exists",
      `${dest} exists: name a new file (nothing is overwritten)`,
    );
  const db = openDb(source, { readonly: true });
  try {
    // All remaining pages in one step: copied in steps, a source written between two of them (the
    // daemon writes every few seconds) makes SQLite start over, and the copy might never finish.
    const r = await db.backup(dest, { progress: () => 0x7fffffff });
    return { pages: r.totalPages, bytes: statSync(dest).size };
  } catch (err) {
    throw new InfraError("db_backup_failed", `backing up ${source} to ${dest}: ${(err as Error).message}`, {
      cause: err,
      retryable: false,
    });
  } finally {
    db.close();
  }
}
