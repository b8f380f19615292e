#!/usr/bin/env node
/**
 * The container's HEALTHCHECK: GET /readyz of the daemon in this container, exit 0 on 200 and 1
 * otherwise, with one line saying why (Docker keeps it in `docker inspect` .State.Health.Log). A
 * degraded validator (chain or platform unreachable past DEGRADED_AFTER_S) is unhealthy to Docker:
 * monitoring built on the container's health must page then.
 * Standalone and light: no CLI, no database, only the config for STATUS_HOST/STATUS_PORT, or the URL
 * as the one argument (the image passes http://127.0.0.1:8080/readyz: the port it fixes).
 */
import { readFileSync } from "node:fs";
import { loadConfig } from "../config.js";

/**
 * Written by the image's entrypoint while it holds the daemon back for a set-up problem the operator
 * must fix on the host (a wallet it cannot read); removed once the problem is gone.
 */
export const SETUP_ERROR_FILE = "/run/trajrl/setup-error";

/** The entrypoint's reason for holding the daemon back, if any (first line). */
export function setupError(file = SETUP_ERROR_FILE): string | undefined {
  try {
    const text = readFileSync(file, "utf8").trim();
    return text ? text.split("\n")[0] : undefined;
  } catch {
    return undefined;
  }
}

/** Where the daemon's status server answers from inside its own network namespace. */
export function healthzUrl(host: string, port: number, path = "/readyz"): string {
  const h =
    host === "0.0.0.0" || host === "::" || host === ""
      ? "127.0.0.1"
      : host.includes(":")
        ? `[${host}]`
        : host;
  return `http://${h}:${port}${path}`;
}

export async function checkHealth(url: string, timeoutMs = 4000): Promise<{ ok: boolean; line: string }> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    const body = (await res.json().catch(() => null)) as {
      state?: string;
      reasons?: { message?: string }[];
    } | null;
    if (res.status === 200) return { ok: true, line: "healthy" };
    const reasons = body?.reasons?.map((r) => r.message).filter(Boolean) ?? [];
    const state = body?.state === "degraded" ? "degraded" : "unhealthy";
    return { ok: false, line: `${state} (${res.status}): ${reasons.join("; ") || "no reasons given"}` };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    return { ok: false, line: `no answer from ${url}: ${e.cause?.code ?? e.name}: ${e.message}` };
  }
}

const invokedDirectly =
  process.argv[1]?.endsWith("/healthcheck.js") || process.argv[1]?.endsWith("/healthcheck.ts");
if (invokedDirectly) {
  try {
    const arg = process.argv[2];
    const url =
      arg ??
      (() => {
        const config = loadConfig();
        return healthzUrl(config.status.host, config.status.port);
      })();
    const held = setupError();
    const r = held
      ? { ok: false, line: `unhealthy: the validator waits for a set-up fix: ${held}` }
      : await checkHealth(url);
    process.stdout.write(`${r.line}\n`);
    process.exitCode = r.ok ? 0 : 1;
  } catch (err) {
    process.stdout.write(`healthcheck failed: ${(err as Error).message}\n`);
    process.exitCode = 1;
  }
}
