/**
 * A FIFO weighted semaphore: what bounds the meter's calls in flight per token and the request and
 * answer bytes it holds (per token and overall). Waiters are served in arrival order, so a large request is not
 * starved by small ones; a waiter can be cancelled (its client left).
 */

interface Waiter {
  weight: number;
  resolve: (ok: boolean) => void;
}

export class Gate {
  private used = 0;
  private readonly queue: Waiter[] = [];

  constructor(readonly limit: number) {}

  get inUse(): number {
    return this.used;
  }

  get waiting(): number {
    return this.queue.length;
  }

  /**
   * Take `weight` units (clamped to the limit, so one request can always pass alone). Resolves true
   * when taken, false when cancelled first. `cancel` registers the cancellation.
   */
  acquire(weight: number, cancel?: (onCancel: () => void) => void): Promise<boolean> {
    const w = Math.min(weight, this.limit);
    if (this.queue.length === 0 && this.used + w <= this.limit) {
      this.used += w;
      return Promise.resolve(true);
    }
    return new Promise<boolean>((resolve) => {
      const waiter: Waiter = { weight: w, resolve };
      this.queue.push(waiter);
      cancel?.(() => {
        const k = this.queue.indexOf(waiter);
        if (k < 0) return;
        this.queue.splice(k, 1);
        resolve(false);
        this.pump();
      });
    });
  }

  /** Take `weight` units now, or nothing: false when they do not fit or others wait (never queued). */
  tryAcquire(weight: number): boolean {
    if (this.queue.length > 0 || this.used + weight > this.limit) return false;
    this.used += weight;
    return true;
  }

  release(weight: number): void {
    this.used -= Math.min(weight, this.limit);
    if (this.used < 0) this.used = 0;
    this.pump();
  }

  private pump(): void {
    while (this.queue.length > 0) {
      const head = this.queue[0]!;
      if (this.used + head.weight > this.limit) return;
      this.queue.shift();
      this.used += head.weight;
      head.resolve(true);
    }
  }
}
