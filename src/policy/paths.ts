/** Where the Python side lives, and what goes into the sidecar image's build context. */
import { join } from "node:path";
import { REPO_ROOT } from "../repo.js";

/** sidecar/: the SDK's sources (trajrl_policy/) and the single file built from them (sdk/). */
export const SIDECAR_DIR = join(REPO_ROOT, "sidecar");
/** The entry point every shape of policy starts from: the SDK file, run as a script. */
export const LAUNCHER = join(SIDECAR_DIR, "sdk", "trajrl_policy.py");
export const SIDECAR_DOCKERFILE = "docker/images/sidecar/Dockerfile";

export interface SidecarBuildContext {
  /** Context root on disk (the repository root). */
  root: string;
  /** The Dockerfile's path inside the context. */
  dockerfile: string;
  /** Every file of the context, relative to root with "/" separators, sorted. */
  files: string[];
}

/**
 * The sidecar image's build context: its Dockerfile plus the SDK file, nothing else, so the image's
 * content hash changes only with them.
 */
export function sidecarBuildContext(): SidecarBuildContext {
  const files = [SIDECAR_DOCKERFILE, "sidecar/sdk/trajrl_policy.py"].sort();
  return { root: REPO_ROOT, dockerfile: SIDECAR_DOCKERFILE, files };
}
