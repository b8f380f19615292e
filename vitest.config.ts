import { defineConfig } from "vitest/config";

/**
 * Episode containers run under runc in the suite (EPISODE_RUNTIME=runc: what `auto` gives on an
 * engine without gVisor) and again under gVisor where the runtime can change an outcome. gVisor
 * adds to every episode on this machine's ptrace platform (README, Benchmarks: up to 2.7× a run), so the
 * whole suite runs once, under runc, and these files a second time, under gVisor:
 *  - the isolation the firewall, the bridges and DNS give (the network path differs: gVisor's
 *    sentry makes the host's socket calls), the hostile policies whose outcome the runtime can
 *    change (hostile.test.ts skips the pure daemon-side ones in that pass) and the hostile
 *    deliverables (a root grader's tricks meet another kernel).
 * And these under gVisor alone, the production default (`auto` where the engine has it):
 *  - every scenario's proof (`scenarios check`, built-in suite and the offline trajrl-bench), the
 *    verdict comparison (it evaluates under both runtimes itself) and what gVisor cannot do here.
 */
const UNDER_GVISOR_TOO = [
  "test/integration/sandbox-isolation.test.ts",
  "test/reliability/hostile.test.ts",
  "test/reliability/forgery.test.ts",
];
const UNDER_GVISOR_ONLY = [
  "test/integration/gvisor-limits.test.ts",
  "test/integration/scenarios-check-all.test.ts",
  "test/integration/scenarios-check-bench.test.ts",
  "test/e2e/runtime-parity.test.ts",
];

/**
 * Three groups, run one after the other by one `vitest run`:
 *  - "main", then "gvisor" (above): Docker-backed suites share one engine on a small machine, so
 *    files run in parallel two at a time, each in its own fork so a crash cannot take the others down.
 *    Never the two groups at once: a file in both would race itself for its fixed test networks.
 *  - "serial": `*.serial.test.ts`, tests that disturb the whole machine (e.g. restart the Docker
 *    engine); they run alone, after the others.
 */
export default defineConfig({
  test: {
    globalSetup: ["test/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 300_000,
    pool: "forks",
    projects: [
      {
        extends: true,
        test: {
          name: "main",
          include: ["test/**/*.test.ts"],
          exclude: ["test/**/*.serial.test.ts", "**/node_modules/**", ...UNDER_GVISOR_ONLY],
          env: { EPISODE_RUNTIME: "runc" },
          fileParallelism: true,
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: "gvisor",
          include: [...UNDER_GVISOR_TOO, ...UNDER_GVISOR_ONLY],
          env: { EPISODE_RUNTIME: "runsc" },
          // No runsc on the engine: every test of these files fails with the fix, none skips.
          setupFiles: ["test/setup-gvisor.ts"],
          fileParallelism: true,
          maxWorkers: 2,
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        test: {
          name: "serial",
          include: ["test/**/*.serial.test.ts"],
          env: { EPISODE_RUNTIME: "runc" },
          fileParallelism: false,
          maxWorkers: 1,
          sequence: { groupOrder: 2 },
        },
      },
    ],
  },
});
