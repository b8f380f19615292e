import type { Db } from "./db.js";

/** Small typed settings and markers (e.g. last heartbeat), JSON-encoded. */
export class KvRepo {
  private readonly getStmt;
  private readonly setStmt;
  private readonly delStmt;

  constructor(db: Db) {
    this.getStmt = db.prepare<[string], { value: string }>("SELECT value FROM kv WHERE key = ?");
    this.setStmt = db.prepare(
      "INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')",
    );
    this.delStmt = db.prepare("DELETE FROM kv WHERE key = ?");
  }

  get<T>(key: string): T | undefined {
    const row = this.getStmt.get(key);
    return row ? (JSON.parse(row.value) as T) : undefined;
  }

  set(key: string, value: unknown): void {
    this.setStmt.run(key, JSON.stringify(value));
  }

  delete(key: string): void {
    this.delStmt.run(key);
  }
}
