/**
 * Deadlines as AbortSignals, measured on the monotonic clock. A deadline is one signal that
 * every wait in its scope takes; `expired` tells a deadline apart from an outer abort.
 */
import { InfraError } from "../errors.js";

export interface Deadline {
  readonly signal: AbortSignal;
  /** true once the deadline itself fired (not the parent). */
  readonly expired: boolean;
  readonly startedAt: number;
  elapsedMs(): number;
  remainingMs(): number;
  /** Stop the timer (the scope ended early). */
  clear(): void;
}

/**
 * The reason a deadline's signal aborts with. Whoever waits on the deadline decides what its expiry
 * means (an agent timeout, a verifier timeout, …); one that escapes its scope is our own infra.
 * Named like the platform's own timeout (DOMException "TimeoutError").
 */
export class DeadlineExceeded extends InfraError {
  override readonly name = "TimeoutError";
  constructor(readonly ms: number) {
    super("deadline_exceeded", `deadline of ${ms} ms exceeded`, { detail: { ms } });
  }
}

/** A deadline `ms` from now (performance.now()), aborted early when `parent` aborts. */
export function deadline(ms: number, parent?: AbortSignal): Deadline {
  const ctl = new AbortController();
  const startedAt = performance.now();
  let expired = false;
  // libuv timers run on the monotonic clock: a wall-clock jump neither fires nor delays this.
  const timer = setTimeout(
    () => {
      expired = true;
      ctl.abort(new DeadlineExceeded(ms));
    },
    Math.max(0, ms),
  );
  const onParent = () => {
    clearTimeout(timer);
    ctl.abort(parent?.reason);
  };
  if (parent?.aborted) onParent();
  else parent?.addEventListener("abort", onParent, { once: true });
  return {
    signal: ctl.signal,
    get expired() {
      return expired;
    },
    startedAt,
    elapsedMs: () => performance.now() - startedAt,
    remainingMs: () => Math.max(0, ms - (performance.now() - startedAt)),
    clear: () => {
      clearTimeout(timer);
      parent?.removeEventListener("abort", onParent);
    },
  };
}
