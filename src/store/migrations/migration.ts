import type Database from "better-sqlite3";

/** One numbered schema change (its own file: the migrations and their list import it, not each other). */
export interface Migration {
  version: number;
  name: string;
  up: string | ((db: Database.Database) => void);
}
