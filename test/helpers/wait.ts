/**
 * Waiting in tests, one home: poll a condition or a value until it holds, with a deadline that
 * names what was awaited. Deadlines only bound a failing test (no test asserts a duration).
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Poll `cond` every `everyMs` until it holds; throws naming `what` after `ms`. */
export async function until(
  cond: () => boolean | Promise<boolean>,
  ms = 20_000,
  what = "condition",
  everyMs = 25,
): Promise<void> {
  const t0 = performance.now();
  while (!(await cond())) {
    if (performance.now() - t0 > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** Poll `fn` every `everyMs` until it gives a value (not undefined); throws naming `what` after `ms`. */
export async function waitFor<T>(
  fn: () => T | undefined | Promise<T | undefined>,
  { ms = 20_000, what = "a value", everyMs = 25 }: { ms?: number; what?: string; everyMs?: number } = {},
): Promise<T> {
  const t0 = performance.now();
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (performance.now() - t0 > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/**
 * `until` with a file's own defaults: how long a condition may take there and how finely it is
 * polled (a loop test that must see each step polls every few ms).
 */
export function poller(defaults: { ms: number; everyMs: number }) {
  return (cond: () => boolean | Promise<boolean>, ms = defaults.ms, what = "condition") =>
    until(cond, ms, what, defaults.everyMs);
}

/**
 * Poll `cond` at most `tries` times, `everyMs` apart, without throwing: whether it held. For waits
 * whose end the test's own assertions then judge (a bounded settle, not a precondition).
 */
export async function pollUpTo(
  cond: () => boolean | Promise<boolean>,
  tries: number,
  everyMs: number,
): Promise<boolean> {
  for (let i = 0; i < tries; i++) {
    if (await cond()) return true;
    await sleep(everyMs);
  }
  return false;
}
