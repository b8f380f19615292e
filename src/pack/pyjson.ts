/**
 * Python-compatible JSON: parse exactly what CPython's `json.loads` accepts and serialize exactly
 * what `json.dumps(value, sort_keys=True)` prints (default separators, ensure_ascii, allow_nan).
 *
 * Why not JSON.parse/JSON.stringify: they lose the int/float distinction (`1.0` → `1`), big ints,
 * and print non-ASCII raw; pack hashes are computed by Python validators over their re-serialization,
 * so ours must be byte-identical or we reject valid packs.
 */
import { InputError } from "../errors.js";

/** A Python float, kept apart from ints so `1.0` stays `1.0`. */
export class PyFloat {
  constructor(readonly value: number) {}
}

/** Python dict, in insertion order; a duplicate key keeps its first position and the last value. */
export type PyObject = Map<string, PyValue>;
export type PyValue = null | boolean | string | bigint | PyFloat | PyValue[] | PyObject;

/** Messages follow Python's: "Expecting value: line 1 column 7 (char 6)". */
export class PyJsonError extends InputError {
  constructor(
    message: string,
    readonly position: number,
    text = "",
  ) {
    const before = text.slice(0, position);
    const line = before.split("\n").length;
    const column = position - before.lastIndexOf("\n");
    super("json_invalid", `${message}: line ${line} column ${column} (char ${position})`, {
      detail: { position },
    });
    this.name = "PyJsonError";
  }
}

/** CPython 3.11 refuses to convert ints longer than this (sys.int_info.default_max_str_digits). */
const MAX_INT_DIGITS = 4300;

const WS = new Set([0x20, 0x09, 0x0a, 0x0d]);

/** Parse a string exactly as `json.loads(text)` does (strict mode, NaN/Infinity accepted). */
export function pyJsonParse(text: string): PyValue {
  const p = new PyJsonParser(text);
  if (text.charCodeAt(0) === 0xfeff) p.fail("Unexpected UTF-8 BOM (decode using utf-8-sig)", 0);
  const value = p.value(0);
  p.skipWs();
  if (p.i !== text.length) p.fail("Extra data");
  return value;
}

const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?/y;

/** The keywords `json.loads` reads, tried in this order at a value's start. */
const KEYWORDS: readonly [string, () => PyValue][] = [
  ["null", () => null],
  ["true", () => true],
  ["false", () => false],
  ["NaN", () => new PyFloat(Number.NaN)],
  ["Infinity", () => new PyFloat(Number.POSITIVE_INFINITY)],
  ["-Infinity", () => new PyFloat(Number.NEGATIVE_INFINITY)],
];

/** The one-character escapes after a backslash (`\u` is read apart). */
const ESCAPES = new Map([
  ['"', '"'],
  ["\\", "\\"],
  ["/", "/"],
  ["b", "\b"],
  ["f", "\f"],
  ["n", "\n"],
  ["r", "\r"],
  ["t", "\t"],
]);

/** A recursive-descent reader over `text`, `i` its position; each failure is Python's message. */
class PyJsonParser {
  i = 0;
  private readonly n: number;

  constructor(private readonly text: string) {
    this.n = text.length;
  }

  skipWs(): void {
    while (this.i < this.n && WS.has(this.text.charCodeAt(this.i))) this.i++;
  }

  fail(msg: string, at = this.i): never {
    throw new PyJsonError(msg, at, this.text);
  }

  value(depth: number): PyValue {
    if (depth > 1000) this.fail("maximum nesting depth exceeded");
    this.skipWs();
    if (this.i >= this.n) this.fail("Expecting value");
    const c = this.text[this.i];
    if (c === "{") return this.object(depth);
    if (c === "[") return this.array(depth);
    if (c === '"') return this.string();
    for (const [word, make] of KEYWORDS) {
      if (this.text.startsWith(word, this.i)) {
        this.i += word.length;
        return make();
      }
    }
    return this.number();
  }

  /** An int (a bigint, at most 4300 digits) or a float, by the lexeme's shape. */
  private number(): PyValue {
    NUMBER.lastIndex = this.i;
    const m = NUMBER.exec(this.text);
    if (!m) return this.fail("Expecting value");
    const lexeme = m[0];
    const start = this.i;
    this.i += lexeme.length;
    if (m[1] === undefined && m[2] === undefined) {
      const digits = lexeme.startsWith("-") ? lexeme.length - 1 : lexeme.length;
      if (digits > MAX_INT_DIGITS) this.fail("Exceeds the limit for integer string conversion", start);
      return BigInt(lexeme);
    }
    return new PyFloat(Number(lexeme));
  }

  /** A string from its opening quote; chunks without escapes are copied whole. */
  string(): string {
    const start = this.i;
    this.i++;
    let out = "";
    let chunkStart = this.i;
    while (true) {
      if (this.i >= this.n) this.fail("Unterminated string starting at", start);
      const c = this.text.charCodeAt(this.i);
      if (c === 0x22) {
        out += this.text.slice(chunkStart, this.i);
        this.i++;
        return out;
      }
      if (c < 0x20) this.fail("Invalid control character at");
      if (c === 0x5c) {
        out += this.text.slice(chunkStart, this.i);
        out += this.escape();
        chunkStart = this.i;
        continue;
      }
      this.i++;
    }
  }

  /** The escape at `i` (a backslash), read and passed. */
  private escape(): string {
    const e = this.text[this.i + 1];
    let out: string;
    if (e === "u") {
      const hex = this.text.slice(this.i + 2, this.i + 6);
      if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail("Invalid \\uXXXX escape");
      // Code units are kept as-is: a high+low pair forms the astral character, exactly as Python joins them.
      out = String.fromCharCode(Number.parseInt(hex, 16));
      this.i += 4;
    } else {
      const simple = e === undefined ? undefined : ESCAPES.get(e);
      if (simple === undefined) this.fail("Invalid \\escape");
      out = simple;
    }
    this.i += 2;
    return out;
  }

  private array(depth: number): PyValue[] {
    this.i++;
    const arr: PyValue[] = [];
    this.skipWs();
    if (this.text[this.i] === "]") {
      this.i++;
      return arr;
    }
    while (true) {
      arr.push(this.value(depth + 1));
      this.skipWs();
      if (this.text[this.i] === ",") {
        this.i++;
        continue;
      }
      if (this.text[this.i] === "]") {
        this.i++;
        return arr;
      }
      this.fail("Expecting ',' delimiter");
    }
  }

  private object(depth: number): PyObject {
    this.i++;
    const obj: PyObject = new Map();
    this.skipWs();
    if (this.text[this.i] === "}") {
      this.i++;
      return obj;
    }
    while (true) {
      this.skipWs();
      if (this.text[this.i] !== '"') this.fail("Expecting property name enclosed in double quotes");
      const key = this.string();
      this.skipWs();
      if (this.text[this.i] !== ":") this.fail("Expecting ':' delimiter");
      this.i++;
      obj.set(key, this.value(depth + 1));
      this.skipWs();
      if (this.text[this.i] === ",") {
        this.i++;
        this.skipWs();
        if (this.text[this.i] !== '"') this.fail("Expecting property name enclosed in double quotes");
        continue;
      }
      if (this.text[this.i] === "}") {
        this.i++;
        return obj;
      }
      this.fail("Expecting ',' delimiter");
    }
  }
}

/**
 * Parse bytes as upstream's fetcher does: httpx `resp.text` decodes UTF-8 with errors="replace"
 * (each undecodable sequence → U+FFFD, the same substitutions as WHATWG's decoder), a BOM kept
 * (json.loads then refuses it), then `json.loads`.
 */
export function pyJsonParseBytes(bytes: Uint8Array): PyValue {
  return pyJsonParse(new TextDecoder("utf-8", { fatal: false, ignoreBOM: true }).decode(bytes));
}

const SHORT_ESCAPES: Record<number, string> = {
  34: '\\"',
  92: "\\\\",
  10: "\\n",
  13: "\\r",
  9: "\\t",
  8: "\\b",
  12: "\\f",
};

/** `json.dumps(s)` with ensure_ascii: everything outside space..~ is escaped, per UTF-16 code unit. */
export function pyDumpString(s: string): string {
  let out = '"';
  let chunkStart = 0;
  for (let k = 0; k < s.length; k++) {
    const c = s.charCodeAt(k);
    if (c >= 0x20 && c <= 0x7e && c !== 0x22 && c !== 0x5c) continue;
    out += s.slice(chunkStart, k);
    out += SHORT_ESCAPES[c] ?? `\\u${c.toString(16).padStart(4, "0")}`;
    chunkStart = k + 1;
  }
  return `${out + s.slice(chunkStart)}"`;
}

/** `repr(float)`: shortest round-trip digits; scientific when the exponent is < -4 or >= 16. */
export function pyFloatRepr(x: number): string {
  if (Number.isNaN(x)) return "NaN";
  if (x === Number.POSITIVE_INFINITY) return "Infinity";
  if (x === Number.NEGATIVE_INFINITY) return "-Infinity";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const sign = x < 0 ? "-" : "";
  // toExponential() without an argument gives the shortest digits that round-trip.
  const [mant, expPart] = Math.abs(x).toExponential().split("e") as [string, string];
  const digits = mant.replace(".", "");
  const exp = Number(expPart); // x = d.ddd × 10^exp
  const decpt = exp + 1; // x = 0.dddd × 10^decpt
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) return `${sign}0.${"0".repeat(-decpt)}${digits}`;
    if (decpt >= digits.length) return `${sign}${digits}${"0".repeat(decpt - digits.length)}.0`;
    return `${sign}${digits.slice(0, decpt)}.${digits.slice(decpt)}`;
  }
  const frac = digits.length > 1 ? `.${digits.slice(1)}` : "";
  const e = exp < 0 ? `-${String(-exp).padStart(2, "0")}` : `+${String(exp).padStart(2, "0")}`;
  return `${sign}${digits[0]}${frac}e${e}`;
}

/** Compare by Unicode code point, as Python sorts str (JS `<` compares UTF-16 units). */
export function compareCodePoints(a: string, b: string): number {
  let ia = 0;
  let ib = 0;
  while (ia < a.length && ib < b.length) {
    const ca = a.codePointAt(ia)!;
    const cb = b.codePointAt(ib)!;
    if (ca !== cb) return ca - cb;
    ia += ca > 0xffff ? 2 : 1;
    ib += cb > 0xffff ? 2 : 1;
  }
  return a.length - ia - (b.length - ib);
}

/** `json.dumps(value, sort_keys=True)`. */
export function pyJsonDumps(value: PyValue): string {
  const parts: string[] = [];
  const walk = (v: PyValue): void => {
    if (v === null) parts.push("null");
    else if (v === true) parts.push("true");
    else if (v === false) parts.push("false");
    else if (typeof v === "string") parts.push(pyDumpString(v));
    else if (typeof v === "bigint") parts.push(v.toString());
    else if (v instanceof PyFloat) parts.push(pyFloatRepr(v.value));
    else if (Array.isArray(v)) {
      parts.push("[");
      v.forEach((item, k) => {
        if (k > 0) parts.push(", ");
        walk(item);
      });
      parts.push("]");
    } else {
      const keys = [...v.keys()].sort(compareCodePoints);
      parts.push("{");
      keys.forEach((key, k) => {
        if (k > 0) parts.push(", ");
        parts.push(pyDumpString(key), ": ");
        walk(v.get(key)!);
      });
      parts.push("}");
    }
  };
  walk(value);
  return parts.join("");
}

/**
 * Lift a plain JS value (from our own code, e.g. a pack we built) into a PyValue.
 * Integral numbers become ints, others floats, as Python would load their JSON.stringify output.
 */
export function fromJs(value: unknown): PyValue {
  if (value === null || typeof value === "boolean" || typeof value === "string") return value;
  if (typeof value === "bigint") return value;
  if (typeof value === "number") return Number.isInteger(value) ? BigInt(value) : new PyFloat(value);
  if (Array.isArray(value)) return value.map(fromJs);
  if (value instanceof PyFloat || value instanceof Map) return value as PyValue;
  if (typeof value === "object") {
    const m: PyObject = new Map();
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      if (v !== undefined) m.set(k, fromJs(v));
    }
    return m;
  }
  throw new TypeError(`cannot represent ${typeof value} as JSON`);
}

/** Python's type name of a value, for rejection messages that match the Python validator's. */
export function pyTypeName(v: PyValue | undefined): string {
  if (v === undefined || v === null) return "NoneType";
  if (typeof v === "boolean") return "bool";
  if (typeof v === "string") return "str";
  if (typeof v === "bigint") return "int";
  if (v instanceof PyFloat) return "float";
  if (Array.isArray(v)) return "list";
  return "dict";
}

/** Python's `str.isspace()` set, so "blank" means what it means to the Python validator. */
const PY_SPACE = /^[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/;
export function isPyBlank(s: string): boolean {
  return PY_SPACE.test(s);
}

/**
 * One character `int()` strips: ASCII space, \t \n \v \f \r, and non-ASCII `str.isspace()` ones
 * (CPython maps those to a space first and then skips ASCII whitespace only, so \x1c–\x1f stay).
 */
const PY_SPACE_CHAR = "[\\t\\n\\v\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";
const PY_INT_TEXT = new RegExp(`^${PY_SPACE_CHAR}*([+-]?)(\\p{Nd}+(?:_\\p{Nd}+)*)${PY_SPACE_CHAR}*$`, "u");

/** The value of a Unicode decimal digit (Nd digits come in runs of ten, some runs adjacent). */
function digitValue(ch: string): number {
  let zero = ch.codePointAt(0)!;
  while (/\p{Nd}/u.test(String.fromCodePoint(zero - 1))) zero--;
  return (ch.codePointAt(0)! - zero) % 10;
}

/**
 * Python's `int(value)` over a JSON value, or null where Python raises (TypeError, ValueError) or
 * the result is not a safe integer: ints as they are, floats truncated toward zero, `true`/`false`
 * as 1/0, and text as `int()` reads it (surrounding whitespace, a sign, `_` between digits, any
 * Unicode decimal digits; not `1.5`, `1e3` or `0x10`). null and missing are null.
 */
export function pyInt(value: unknown): number | null {
  let n: number;
  if (typeof value === "boolean") n = value ? 1 : 0;
  else if (typeof value === "bigint") n = Number(value);
  else if (typeof value === "number") n = Math.trunc(value);
  else if (value instanceof PyFloat) n = Math.trunc(value.value);
  else if (typeof value === "string") {
    const m = PY_INT_TEXT.exec(value);
    if (!m) return null;
    const digits = [...m[2]!.replaceAll("_", "")].map(digitValue).join("");
    n = Number(`${m[1]}${digits}`);
  } else return null;
  return Number.isSafeInteger(n) ? (Object.is(n, -0) ? 0 : n) : null;
}
