/** Rewrites sidecar/sdk/trajrl_policy.py from sidecar/trajrl_policy/ (`npm run sdk:bundle`). */
import { writeFileSync } from "node:fs";
import { SDK_FILE } from "../src/policy/sdk.js";
import { buildSdkSingleFile } from "../src/policy/sdk-bundle.js";

writeFileSync(SDK_FILE, buildSdkSingleFile());
console.log(`wrote ${SDK_FILE}`);
