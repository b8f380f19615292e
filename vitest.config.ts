import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 300_000,
    // Docker-backed suites share one engine on a small machine; files run in parallel
    // but each stays in its own fork so a crash cannot take the others down.
    pool: "forks",
    fileParallelism: true,
    maxWorkers: 2,
  },
});
