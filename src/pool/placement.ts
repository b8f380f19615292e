/**
 * Where the next episode goes (pure). The evaluation dispatches its episodes longest first; each
 * takes a slot on the engine with the most free slots among those that take episodes (ready, not
 * drained), so the longest episodes spread over the engines. A re-run avoids the engines its
 * scenario already failed on while another has a free slot.
 */

export interface Candidate {
  name: string;
  /** Ready and not drained. */
  placeable: boolean;
  /** Free slots; Infinity for an engine bounded by the evaluation's concurrency alone. */
  free: number;
}

export function pickEngine(candidates: readonly Candidate[], avoid: ReadonlySet<string>): string | undefined {
  const open = candidates.filter((c) => c.placeable && c.free > 0);
  if (!open.length) return undefined;
  const preferred = open.filter((c) => !avoid.has(c.name));
  const pool = preferred.length ? preferred : open;
  let best = pool[0]!;
  for (const c of pool) if (c.free > best.free) best = c;
  return best.name;
}

/** Slots summed over the engines that have a bound; undefined when one is bounded by the evaluation alone. */
export function totalSlots(slots: ReadonlyArray<number | undefined>): number | undefined {
  let n = 0;
  for (const s of slots) {
    if (s === undefined) return undefined;
    n += s;
  }
  return n;
}

/** The delay before the next probe of an engine that is down: 2 s doubling to 30 s. */
export function probeDelayMs(failures: number, baseMs = 2_000, maxMs = 30_000): number {
  return Math.min(maxMs, baseMs * 2 ** Math.max(0, Math.min(failures, 10)));
}
