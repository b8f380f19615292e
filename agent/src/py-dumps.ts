/** Python's `json.dumps(v, ensure_ascii=False)`, for `hermes sessions export` lines. */

/** A REAL column: printed as Python prints a float (`1.0`, `1e-05`), not as JS prints a number. */
export class PyFloat {
  constructor(readonly value: number) {}
}

export type PyJson = null | boolean | number | string | PyFloat | PyJson[] | { [key: string]: PyJson };

/** `repr(float)`: shortest round-trip digits, scientific when the exponent is < -4 or >= 16. */
export function pyFloat(x: number): string {
  if (Number.isNaN(x)) return "NaN";
  if (!Number.isFinite(x)) return x > 0 ? "Infinity" : "-Infinity";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const sign = x < 0 ? "-" : "";
  const [mant, expText] = Math.abs(x).toExponential().split("e") as [string, string];
  const digits = mant.replace(".", "");
  const exp = Number(expText);
  if (exp >= -4 && exp < 16) {
    const point = exp + 1;
    if (point <= 0) return `${sign}0.${"0".repeat(-point)}${digits}`;
    if (point >= digits.length) return `${sign}${digits}${"0".repeat(point - digits.length)}.0`;
    return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
  }
  const frac = digits.length > 1 ? `.${digits.slice(1)}` : "";
  return `${sign}${digits[0]}${frac}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
}

/** `json.dumps(v, ensure_ascii=False)`: separators ", " and ": ", keys in insertion order. */
export function pyJson(v: PyJson): string {
  if (v === null) return "null";
  if (v instanceof PyFloat) return pyFloat(v.value);
  if (typeof v === "boolean") return v ? "true" : "false";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : pyFloat(v);
  // JSON.stringify escapes exactly Python's set: " \ \b \f \n \r \t, other controls as \u00xx.
  if (typeof v === "string") return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(pyJson).join(", ")}]`;
  return `{${Object.entries(v)
    .map(([k, x]) => `${JSON.stringify(k)}: ${pyJson(x)}`)
    .join(", ")}}`;
}
