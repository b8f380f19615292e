#!/usr/bin/env node
/**
 * The container's HEALTHCHECK: GET /healthz of the daemon in this container, exit 0 on 200 and 1
 * otherwise, with one line saying why (Docker keeps it in `docker inspect` .State.Health.Log).
 * Standalone and light: no CLI, no database, only the config for STATUS_HOST/STATUS_PORT.
 */
import { loadConfig } from "../config.js";

/** Where the daemon's status server answers from inside its own network namespace. */
export function healthzUrl(host: string, port: number): string {
  const h =
    host === "0.0.0.0" || host === "::" || host === ""
      ? "127.0.0.1"
      : host.includes(":")
        ? `[${host}]`
        : host;
  return `http://${h}:${port}/healthz`;
}

export async function checkHealth(url: string, timeoutMs = 4000): Promise<{ ok: boolean; line: string }> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    const body = (await res.json().catch(() => null)) as { reasons?: { message?: string }[] } | null;
    if (res.status === 200) return { ok: true, line: "healthy" };
    const reasons = body?.reasons?.map((r) => r.message).filter(Boolean) ?? [];
    return { ok: false, line: `unhealthy (${res.status}): ${reasons.join("; ") || "no reasons given"}` };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    return { ok: false, line: `no answer from ${url}: ${e.cause?.code ?? e.name}: ${e.message}` };
  }
}

const invokedDirectly =
  process.argv[1]?.endsWith("/healthcheck.js") || process.argv[1]?.endsWith("/healthcheck.ts");
if (invokedDirectly) {
  try {
    const config = loadConfig();
    const r = await checkHealth(healthzUrl(config.status.host, config.status.port));
    process.stdout.write(`${r.line}\n`);
    process.exitCode = r.ok ? 0 : 1;
  } catch (err) {
    process.stdout.write(`healthcheck failed: ${(err as Error).message}\n`);
    process.exitCode = 1;
  }
}
