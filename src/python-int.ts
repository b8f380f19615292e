/**
 * Python's int(x) on the values JSON and text files carry, for rules that must read a number the
 * way upstream's Python validator does: ints, floats truncated toward zero (not NaN or infinite),
 * booleans (1/0), and strings of an optionally signed base-10 integer with surrounding whitespace
 * and single underscores between digits. Anything else raises in Python: undefined here. Pure.
 */
export function pythonInt(v: unknown): number | undefined {
  if (typeof v === "boolean") return v ? 1 : 0;
  if (typeof v === "number") return Number.isFinite(v) ? Math.trunc(v) : undefined;
  if (typeof v !== "string") return undefined;
  const s = v.trim();
  if (!/^[+-]?\d+(_\d+)*$/.test(s)) return undefined;
  const n = Number(s.replace(/_/g, ""));
  return Number.isSafeInteger(n) ? n : undefined;
}
