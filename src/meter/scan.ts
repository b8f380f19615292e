/**
 * One pass over a request body's raw bytes (no JSON.parse of the body, no string of it) that:
 *  - accepts exactly what Python's `json.loads` accepts for a UTF-8 object (NaN and Infinity
 *    included), else throws ScanError;
 *  - finds the spans of the top-level members, so the knobs the meter rewrites can be cut out and
 *    the rest forwarded byte for byte;
 *  - counts, per billed member, upstream's character classes of the text Python's
 *    `json.dumps(..., ensure_ascii=False, separators=(",", ":"))` would print for it (estimate.ts;
 *    the tokens are scan-lexer.ts's), a key repeated inside an object once, with its last value, as
 *    a Python dict keeps it (the earlier member's count is taken back);
 *  - checks what a provider bills or fetches beyond the body's bytes: a message's content parts are
 *    text, or images given inline (`data:` URLs, counted for the real-spend bound), and every tool
 *    is a function (README "Fields the meter rewrites").
 * Linear in the body's length: repeated keys are found by comparing bytes while an object is small,
 * through a Map once it is not.
 */
import { isUtf8 } from "node:buffer";
import { type CharClasses, zeroClasses } from "./estimate.js";
import { Lexer, ScanError } from "./scan-lexer.js";

export { ScanError } from "./scan-lexer.js";

/** A top-level member: its key and byte spans. */
export interface Member {
  /** The decoded key ("" for a key longer than MAX_KEY_CHARS: no knob is named so). */
  key: string;
  /** [start, end): byte offsets from the key's opening quote to the end of the value. */
  start: number;
  end: number;
  valueStart: number;
}

/** What the meter needs from a body's bytes (structured-cloneable: it may come from a worker). */
export interface RequestScan {
  /** The last occurrence of each top-level key, in order of first appearance (as a Python dict). */
  members: Member[];
  /** Upstream's classes of the billed members as Python prints them. */
  classes: CharClasses;
  /** Elements of the `messages` array (-1 when it is not an array). */
  messages: number;
  /** UTF-8 bytes of the `tools` member as Python prints it. */
  toolsBytes: number;
  /** Inline images among the content parts. */
  images: number;
}

/** Python's json.loads refuses deeper nesting (its recursion limit); so does the meter. */
const MAX_DEPTH = 900;
/** Top-level members of a request: a chat request has a few dozen knobs at most. */
export const MAX_MEMBERS = 1024;
/** Keys longer than this are no knob: their members are forwarded unread. */
const MAX_KEY_CHARS = 64;
/** Keys of an object compared byte for byte up to this count, then through a Map. */
const SMALL_OBJECT = 8;

// Where a value sits in a chat request (for the checks on content parts and tools): arrays 1–3,
// objects 4–7; a member whose value is noted: a part's or tool's type, an image's URL.
const NONE = 0;
const MESSAGES = 1;
const CONTENT = 2;
const TOOLS = 3;
const MESSAGE = 4;
const PART = 5;
const IMAGE = 6;
const TOOL = 7;
const NOTE_TYPE = -1;
const NOTE_URL = -2;
/** The element context of an array context. */
const ELEMENT = [NONE, MESSAGE, PART, TOOL];

class Scanner extends Lexer {
  depth = 0;
  images = 0;
  /**
   * The members of the objects being scanned: a stack of `top` records, each object's from its base
   * index (the arrays are never shrunk: the top moves).
   */
  private top = 0;
  private readonly kStart: number[] = [];
  private readonly kEnd: number[] = [];
  private readonly kEsc: boolean[] = [];
  /** Each member's contribution to the counts (key, colon and value), to take back on a repeat. */
  private readonly kPlain: number[] = [];
  private readonly kDense: number[] = [];
  private readonly kNonAscii: number[] = [];
  private readonly kHigh: number[] = [];
  /** The content part or tool being scanned: its type, and whether its image is inline. */
  private partType: string | undefined;
  private partInline = false;

  /** A value; `ctx` is what it is in a chat request when it has the expected shape. */
  value(ctx: number): void {
    switch (this.b[this.i]) {
      case 0x22:
        this.string();
        return;
      case 0x7b:
        this.object(ctx >= MESSAGE ? ctx : NONE);
        return;
      case 0x5b:
        this.array(ctx >= MESSAGES && ctx <= TOOLS ? ctx : NONE);
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
  array(ctx: number): number {
    if (++this.depth > MAX_DEPTH) this.fail("nested too deeply");
    const b = this.b;
    const element = ELEMENT[ctx]!;
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
      this.value(element);
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

  /**
   * An object. A repeated key keeps one member, the last (Python's dict): the earlier member's
   * count and one comma are taken back, and its record stands for the new one.
   */
  object(ctx: number): void {
    if (++this.depth > MAX_DEPTH) this.fail("nested too deeply");
    const b = this.b;
    const base = this.top;
    let keys: Map<string, number> | null = null;
    if (ctx === PART || ctx === TOOL) {
      this.partType = undefined;
      this.partInline = false;
    }
    this.i++;
    this.dense += 2;
    this.ws();
    if (b[this.i] === 0x7d) this.i++;
    else
      for (;;) {
        this.ws();
        if (b[this.i] !== 0x22) this.fail("expected a key");
        const ks = this.i;
        const p0 = this.plain;
        const d0 = this.dense;
        const n0 = this.nonAscii;
        const h0 = this.high;
        const escaped = this.string();
        const ke = this.i;
        let at = -1;
        if (keys === null && (escaped || this.top - base >= SMALL_OBJECT)) keys = this.keyMap(base);
        if (keys === null) at = this.findKey(base, ks, ke);
        else {
          const name = this.keyText(ks, ke, escaped);
          at = keys.get(name) ?? -1;
          if (at < 0) keys.set(name, this.top);
        }
        this.ws();
        if (b[this.i] !== 0x3a) this.fail("expected ':'");
        this.i++;
        this.dense++;
        this.ws();
        const vs = this.i;
        const child = ctx === NONE ? NONE : this.memberOf(ctx, ks, ke, escaped);
        this.value(child);
        if (child < 0) this.note(child, vs);
        this.record(at, ks, ke, escaped, p0, d0, n0, h0);
        this.ws();
        const c = b[this.i++];
        if (c === 0x7d) break;
        if (c !== 0x2c) {
          this.i--;
          this.fail("expected ',' or '}'");
        }
        this.dense++;
      }
    this.top = base;
    this.depth--;
    if (ctx === PART || ctx === TOOL) this.checkTyped(ctx);
  }

  /** Book a member's contribution; on a repeat (`at` ≥ 0) take the earlier one back first. */
  private record(
    at: number,
    ks: number,
    ke: number,
    escaped: boolean,
    p0: number,
    d0: number,
    n0: number,
    h0: number,
  ): void {
    const dp = this.plain - p0;
    const dd = this.dense - d0;
    const dn = this.nonAscii - n0;
    const dh = this.high - h0;
    if (at >= 0) {
      this.plain -= this.kPlain[at]!;
      this.dense -= this.kDense[at]! + 1; // and one comma fewer
      this.nonAscii -= this.kNonAscii[at]!;
      this.high -= this.kHigh[at]!;
    } else {
      at = this.top++;
      this.kStart[at] = ks;
      this.kEnd[at] = ke;
      this.kEsc[at] = escaped;
    }
    this.kPlain[at] = dp;
    this.kDense[at] = dd;
    this.kNonAscii[at] = dn;
    this.kHigh[at] = dh;
  }

  /** The index of an earlier member of this object with the same key bytes (no escapes), or -1. */
  private findKey(base: number, ks: number, ke: number): number {
    const b = this.b;
    const len = ke - ks;
    for (let k = base; k < this.top; k++) {
      const s = this.kStart[k]!;
      if (this.kEnd[k]! - s !== len) continue;
      let j = 1;
      while (j < len - 1 && b[s + j] === b[ks + j]) j++;
      if (j === len - 1) return k;
    }
    return -1;
  }

  /** A key as Python holds it (escapes decoded). */
  private keyText(ks: number, ke: number, escaped: boolean): string {
    return escaped
      ? (JSON.parse(this.b.toString("utf8", ks, ke)) as string)
      : this.b.toString("utf8", ks + 1, ke - 1);
  }

  /** This object's keys so far, by decoded text. */
  private keyMap(base: number): Map<string, number> {
    const m = new Map<string, number>();
    for (let k = base; k < this.top; k++)
      m.set(this.keyText(this.kStart[k]!, this.kEnd[k]!, this.kEsc[k]!), k);
    return m;
  }

  /** The context of a member's value inside an object of context `ctx` (or what to note of it). */
  private memberOf(ctx: number, ks: number, ke: number, escaped: boolean): number {
    if (ctx === MESSAGE) return this.keyIs(ks, ke, escaped, "content") ? CONTENT : NONE;
    if (ctx === PART) {
      if (this.keyIs(ks, ke, escaped, "type")) return NOTE_TYPE;
      if (!this.keyIs(ks, ke, escaped, "image_url")) return NONE;
      this.partInline = false;
      return this.b[this.i] === 0x22 ? NOTE_URL : IMAGE;
    }
    if (ctx === IMAGE) return this.keyIs(ks, ke, escaped, "url") ? NOTE_URL : NONE;
    return this.keyIs(ks, ke, escaped, "type") ? NOTE_TYPE : NONE; // TOOL
  }

  /** Whether the key at [ks, ke) is `name` (ASCII), comparing bytes unless it has escapes. */
  private keyIs(ks: number, ke: number, escaped: boolean, name: string): boolean {
    if (escaped) return ke - ks <= 2 + 6 * name.length && this.keyText(ks, ke, true) === name;
    if (ke - ks !== name.length + 2) return false;
    const b = this.b;
    for (let k = 0; k < name.length; k++) if (b[ks + 1 + k] !== name.charCodeAt(k)) return false;
    return true;
  }

  /** Note a part's or tool's type, or whether an image's URL is inline (the last one counts). */
  private note(what: number, vs: number): void {
    const b = this.b;
    if (what === NOTE_TYPE) {
      const raw = b.toString("utf8", vs, Math.min(this.i, vs + 200));
      this.partType = b[vs] === 0x22 && this.i - vs <= 200 ? (JSON.parse(raw) as string) : raw;
    } else this.partInline = b[vs] === 0x22 && this.urlHead(vs + 1) === "data:";
  }

  /** The first five characters of the (already validated) string whose content starts at `at`. */
  private urlHead(at: number): string {
    const b = this.b;
    let out = "";
    while (out.length < 5 && b[at] !== 0x22) {
      if (b[at] !== 0x5c) out += String.fromCharCode(b[at++]!);
      else if (b[at + 1] === 0x75) {
        out += String.fromCharCode(Number.parseInt(b.toString("latin1", at + 2, at + 6), 16));
        at += 6;
      } else {
        out += b[at + 1] === 0x2f ? "/" : "\\"; // no other escape can be part of "data:"
        at += 2;
      }
    }
    return out;
  }

  /** A content part must be text or an inline image; a tool must be a function. */
  private checkTyped(ctx: number): void {
    const t = this.partType;
    if (ctx === TOOL) {
      if (t !== undefined && t !== "function")
        this.fail(`a tool of type ${JSON.stringify(t)} (only functions are forwarded)`);
      return;
    }
    if (t === "text" || t === "refusal") return;
    if (t === "image_url" && this.partInline) {
      this.images++;
      return;
    }
    this.fail(
      `a content part ${t === undefined ? "without a type" : `of type ${JSON.stringify(t)}`}${t === "image_url" ? " whose URL is not a data: URL" : ""} (forwarded: text, and images given inline as data: URLs)`,
    );
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

interface Scanned extends Member {
  classes: CharClasses;
  elements: number;
}

/** The top-level members as written, each with its count. */
function scanMembers(sc: Scanner, billed: (key: string) => boolean): Scanned[] {
  const b = sc.b;
  const out: Scanned[] = [];
  sc.ws();
  if (b[sc.i] !== 0x7b) sc.fail("the body is not a JSON object");
  sc.i++;
  sc.depth = 1;
  sc.ws();
  if (b[sc.i] === 0x7d) {
    sc.i++;
    return out;
  }
  for (;;) {
    if (out.length >= MAX_MEMBERS) sc.fail(`more than ${MAX_MEMBERS} top-level members`);
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
    const ctx = key === "messages" ? MESSAGES : key === "tools" ? TOOLS : NONE;
    let elements = -1;
    if (b[valueStart] === 0x5b) elements = sc.array(ctx);
    else sc.value(NONE);
    const counted = sc.take();
    let classes = zeroClasses();
    if (billed(key)) {
      // The key as Python prints it (a decoded key can differ from its spelling), ':' and the value.
      classes = counted;
      classes.dense++;
      classes.bytes++;
    }
    out.push({ key, start, end: sc.i, valueStart, classes, elements });
    sc.ws();
    const c = b[sc.i++];
    if (c === 0x7d) return out;
    if (c !== 0x2c) {
      sc.i--;
      sc.fail("expected ',' or '}'");
    }
  }
}

/**
 * Scan a request body. `billed(key)` says which top-level members the estimate counts. Throws
 * ScanError for anything Python's json.loads refuses, a top level that is not an object, more than
 * MAX_MEMBERS top-level members, and a content part or tool the meter does not forward.
 */
export function scanRequest(b: Buffer, billed: (key: string) => boolean): RequestScan {
  if (!isUtf8(b)) throw new ScanError("the body is not UTF-8");
  const sc = new Scanner(b);
  const scanned = scanMembers(sc, billed);
  sc.ws();
  if (sc.i !== b.length) sc.fail("extra data");
  // A repeated top-level key: the last value counts (as in a Python dict), in the first one's place.
  const last = new Map<string, Scanned>();
  for (const m of scanned) last.set(m.key, m);
  const classes = zeroClasses();
  classes.dense += 2; // { }
  classes.bytes += 2;
  let billedCount = 0;
  const members: Member[] = [];
  for (const m of last.values()) {
    members.push({
      key: m.key.length <= MAX_KEY_CHARS ? m.key : "",
      start: m.start,
      end: m.end,
      valueStart: m.valueStart,
    });
    if (!billed(m.key)) continue;
    if (billedCount++ > 0) {
      classes.dense++; // ,
      classes.bytes++;
    }
    classes.plain += m.classes.plain;
    classes.dense += m.classes.dense;
    classes.nonAscii += m.classes.nonAscii;
    classes.bytes += m.classes.bytes;
  }
  return {
    members,
    classes,
    messages: last.get("messages")?.elements ?? -1,
    toolsBytes: last.get("tools")?.classes.bytes ?? 0,
    images: sc.images,
  };
}
