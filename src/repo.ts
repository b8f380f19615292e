/** Where this checkout (or the installed package) keeps its own files: one home for the paths. */
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository (or package) root: the folder holding package.json, scenarios/, sidecar/, agent/. */
export const REPO_ROOT = fileURLToPath(new URL("../", import.meta.url));
export const ALLOWLIST_FILE = join(REPO_ROOT, "allowlist.json");
export const PRICE_TABLE_FILE = join(REPO_ROOT, "price-table.json");
