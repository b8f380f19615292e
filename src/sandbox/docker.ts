/**
 * The one place that talks to the Docker engine's client library. Everything here goes through
 * dockerode (the engine's HTTP API on its socket); nothing shells out to the docker CLI.
 */
import Docker from "dockerode";
import { InfraError, isAbortError, ValidatorError } from "../errors.js";

export type { Container, default as Docker } from "dockerode";

export function connectDocker(socketPath = "/var/run/docker.sock"): Docker {
  return new Docker({ socketPath });
}

/** HTTP status of a dockerode/docker-modem error, when the engine answered. */
export function dockerStatus(err: unknown): number | undefined {
  const s = (err as { statusCode?: unknown } | null)?.statusCode;
  return typeof s === "number" ? s : undefined;
}

export function isNotFound(err: unknown): boolean {
  return dockerStatus(err) === 404;
}

/** The engine's own message (`{"message": ...}` body) rather than docker-modem's "(HTTP code 404) …" prefix. */
export function dockerMessage(err: unknown): string {
  const json = (err as { json?: { message?: unknown } } | null)?.json;
  if (json && typeof json.message === "string") return json.message;
  return err instanceof Error ? err.message : String(err);
}

/**
 * Run one engine call; any failure becomes an InfraError with a stable code (the engine, the disk
 * or our own request is at fault, never the miner). Aborts propagate unchanged so callers can tell.
 */
export async function engine<T>(code: string, what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isAbortError(err) || err instanceof ValidatorError) throw err;
    throw new InfraError(code, `${what}: ${dockerMessage(err)}`, {
      cause: err,
      detail: { status: dockerStatus(err) },
    });
  }
}

/** Ignore "not found" (already gone) and "conflict: removal in progress"; rethrow the rest. */
export async function ignoreGone(fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    const s = dockerStatus(err);
    if (s === 404) return;
    if (s === 409 && /already in progress|is not running|not running/i.test(dockerMessage(err))) return;
    throw err;
  }
}
