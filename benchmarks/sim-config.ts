/**
 * The configuration every evaluation benchmark measures under: the built-in simulator (no key),
 * seed 11, the latency scale the run asked for, and a fresh data directory (no resume between runs).
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Config, loadConfig } from "../src/config.js";

export function simulatorConfig(
  dataDirPrefix: string,
  latencyScale: string | undefined,
  extra: Record<string, string> = {},
): { config: Config; dataDir: string } {
  const dataDir = mkdtempSync(join(tmpdir(), dataDirPrefix));
  const config = loadConfig({
    ...process.env,
    DATA_DIR: dataDir,
    LLM_API_KEY: "",
    ENGY_SIM_LATENCY_SCALE: latencyScale,
    ENGY_SIM_SEED: "11",
    ...extra,
  });
  return { config, dataDir };
}
