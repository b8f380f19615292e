/**
 * One periodic loop of the daemon: runs a tick, sleeps, repeats. A failing tick is logged, counted
 * in LiveStatus and followed by a growing back-off; it never ends the loop or the process. Stopping
 * aborts the loop's signal (the tick decides what an abort means for its work) and waits for the
 * tick in progress to finish.
 */
import { toValidatorError } from "../errors.js";
import type { Logger } from "../log.js";
import type { LiveStatus } from "../status/index.js";

export interface LoopSpec {
  name: string;
  /** Pause between ticks when the tick does not ask for another. */
  intervalMs: number;
  /**
   * One unit of work. Returns the delay before the next tick (default: intervalMs). The signal
   * fires when the daemon stops; its reason is what the daemon stopped with (SHUTDOWN).
   */
  tick(signal: AbortSignal): Promise<number | undefined>;
  /** Delay after the n-th consecutive failed tick (n ≥ 1), given what it threw. Default: loopBackoffMs. */
  backoffMs?(failures: number, err: unknown): number;
  /** Run the first tick at once (default) or after one interval. */
  immediate?: boolean;
}

/** After n consecutive failures: interval × 2^(n−1), at least 1 s, at most max(interval, 5 min). */
export function loopBackoffMs(failures: number, intervalMs: number): number {
  const n = Math.max(1, Math.floor(failures));
  const cap = Math.max(intervalMs, 5 * 60_000);
  return Math.min(cap, Math.max(1_000, intervalMs * 2 ** Math.min(n - 1, 20)));
}

export class Loop {
  private readonly ctrl = new AbortController();
  private running: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  private woken = false;
  private failures = 0;

  constructor(
    private readonly spec: LoopSpec,
    private readonly live: LiveStatus,
    private readonly log: Logger,
  ) {
    live.registerLoop(spec.name, spec.intervalMs);
  }

  get name(): string {
    return this.spec.name;
  }

  get signal(): AbortSignal {
    return this.ctrl.signal;
  }

  /** Consecutive failed ticks so far. */
  get consecutiveFailures(): number {
    return this.failures;
  }

  start(): void {
    if (this.running) return;
    this.running = this.run();
  }

  /** Run the next tick now instead of after the pause (e.g. a verdict was just queued). */
  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  /** Abort the loop with `reason` and wait for the tick in progress (bounded by `graceMs`). */
  async stop(reason: unknown, graceMs = 60_000): Promise<"stopped" | "timeout"> {
    if (!this.ctrl.signal.aborted) this.ctrl.abort(reason);
    this.wakeUp?.();
    if (!this.running) return "stopped";
    let timer: NodeJS.Timeout | undefined;
    const r = await Promise.race([
      this.running.then(() => "stopped" as const),
      new Promise<"timeout">((resolve) => {
        timer = setTimeout(() => resolve("timeout"), graceMs);
      }),
    ]);
    clearTimeout(timer);
    if (r === "timeout") this.log.warn({ loop: this.spec.name, graceMs }, "daemon.loop.stop_timeout");
    return r;
  }

  private async run(): Promise<void> {
    const { signal } = this.ctrl;
    if (this.spec.immediate === false) await this.sleep(this.spec.intervalMs);
    while (!signal.aborted) {
      let delay: number;
      try {
        const asked = await this.spec.tick(signal);
        this.failures = 0;
        this.live.tick(this.spec.name);
        delay = asked ?? this.spec.intervalMs;
      } catch (err) {
        if (signal.aborted) break;
        this.failures++;
        const e = toValidatorError(err, "loop_tick_failed");
        this.live.tick(this.spec.name, { code: e.code, message: e.message });
        delay =
          this.spec.backoffMs?.(this.failures, err) ?? loopBackoffMs(this.failures, this.spec.intervalMs);
        // Our own bugs get a stack; expected operational failures (platform down, …) one line.
        const fields = { loop: this.spec.name, code: e.code, failures: this.failures, retryInMs: delay };
        if (e.code === "loop_tick_failed" || e.code === "internal_error")
          this.log.error({ ...fields, err }, "daemon.loop.tick_failed");
        else this.log.warn({ ...fields, err: e.message }, "daemon.loop.tick_failed");
      }
      await this.sleep(delay);
    }
  }

  private sleep(ms: number): Promise<void> {
    const { signal } = this.ctrl;
    if (signal.aborted) return Promise.resolve();
    if (this.woken) {
      this.woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        this.wakeUp = undefined;
        this.woken = false;
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      signal.addEventListener("abort", done, { once: true });
      this.wakeUp = done;
    });
  }
}
