/**
 * The host's python3 for running policies outside Docker. Debian's python3 with python3-aiohttp
 * and python3-httpx is what the sidecar image has; the PATH's python3 may be another one (pyenv)
 * without them, so /usr/bin/python3 is probed first and TRAJRL_PYTHON overrides both.
 */
import { spawnSync } from "node:child_process";
import { InfraError } from "../errors.js";

const PROBE = "import sys, aiohttp, httpx; print(sys.version.split()[0])";
const cache = new Map<string, string>();

export interface PythonInfo {
  /** The interpreter to spawn. */
  path: string;
  version: string;
}

function probe(candidate: string): string | undefined {
  const r = spawnSync(candidate, ["-c", PROBE], { encoding: "utf8", timeout: 20_000 });
  return r.status === 0 ? r.stdout.trim() : undefined;
}

/**
 * The first interpreter that imports aiohttp and httpx: `override` (TRAJRL_PYTHON) alone when
 * given, else /usr/bin/python3, then python3 on PATH. Throws InfraError `python_missing` with the
 * command that fixes it.
 */
export function findPython(override?: string): PythonInfo {
  const candidates = override ? [override] : ["/usr/bin/python3", "python3"];
  for (const c of candidates) {
    const cached = cache.get(c);
    if (cached) return { path: c, version: cached };
    const version = probe(c);
    if (version) {
      cache.set(c, version);
      return { path: c, version };
    }
  }
  throw new InfraError(
    "python_missing",
    override
      ? `TRAJRL_PYTHON=${override} cannot import aiohttp and httpx; install them for it, or unset TRAJRL_PYTHON`
      : "no python3 that imports aiohttp and httpx (tried /usr/bin/python3, python3); run: bash scripts/python-deps.sh",
    { retryable: false },
  );
}
