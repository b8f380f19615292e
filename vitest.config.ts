import { defineConfig } from "vitest/config";

/**
 * Two groups, run one after the other by one `vitest run`:
 *  - "main": every test file; Docker-backed suites share one engine on a small machine, so files
 *    run in parallel two at a time, each in its own fork so a crash cannot take the others down.
 *  - "serial": `*.serial.test.ts`, tests that disturb the whole machine (e.g. restart the Docker
 *    engine); they run alone, after the main group.
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
          exclude: ["test/**/*.serial.test.ts", "**/node_modules/**"],
          env: { EPISODE_RUNTIME: "runc" },
          fileParallelism: true,
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: "serial",
          include: ["test/**/*.serial.test.ts"],
          fileParallelism: false,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
