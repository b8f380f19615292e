/**
 * The `gvisor` test project (vitest.config.ts) proves things under gVisor: its files need the
 * engine's `runsc` runtime, and fail (never skip, never pass under runc) when it is missing.
 */
import { GVISOR_RUNTIME } from "../../src/sandbox/index.js";

/** Pure: why the `gvisor` project cannot run on an engine with these runtimes, or undefined when it can. */
export function gvisorMissing(runtimes: readonly string[]): string | undefined {
  if (runtimes.includes(GVISOR_RUNTIME)) return undefined;
  const have = runtimes.length ? runtimes.join(", ") : "none listed";
  return (
    `the gvisor test project needs the engine's "${GVISOR_RUNTIME}" runtime (gVisor), and this engine has ${have}: ` +
    "run `bash scripts/setup.sh` (scripts/runsc-up.sh installs Debian's runsc and registers it with an engine the set-up started; " +
    "for any other engine add the entry `bash scripts/runsc-up.sh --print` shows to its daemon.json and reload it)"
  );
}
