/**
 * One pass over a request body's raw bytes (no JSON.parse, no string of the body) that:
 *  - accepts exactly what Python's `json.loads` accepts for a UTF-8 object (NaN and Infinity
 *    included), else throws ScanError;
 *  - finds the spans of the top-level members, so the knobs the meter rewrites can be cut out and
 *    the rest forwarded byte for byte;
 *  - counts, per billed member, upstream's character classes of the text Python's
 *    `json.dumps(..., ensure_ascii=False, separators=(",", ":"))` would print for it (estimate.ts):
 *    whitespace between tokens dropped, escapes decoded and re-escaped as Python does, numbers
 *    respelled as Python prints them.
 * A repeated key inside a nested object makes the count inexact (Python keeps only the last value):
 * `exact` is then false and the caller uses the definition in estimate.ts instead.
 */
import { isUtf8 } from "node:buffer";
import { pyFloatRepr } from "../pack/index.js";
import { type CharClasses, zeroClasses } from "./estimate.js";

export class ScanError extends Error {}

export interface Member {
  key: string;
  /** [start, end): byte offsets from the key's opening quote to the end of the value. */
  start: number;
  end: number;
  valueStart: number;
  /** Classes of `"key":value` as Python prints it (billed members only; zero otherwise). */
  classes: CharClasses;
  /** The value's element count when it is an array, else -1. */
  elements: number;
}

export interface Scan {
  members: Member[];
  /** False when a nested object repeats a key: the counts are then not Python's. */
  exact: boolean;
}

// Byte classes of JSON string content.
const PLAIN = 0;
const DENSE = 1;
const CONT = 2;
const LEAD = 3;
const SPECIAL = 4; // '"', '\\', control characters
const CLS = new Uint8Array(256);
for (let c = 0; c < 256; c++) {
  if (c < 0x20 || c === 0x22 || c === 0x5c) CLS[c] = SPECIAL;
  else if (c >= 0xc0) CLS[c] = LEAD;
  else if (c >= 0x80) CLS[c] = CONT;
  else if ((c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x20)
    CLS[c] = PLAIN;
  else CLS[c] = DENSE;
}

/** Python's json.loads refuses deeper nesting (its recursion limit); so does the meter. */
const MAX_DEPTH = 900;
/** CPython refuses to convert longer integers (sys.int_info.default_max_str_digits). */
const MAX_INT_DIGITS = 4300;

/** 1 for the ASCII characters upstream counts as plain (letters, digits, space), else 0. */
const PLAIN_TABLE = new Uint8Array(128);
for (let c = 0; c < 128; c++) PLAIN_TABLE[c] = CLS[c] === PLAIN ? 1 : 0;

const hexVal = (c: number): number =>
  c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 87 : c >= 0x41 && c <= 0x46 ? c - 55 : -1;

const isPlainChar = (c: number) =>
  (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);

class Scanner {
  i = 0;
  plain = 0;
  dense = 0;
  nonAscii = 0;
  /** UTF-8 bytes above those counted one per plain/dense character. */
  high = 0;
  exact = true;
  depth = 0;
  /** Key spans of the objects being scanned (for repeated-key detection), and each object's base. */
  private readonly keyStart: number[] = [];
  private readonly keyEnd: number[] = [];

  constructor(readonly b: Buffer) {}

  fail(what: string): never {
    throw new ScanError(`${what} at byte ${this.i}`);
  }

  ws(): void {
    const b = this.b;
    let i = this.i;
    for (;;) {
      const c = b[i];
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
      i++;
    }
    this.i = i;
  }

  /** At an opening quote: past the closing one, counting. Returns true when it held an escape. */
  string(): boolean {
    const b = this.b;
    let i = this.i + 1;
    const start = i;
    // Raw bytes outside escapes: plain ASCII by table (dense is the rest), bytes ≥ 0x80 and lead bytes.
    let plain = 0;
    let high = 0;
    let lead = 0;
    // Escapes: their raw length, and what Python prints for them.
    let escRaw = 0;
    let eP = 0;
    let eD = 0;
    let eN = 0;
    let eH = 0;
    for (;;) {
      const c = b[i] as number;
      if (c > 0x5c) {
        if (c < 0x80) plain += PLAIN_TABLE[c]!;
        else {
          high++;
          if (c >= 0xc0) lead++;
        }
        i++;
      } else if (c > 0x22 && c !== 0x5c) {
        plain += PLAIN_TABLE[c]!;
        i++;
      } else if (c === 0x20) {
        plain++;
        i++;
      } else if (c === 0x21) i++;
      else if (c === 0x22) break;
      else if (c === 0x5c) {
        const e = b[i + 1];
        if (e === 0x22 || e === 0x5c) {
          eD += 2;
          escRaw += 2;
          i += 2;
        } else if (e === 0x2f) {
          eD++;
          escRaw += 2;
          i += 2;
        } else if (e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74) {
          eD++;
          eP++;
          escRaw += 2;
          i += 2;
        } else if (e === 0x75) {
          const u = this.hex4(i + 2);
          i += 6;
          escRaw += 6;
          if (u >= 0xd800 && u <= 0xdbff && b[i] === 0x5c && b[i + 1] === 0x75) {
            const lo = this.hex4(i + 2);
            if (lo >= 0xdc00 && lo <= 0xdfff) {
              // A surrogate pair: one code point, four UTF-8 bytes.
              i += 6;
              escRaw += 6;
              eN++;
              eH += 4;
              continue;
            }
          }
          if (u === 0x22 || u === 0x5c) eD += 2;
          else if (u === 0x08 || u === 0x09 || u === 0x0a || u === 0x0c || u === 0x0d) {
            eD++;
            eP++;
          } else if (u < 0x20) {
            eD++;
            eP += 5;
          } else if (u < 0x80) {
            if (PLAIN_TABLE[u] === 1) eP++;
            else eD++;
          } else {
            eN++;
            eH += u < 0x800 ? 2 : 3;
          }
        } else {
          this.i = i;
          this.fail("invalid escape");
        }
      } else {
        this.i = i;
        this.fail(c === undefined ? "unterminated string" : "control character in string");
      }
    }
    const rawAscii = i - start - high - escRaw;
    this.i = i + 1;
    this.plain += plain + eP;
    this.dense += 2 + (rawAscii - plain) + eD;
    this.nonAscii += lead + eN;
    this.high += high + eH;
    return escRaw > 0;
  }

  private hex4(at: number): number {
    const b = this.b;
    const a = hexVal(b[at] ?? 0x100);
    const c = hexVal(b[at + 1] ?? 0x100);
    const d = hexVal(b[at + 2] ?? 0x100);
    const e = hexVal(b[at + 3] ?? 0x100);
    if ((a | c | d | e) < 0) {
      this.i = at;
      this.fail("invalid \\u escape");
    }
    return (a << 12) | (c << 8) | (d << 4) | e;
  }

  /** A literal spelled out in `word` (ASCII), counted as plain (NaN, Infinity, true, …). */
  private literal(word: string): void {
    const b = this.b;
    for (let k = 0; k < word.length; k++)
      if (b[this.i + k] !== word.charCodeAt(k)) this.fail("unexpected token");
    this.i += word.length;
    this.plain += word.length;
  }

  private number(): void {
    const b = this.b;
    const start = this.i;
    let i = start;
    let float = false;
    if (b[i] === 0x2d) {
      i++;
      if (b[i] === 0x49) {
        // -Infinity
        this.i = i;
        this.literal("Infinity");
        this.dense++;
        return;
      }
    }
    const intStart = i;
    if (b[i] === 0x30) i++;
    else if (b[i]! >= 0x31 && b[i]! <= 0x39) while (b[i]! >= 0x30 && b[i]! <= 0x39) i++;
    else {
      this.i = i;
      this.fail("unexpected token");
    }
    const intDigits = i - intStart;
    if (b[i] === 0x2e) {
      float = true;
      i++;
      if (!(b[i]! >= 0x30 && b[i]! <= 0x39)) {
        this.i = i;
        this.fail("invalid number");
      }
      while (b[i]! >= 0x30 && b[i]! <= 0x39) i++;
    }
    if (b[i] === 0x65 || b[i] === 0x45) {
      float = true;
      i++;
      if (b[i] === 0x2b || b[i] === 0x2d) i++;
      if (!(b[i]! >= 0x30 && b[i]! <= 0x39)) {
        this.i = i;
        this.fail("invalid number");
      }
      while (b[i]! >= 0x30 && b[i]! <= 0x39) i++;
    }
    this.i = i;
    if (!float) {
      if (intDigits > MAX_INT_DIGITS) this.fail("integer too long");
      // An int prints as written, except -0 (Python's int is 0).
      const neg = intStart > start;
      if (neg && intDigits === 1 && b[intStart] === 0x30) this.plain++;
      else {
        this.plain += intDigits;
        if (neg) this.dense++;
      }
      return;
    }
    // A float prints as Python's repr (json: NaN/Infinity for the non-finite).
    const repr = pyFloatRepr(Number(b.toString("latin1", start, i)));
    for (let k = 0; k < repr.length; k++) {
      if (isPlainChar(repr.charCodeAt(k))) this.plain++;
      else this.dense++;
    }
  }

  value(): void {
    const b = this.b;
    const c = b[this.i];
    switch (c) {
      case 0x22:
        this.string();
        return;
      case 0x7b:
        this.object();
        return;
      case 0x5b:
        this.array();
        return;
      case 0x74:
        this.literal("true");
        return;
      case 0x66:
        this.literal("false");
        return;
      case 0x6e:
        this.literal("null");
        return;
      case 0x4e:
        this.literal("NaN");
        return;
      case 0x49:
        this.literal("Infinity");
        return;
      default:
        this.number();
    }
  }

  /** An array; returns its element count. */
  array(): number {
    if (++this.depth > MAX_DEPTH) this.fail("nested too deeply");
    const b = this.b;
    this.i++;
    this.dense += 2;
    this.ws();
    let n = 0;
    if (b[this.i] === 0x5d) {
      this.i++;
      this.depth--;
      return 0;
    }
    for (;;) {
      this.ws();
      this.value();
      n++;
      this.ws();
      const c = b[this.i++];
      if (c === 0x5d) break;
      if (c !== 0x2c) {
        this.i--;
        this.fail("expected ',' or ']'");
      }
      this.dense++;
    }
    this.depth--;
    return n;
  }

  object(): void {
    if (++this.depth > MAX_DEPTH) this.fail("nested too deeply");
    const b = this.b;
    const base = this.keyStart.length;
    this.i++;
    this.dense += 2;
    this.ws();
    if (b[this.i] === 0x7d) {
      this.i++;
      this.depth--;
      return;
    }
    for (;;) {
      this.ws();
      if (b[this.i] !== 0x22) this.fail("expected a key");
      const ks = this.i;
      const escaped = this.string();
      const ke = this.i;
      if (this.exact) this.noteKey(base, ks, ke, escaped);
      this.ws();
      if (b[this.i] !== 0x3a) this.fail("expected ':'");
      this.i++;
      this.dense++;
      this.ws();
      this.value();
      this.ws();
      const c = b[this.i++];
      if (c === 0x7d) break;
      if (c !== 0x2c) {
        this.i--;
        this.fail("expected ',' or '}'");
      }
      this.dense++;
    }
    this.keyStart.length = base;
    this.keyEnd.length = base;
    this.depth--;
  }

  /**
   * Remember a key of the object whose keys start at `base`; a repeat makes the count inexact. Keys
   * spelled with escapes are not compared byte for byte: a second key beside one is inexact too.
   */
  private noteKey(base: number, ks: number, ke: number, escaped: boolean): void {
    if (escaped && this.keyStart.length > base) {
      this.exact = false;
      return;
    }
    const b = this.b;
    const len = ke - ks;
    for (let k = base; k < this.keyStart.length; k++) {
      const s = this.keyStart[k]!;
      const e = this.keyEnd[k]!;
      if (e < 0) {
        this.exact = false;
        return;
      }
      if (e - s !== len) continue;
      let same = true;
      for (let j = 0; j < len; j++)
        if (b[s + j] !== b[ks + j]) {
          same = false;
          break;
        }
      if (same) {
        this.exact = false;
        return;
      }
    }
    this.keyStart.push(ks);
    this.keyEnd.push(escaped ? -1 : ke);
  }

  take(): CharClasses {
    const c: CharClasses = {
      plain: this.plain,
      dense: this.dense,
      nonAscii: this.nonAscii,
      bytes: this.plain + this.dense + this.high,
    };
    this.plain = 0;
    this.dense = 0;
    this.nonAscii = 0;
    this.high = 0;
    return c;
  }
}

/** Decode a top-level key's bytes (quotes included). */
function keyOf(b: Buffer, start: number, end: number): string {
  const raw = b.toString("utf8", start + 1, end - 1);
  return raw.indexOf("\\") < 0 ? raw : (JSON.parse(`"${raw}"`) as string);
}

/**
 * Scan a request body. `billed(key)` says which top-level members are counted. Throws ScanError
 * for anything Python's json.loads refuses, and for a top level that is not an object.
 */
export function scanBody(b: Buffer, billed: (key: string) => boolean): Scan {
  if (!isUtf8(b)) throw new ScanError("the body is not UTF-8");
  const sc = new Scanner(b);
  const members: Member[] = [];
  sc.ws();
  if (b[sc.i] !== 0x7b) sc.fail("the body is not a JSON object");
  sc.i++;
  sc.depth = 1;
  sc.ws();
  if (b[sc.i] === 0x7d) sc.i++;
  else {
    for (;;) {
      sc.ws();
      if (b[sc.i] !== 0x22) sc.fail("expected a key");
      const start = sc.i;
      sc.string();
      const key = keyOf(b, start, sc.i);
      sc.ws();
      if (b[sc.i] !== 0x3a) sc.fail("expected ':'");
      sc.i++;
      sc.ws();
      const valueStart = sc.i;
      let elements = -1;
      if (b[valueStart] === 0x5b) elements = sc.array();
      else sc.value();
      const end = sc.i;
      const counted = sc.take();
      let classes = zeroClasses();
      if (billed(key)) {
        // The key as Python prints it (a decoded key can differ from its spelling), ':' and the value.
        classes = counted;
        classes.dense++;
        classes.bytes++;
      }
      members.push({ key, start, end, valueStart, classes, elements });
      sc.ws();
      const c = b[sc.i++];
      if (c === 0x7d) break;
      if (c !== 0x2c) {
        sc.i--;
        sc.fail("expected ',' or '}'");
      }
    }
  }
  sc.ws();
  if (sc.i !== b.length) sc.fail("extra data");
  return { members, exact: sc.exact };
}
