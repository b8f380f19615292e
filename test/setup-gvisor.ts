/**
 * Before every file of the `gvisor` test project: the engine must have gVisor, else each test of
 * the file fails with the fix (test/helpers/gvisor.ts) instead of a confusing assertion later.
 */
import { beforeAll } from "vitest";
import { engineRuntimes } from "../src/sandbox/index.js";
import { requireDocker } from "./helpers/docker.js";
import { gvisorMissing } from "./helpers/gvisor.js";

beforeAll(async () => {
  const missing = gvisorMissing(await engineRuntimes(await requireDocker()));
  if (missing) throw new Error(missing);
});
