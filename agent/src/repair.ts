/**
 * Tool-call arguments as models really send them. Valid JSON objects pass through; a few
 * failure shapes are repaired when the intent is unambiguous: code fences, text before or after
 * the object, a missing closing brace/bracket, trailing commas, raw newlines inside strings,
 * single-quoted (Python-style) dicts, a double-encoded JSON string. A string cut off mid-way is
 * never "repaired" (that would write a truncated file): it is reported back to the model. Pure.
 */

export type ArgsParse =
  | { ok: true; args: Record<string, unknown>; repaired?: string }
  | { ok: false; error: string };

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

function tryJson(s: string): { ok: true; value: unknown } | { ok: false; error: string } {
  try {
    return { ok: true, value: JSON.parse(s) };
  } catch (e) {
    return { ok: false, error: (e as Error).message };
  }
}

const FENCE = /^```[A-Za-z0-9_-]*[ \t]*\r?\n?([\s\S]*?)\r?\n?```\s*$/;

export function parseToolArguments(raw: string): ArgsParse {
  const s = raw.trim();
  if (s === "") return { ok: true, args: {} };
  const direct = tryJson(s);
  if (direct.ok) {
    if (isPlainObject(direct.value)) return { ok: true, args: direct.value };
    if (typeof direct.value === "string") {
      const inner = tryJson(direct.value);
      if (inner.ok && isPlainObject(inner.value))
        return { ok: true, args: inner.value, repaired: "double-encoded JSON string decoded" };
    }
    return { ok: false, error: `arguments must be a JSON object, got ${describe(direct.value)}` };
  }
  const notes: string[] = [];
  let text = s;
  const fenced = FENCE.exec(text);
  if (fenced) {
    text = (fenced[1] ?? "").trim();
    notes.push("code fence removed");
    const unfenced = tryJson(text);
    if (unfenced.ok && isPlainObject(unfenced.value))
      return { ok: true, args: unfenced.value, repaired: notes.join("; ") };
  }
  for (const singleQuotes of [false, true]) {
    const n = normalize(text, singleQuotes);
    if (n === null) continue;
    const parsed = tryJson(n.text);
    if (parsed.ok && isPlainObject(parsed.value))
      return { ok: true, args: parsed.value, repaired: [...notes, ...n.notes].join("; ") };
  }
  return { ok: false, error: direct.error };
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  return `a ${typeof v}`;
}

const LITERALS: Record<string, string> = { True: "true", False: "false", None: "null" };

/**
 * One pass over the text from its first `{`: rewrites what is safely rewritable and closes
 * unclosed brackets. Returns null when it cannot make a candidate (no object, a string cut off,
 * mismatched brackets); the caller still has JSON.parse as the final judge.
 */
function normalize(src: string, singleQuotes: boolean): { text: string; notes: string[] } | null {
  const start = src.indexOf("{");
  if (start === -1) return null;
  const notes = new Set<string>();
  if (src.slice(0, start).trim() !== "") notes.add("text before the object dropped");
  const out: string[] = [];
  const closers: string[] = [];
  let quote: string | null = null;
  let i = start;
  let done = false;
  for (; i < src.length && !done; i++) {
    const c = src[i] as string;
    if (quote !== null) {
      if (c === "\\") {
        const next = src[i + 1];
        if (next === undefined) return null;
        // `\'` is not a JSON escape but its meaning is plain.
        if (next === "'") out.push("'");
        else out.push(c, next);
        i++;
      } else if (c === quote) {
        out.push('"');
        quote = null;
      } else if (c === '"') {
        out.push('\\"');
      } else if (c.charCodeAt(0) < 0x20) {
        out.push(escapeControl(c));
        notes.add("raw control characters in a string escaped");
      } else {
        out.push(c);
      }
      continue;
    }
    if (c === '"' || (c === "'" && singleQuotes)) {
      if (c === "'") notes.add("single quotes converted");
      quote = c;
      out.push('"');
    } else if (c === "{" || c === "[") {
      closers.push(c === "{" ? "}" : "]");
      out.push(c);
    } else if (c === "}" || c === "]") {
      if (closers.pop() !== c) return null;
      out.push(c);
      if (closers.length === 0) {
        done = true;
        if (src.slice(i + 1).trim() !== "") notes.add("text after the object dropped");
      }
    } else if (c === ",") {
      let j = i + 1;
      while (j < src.length && /\s/.test(src[j] as string)) j++;
      if (src[j] === "}" || src[j] === "]") notes.add("trailing comma removed");
      else out.push(c);
    } else if (singleQuotes && /[A-Za-z]/.test(c) && !/[A-Za-z0-9_]/.test(src[i - 1] ?? "")) {
      const word = /^[A-Za-z_][A-Za-z0-9_]*/.exec(src.slice(i))?.[0] ?? c;
      const lit = LITERALS[word];
      if (lit !== undefined) notes.add("Python literals converted");
      out.push(lit ?? word);
      i += word.length - 1;
    } else {
      out.push(c);
    }
  }
  // A string still open at the end means the value was cut off: not safely repairable.
  if (quote !== null) return null;
  if (closers.length > 0) {
    notes.add(closers.includes("]") ? "missing closing brackets added" : "missing closing brace added");
    while (closers.length > 0) out.push(closers.pop() as string);
  }
  return { text: out.join(""), notes: [...notes] };
}

function escapeControl(c: string): string {
  if (c === "\n") return "\\n";
  if (c === "\r") return "\\r";
  if (c === "\t") return "\\t";
  return `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
}
