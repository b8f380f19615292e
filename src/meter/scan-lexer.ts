/**
 * The JSON tokens of a request body, read from its raw bytes as Python's `json.loads` reads them,
 * and counted as upstream's estimate counts the text Python's `json.dumps(..., ensure_ascii=False,
 * separators=(",", ":"))` prints for them: a string's characters after its escapes are decoded and
 * re-escaped as Python does, a number respelled as Python prints it (scan-number.ts), a literal as
 * written. The structure (objects, arrays, repeated keys) is scan.ts's.
 */
import { addFloatClasses } from "./scan-number.js";

export class ScanError extends Error {}

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

/** CPython refuses to convert longer integers (sys.int_info.default_max_str_digits). */
const MAX_INT_DIGITS = 4300;

/** 1 for the ASCII characters upstream counts as plain (letters, digits, space), else 0. */
const PLAIN_TABLE = new Uint8Array(128);
for (let c = 0; c < 128; c++) PLAIN_TABLE[c] = CLS[c] === PLAIN ? 1 : 0;

const hexVal = (c: number): number =>
  c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 87 : c >= 0x41 && c <= 0x46 ? c - 55 : -1;

const isDigit = (c: number | undefined) => c !== undefined && c >= 0x30 && c <= 0x39;

/** A reader of JSON tokens at `i` in `b`, adding their classes to its counters. */
export class Lexer {
  i = 0;
  plain = 0;
  dense = 0;
  nonAscii = 0;
  /** UTF-8 bytes above those counted one per plain/dense character. */
  high = 0;

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
  protected literal(word: string): void {
    const b = this.b;
    for (let k = 0; k < word.length; k++)
      if (b[this.i + k] !== word.charCodeAt(k)) this.fail("unexpected token");
    this.i += word.length;
    this.plain += word.length;
  }

  /** A number literal: an int prints as written, a float as Python's repr. */
  protected number(): void {
    const b = this.b;
    const start = this.i;
    let i = start;
    const negative = b[i] === 0x2d;
    if (negative) {
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
    else if (b[i]! >= 0x31 && b[i]! <= 0x39) while (isDigit(b[i])) i++;
    else {
      this.i = i;
      this.fail("unexpected token");
    }
    const intEnd = i;
    let fracStart = i;
    let fracEnd = i;
    let float = false;
    if (b[i] === 0x2e) {
      float = true;
      fracStart = ++i;
      if (!isDigit(b[i])) {
        this.i = i;
        this.fail("invalid number");
      }
      while (isDigit(b[i])) i++;
      fracEnd = i;
    }
    let exp = 0;
    if (b[i] === 0x65 || b[i] === 0x45) {
      float = true;
      i++;
      const expNegative = b[i] === 0x2d;
      if (expNegative || b[i] === 0x2b) i++;
      if (!isDigit(b[i])) {
        this.i = i;
        this.fail("invalid number");
      }
      // Saturated: beyond a billion the literal is zero or infinite anyway.
      for (; isDigit(b[i]); i++) exp = Math.min(1e9, exp * 10 + b[i]! - 0x30);
      if (expNegative) exp = -exp;
    }
    this.i = i;
    if (float) {
      addFloatClasses(this, b, start, i, negative, intStart, intEnd, fracStart, fracEnd, exp);
      return;
    }
    const intDigits = intEnd - intStart;
    if (intDigits > MAX_INT_DIGITS) this.fail("integer too long");
    // An int prints as written, except -0 (Python's int is 0).
    if (negative && intDigits === 1 && b[intStart] === 0x30) this.plain++;
    else {
      this.plain += intDigits;
      if (negative) this.dense++;
    }
  }
}
