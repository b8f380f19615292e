import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "./repo.js";

/** The package version, read once from package.json next to src/ or dist/. */
export const VERSION: string = (() => {
  try {
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
      version: string;
    };
    return pkg.version;
  } catch {
    return "0.0.0";
  }
})();

export const HARNESS_NAME = "trajrl-validator-ts";
