/**
 * The SDK file every sidecar runs (sidecar/sdk/trajrl_policy.py, built from sidecar/trajrl_policy/ by
 * sdk-bundle.ts), and where the subnet's benchmark expects it: the episode places it at
 * /policy/sdk/trajrl_policy.py and starts `python /policy/sdk/trajrl_policy.py` with
 * PYTHONPATH=/policy/sdk:/policy, as upstream's validator does with its own runtime.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { SIDECAR_DIR } from "./paths.js";

/** The generated single file, in the repository. */
export const SDK_FILE = join(SIDECAR_DIR, "sdk", "trajrl_policy.py");
/** Where it goes in a sidecar container, and the path list that makes `import trajrl_policy` work. */
export const SDK_SIDECAR_DIR = "/policy/sdk";
export const SDK_SIDECAR_PATH = `${SDK_SIDECAR_DIR}/trajrl_policy.py`;
export const SDK_PYTHONPATH = `${SDK_SIDECAR_DIR}:/policy`;
/** The only third-party package the SDK imports (the bench image's venv provides it, and httpx). */
export const SDK_THIRD_PARTY_IMPORTS = ["aiohttp"] as const;

let cached: { name: "trajrl_policy.py"; content: string } | undefined;

/** The SDK as one file, to place into the sidecar's /policy/sdk/ (read once per process). */
export function sdkSingleFile(): { name: "trajrl_policy.py"; content: string } {
  cached ??= { name: "trajrl_policy.py", content: readFileSync(SDK_FILE, "utf8") };
  return cached;
}
