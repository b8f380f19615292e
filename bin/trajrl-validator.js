#!/usr/bin/env node
// Runs the compiled CLI when present (npm run build, the Docker image); else the TypeScript via tsx.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const dist = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
let mod;
if (existsSync(dist)) {
  mod = await import(dist);
} else {
  const { tsImport } = await import("tsx/esm/api");
  mod = await tsImport(fileURLToPath(new URL("../src/cli.ts", import.meta.url)), import.meta.url);
}
mod.exitWhenDone(await mod.main(process.argv));
