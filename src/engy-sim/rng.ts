import { createHash } from "node:crypto";

/**
 * A uniform draw in [0, 1) from a key, never from a stateful generator: the same key gives the same
 * number in every process and every request. Callers key draws on (seed, scenario, attempt, decision)
 * and never on the model, so every model faces the same numbers ("common random numbers") and a
 * stronger model succeeds whenever a weaker one does.
 */
export function draw(...key: (string | number)[]): number {
  const h = createHash("sha256").update(key.join("\u001f"), "utf8").digest();
  // 52 bits fit a double exactly.
  const hi = h.readUInt32BE(0) >>> 12; // 20 bits
  const lo = h.readUInt32BE(4); // 32 bits
  return (hi * 2 ** 32 + lo) / 2 ** 52;
}

/** Deterministic pick from a non-empty list. */
export function pick<T>(items: readonly T[], ...key: (string | number)[]): T {
  const i = Math.floor(draw(...key) * items.length);
  return items[Math.min(i, items.length - 1)] as T;
}
