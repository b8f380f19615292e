/**
 * One pass over a request's raw JSON text (already accepted by JSON.parse) that yields, without
 * re-serialising the body:
 *  - the spans of its top-level members, so the knobs the meter rewrites can be cut out and the
 *    rest forwarded byte for byte;
 *  - the character count of its billed members exactly as JSON.stringify would print them (the
 *    estimate's input), whatever the client's whitespace and escaping.
 * Strings are skipped with native searches; only structure and escapes are looked at in JS.
 * A duplicated top-level key makes the scan decline (`null`): the provider might read the other
 * copy than JSON.parse did, so such a body is re-serialised from the parsed object instead.
 */
import { type CharCount, countText } from "./estimate.js";

export interface Member {
  key: string;
  /** [start, end): from the key's opening quote to the end of the value. */
  start: number;
  end: number;
}

export interface RawScan {
  members: Member[];
  billed: CharCount;
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
/** Escapes JSON.stringify would print differently (shorter): \uXXXX and \/. */
const LOOSE_ESCAPE = /\\[u/]/;

/**
 * Walks values without looking inside strings (a string is skipped with indexOf). For the billed
 * count it tallies what the raw text has that JSON.stringify would not print: whitespace between
 * tokens, and number spellings other than the shortest.
 */
class Scanner {
  i = 0;
  /** Characters to subtract from a span's raw count: whitespace outside strings, number slack. */
  slack = 0;
  constructor(readonly s: string) {}

  ws(): void {
    const s = this.s;
    let i = this.i;
    for (;;) {
      const c = s.charCodeAt(i);
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
      i++;
    }
    this.slack += i - this.i;
    this.i = i;
  }

  /** At an opening quote: move past the closing one. */
  skipString(): void {
    const s = this.s;
    let p = this.i + 1;
    for (;;) {
      const q = s.indexOf('"', p);
      if (q < 0) throw new SyntaxError("unterminated string");
      let k = q - 1;
      while (s.charCodeAt(k) === 0x5c) k--;
      // An even run of backslashes before the quote: it is not escaped.
      if ((q - 1 - k) % 2 === 0) {
        this.i = q + 1;
        return;
      }
      p = q + 1;
    }
  }

  value(): void {
    const s = this.s;
    const ch = s.charCodeAt(this.i);
    if (ch === 0x22) {
      this.skipString();
      return;
    }
    if (ch === 0x7b || ch === 0x5b) {
      const close = ch === 0x7b ? 0x7d : 0x5d;
      this.i++;
      this.ws();
      if (s.charCodeAt(this.i) === close) {
        this.i++;
        return;
      }
      for (;;) {
        if (close === 0x7d) {
          this.skipString();
          this.ws();
          this.i++; // ':'
          this.ws();
        }
        this.value();
        this.ws();
        if (s.charCodeAt(this.i++) === close) return;
        this.ws();
      }
    }
    if (ch === 0x74 || ch === 0x6e) {
      this.i += 4; // true, null
      return;
    }
    if (ch === 0x66) {
      this.i += 5; // false
      return;
    }
    NUMBER.lastIndex = this.i;
    const m = NUMBER.exec(s);
    if (m === null) throw new SyntaxError(`unexpected character at ${this.i}`);
    const tok = m[0];
    this.i += tok.length;
    const x = Number(tok);
    // JSON.stringify prints the shortest round-trip form (and null for an overflow to Infinity).
    this.slack += tok.length - (Number.isFinite(x) ? String(x).length : 4);
  }
}

/** JSON.stringify's count of one member `"key":value`, from its raw text and the scan's slack. */
function memberCount(text: string, start: number, end: number, slack: number): CharCount {
  const span = text.slice(start, end);
  if (LOOSE_ESCAPE.test(span)) {
    // \uXXXX or \/ somewhere: decode and measure the canonical text instead.
    return countText(JSON.stringify(JSON.parse(`{${span}}`)).slice(1, -1));
  }
  const c = countText(span);
  c.ascii -= slack;
  return c;
}

/**
 * Scan a JSON object's text. `billed(key)` says which members count for the estimate. Returns null
 * when a top-level key repeats.
 */
export function scanRequest(text: string, billed: (key: string) => boolean): RawScan | null {
  const sc = new Scanner(text);
  const members: Member[] = [];
  const count: CharCount = { ascii: 2, nonAscii: 0 };
  const seen = new Set<string>();
  let billedMembers = 0;
  sc.ws();
  if (text.charCodeAt(sc.i) !== 0x7b) throw new SyntaxError("not an object");
  sc.i++;
  sc.ws();
  if (text.charCodeAt(sc.i) === 0x7d) return { members, billed: count };
  for (;;) {
    sc.ws();
    const start = sc.i;
    sc.skipString();
    const rawKey = text.slice(start + 1, sc.i - 1);
    const key = rawKey.indexOf("\\") < 0 ? rawKey : (JSON.parse(`"${rawKey}"`) as string);
    if (seen.has(key)) return null;
    seen.add(key);
    sc.slack = 0;
    sc.ws();
    sc.i++; // ':'
    sc.ws();
    sc.value();
    const end = sc.i;
    members.push({ key, start, end });
    if (billed(key)) {
      const c = memberCount(text, start, end, sc.slack);
      if (billedMembers > 0) count.ascii += 1; // the comma between billed members
      count.ascii += c.ascii;
      count.nonAscii += c.nonAscii;
      billedMembers++;
    }
    sc.ws();
    if (text.charCodeAt(sc.i++) === 0x7d) return { members, billed: count };
  }
}

/** The object's text without the members named in `drop`, with `head` (member text) in front. */
export function spliceMembers(
  text: string,
  members: readonly Member[],
  drop: ReadonlySet<string>,
  head: string,
): string {
  const parts: string[] = [head];
  for (const m of members) if (!drop.has(m.key)) parts.push(text.slice(m.start, m.end));
  return `{${parts.join(",")}}`;
}
