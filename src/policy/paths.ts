/** Where the Python side lives, and what goes into the sidecar image's build context. */
import { readdirSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { REPO_ROOT } from "../repo.js";

/** sidecar/: the trajrl_policy package and the launcher. */
export const SIDECAR_DIR = join(REPO_ROOT, "sidecar");
/** The entry point every shape of policy starts from (the image's CMD). */
export const LAUNCHER = join(SIDECAR_DIR, "launch.py");
export const SIDECAR_DOCKERFILE = "docker/images/sidecar/Dockerfile";

export interface SidecarBuildContext {
  /** Context root on disk (the repository root). */
  root: string;
  /** The Dockerfile's path inside the context. */
  dockerfile: string;
  /** Every file of the context, relative to root with "/" separators, sorted. */
  files: string[];
}

const SKIP = new Set(["__pycache__", "tests", ".mypy_cache", ".pytest_cache"]);

function walk(dir: string, out: string[]): void {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (SKIP.has(e.name) || e.name.endsWith(".pyc")) continue;
    const abs = join(dir, e.name);
    if (e.isDirectory()) walk(abs, out);
    else if (e.isFile()) out.push(relative(REPO_ROOT, abs).split(sep).join("/"));
  }
}

/**
 * The sidecar image's build context: its Dockerfile plus the runtime (sidecar/launch.py,
 * sidecar/trajrl_policy/**), nothing else, so the image's content hash changes only with them.
 * Tests and caches are left out.
 */
export function sidecarBuildContext(): SidecarBuildContext {
  const files: string[] = [SIDECAR_DOCKERFILE, "sidecar/launch.py"];
  walk(join(SIDECAR_DIR, "trajrl_policy"), files);
  files.sort();
  return { root: REPO_ROOT, dockerfile: SIDECAR_DOCKERFILE, files };
}
