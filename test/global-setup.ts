/**
 * Once per test run: build what the tests run as a product artefact (the agent bundle), so
 * `npm test` works on a fresh clone without a separate build step. Docker-backed suites check the
 * engine themselves (test/helpers/docker.ts) and fail, never skip, when it is missing.
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

export default function setup(): void {
  const root = fileURLToPath(new URL("..", import.meta.url));
  execFileSync(process.execPath, ["scripts/build-agent.mjs", "--if-stale", "--quiet"], {
    cwd: root,
    stdio: "inherit",
  });
}
