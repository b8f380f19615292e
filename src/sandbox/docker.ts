/**
 * The one place that talks to the Docker engine's client library. Everything here goes through
 * dockerode (the engine's HTTP API on its socket); nothing shells out to the docker CLI.
 */
import Docker from "dockerode";
import { type ErrorCode, InfraError, isAbortError, ValidatorError } from "../errors.js";

export type { Container, default as Docker } from "dockerode";

export function connectDocker(socketPath = "/var/run/docker.sock"): Docker {
  return boundEngineCalls(new Docker({ socketPath }));
}

/**
 * How long the engine may take to answer. A hung engine (a stuck overlay mount, a full disk, a
 * daemon under load) must end an episode as infra, never hold it forever.
 */
export interface EngineTimeouts {
  /** Every plain request (create, start, inspect, kill, remove, put archive, exec create/inspect, networks). */
  callMs: number;
  /** Reading a stream the caller bounds in bytes (an archive, the logs, an attach): the whole read. */
  copyMs: number;
}

export const DEFAULT_ENGINE_TIMEOUTS: EngineTimeouts = { callMs: 120_000, copyMs: 60_000 };

const configured = new WeakMap<object, EngineTimeouts>();

/** The timeouts of the client a container (or the client itself) belongs to. */
export function engineTimeouts(of: { modem: object }): EngineTimeouts {
  return configured.get(of.modem) ?? DEFAULT_ENGINE_TIMEOUTS;
}

interface DialOptions {
  path: string;
  method: string;
  abortSignal?: AbortSignal;
  isStream?: boolean;
  hijack?: boolean;
}
type Dial = (options: DialOptions, callback: (err: unknown, data: unknown) => void) => void;

/**
 * Give every plain request of this client a deadline (idempotent; `over` updates the figures).
 * Left alone: requests that carry their own signal, streams and hijacked connections (their
 * callers bound them: archives and logs by `copyMs`, exec and attach by the episode's deadlines)
 * and `wait`, which blocks for as long as the container runs, on purpose. A request that runs out
 * of time fails as `InfraError("docker_timeout")`.
 *
 * Every request with a signal (its own or the deadline) also fails when that signal fires, even
 * where docker-modem would never call back: for a plain request whose answer had begun (a `wait`:
 * the engine sends its headers at once, the body when the container exits) when the connection
 * died (the engine killed or restarted), docker-modem listens to the body's `data` and `end`
 * only, so neither the closed connection nor the abort ever settled it: an episode waited forever.
 */
export function boundEngineCalls(docker: Docker, over: Partial<EngineTimeouts> = {}): Docker {
  const modem = docker.modem as unknown as { dial: Dial };
  const installed = configured.has(modem);
  configured.set(modem, { ...(configured.get(modem) ?? DEFAULT_ENGINE_TIMEOUTS), ...over });
  if (installed) return docker;
  const dial = modem.dial.bind(modem);
  modem.dial = (options, callback) => {
    const own = !(options.abortSignal || options.isStream || options.hijack || /\/wait\?/.test(options.path));
    const ms = configured.get(modem)!.callMs;
    const signal = own ? AbortSignal.timeout(ms) : options.abortSignal;
    const what = `${options.method} ${options.path.replace(/\?$/, "")}`;
    let settled = false;
    const settle = (err: unknown, data: unknown) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener("abort", onAbort);
      if (err && own && signal?.aborted)
        return callback(
          new InfraError("docker_timeout", `${what}: the engine did not answer within ${ms} ms`, {
            cause: err,
          }),
          data,
        );
      callback(err, data);
    };
    const onAbort = () =>
      settle(Object.assign(new Error(`${what}: aborted`), { name: "AbortError", code: "ABORT_ERR" }), null);
    if (signal && !signal.aborted) signal.addEventListener("abort", onAbort, { once: true });
    dial(own ? { ...options, abortSignal: signal } : options, settle);
  };
  return docker;
}

/**
 * A signal for one call: fires after `ms` or with `outer`, whichever comes first; `timedOut()`
 * tells which. `clear()` once the call returned, so that a connection it handed over (an attach,
 * an exec stream) outlives the call's deadline.
 */
export function callDeadline(
  ms: number,
  outer?: AbortSignal,
): { signal: AbortSignal; timedOut(): boolean; clear(): void } {
  const ctl = new AbortController();
  let expired = false;
  const timer = setTimeout(() => {
    expired = true;
    ctl.abort(new DOMException(`no answer within ${ms} ms`, "TimeoutError"));
  }, ms);
  timer.unref();
  const onOuter = () => {
    clearTimeout(timer);
    ctl.abort(outer?.reason);
  };
  if (outer?.aborted) onOuter();
  else outer?.addEventListener("abort", onOuter, { once: true });
  return {
    signal: ctl.signal,
    timedOut: () => expired,
    clear: () => {
      clearTimeout(timer);
      outer?.removeEventListener("abort", onOuter);
    },
  };
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
export async function engine<T>(code: ErrorCode, what: string, fn: () => Promise<T>): Promise<T> {
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
