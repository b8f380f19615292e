/**
 * Log lines as a log pipeline reads them: each must be one JSON object, and no object may name a key
 * twice (JSON.parse, jq and Loki keep one of the two values and lose the other without a word).
 */

/** The keys named twice in one object of `text` (at any depth, "a.b" paths); throws if it is not JSON. */
export function duplicateKeys(text: string): string[] {
  let i = 0;
  const dups: string[] = [];
  const ws = () => {
    while (i < text.length && " \t\r\n".includes(text[i]!)) i++;
  };
  const fail = (what: string): never => {
    throw new SyntaxError(`${what} at ${i}: ${text.slice(Math.max(0, i - 20), i + 20)}`);
  };
  const str = (): string => {
    if (text[i] !== '"') fail("expected a string");
    const start = i;
    i++;
    while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    if (i >= text.length) fail("unterminated string");
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (path: string): void => {
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      const seen = new Set<string>();
      ws();
      if (text[i] === "}") {
        i++;
        return;
      }
      for (;;) {
        ws();
        const k = str();
        if (seen.has(k)) dups.push(path ? `${path}.${k}` : k);
        seen.add(k);
        ws();
        if (text[i] !== ":") fail("expected ':'");
        i++;
        value(path ? `${path}.${k}` : k);
        ws();
        if (text[i] === ",") {
          i++;
          continue;
        }
        if (text[i] === "}") {
          i++;
          return;
        }
        fail("expected ',' or '}'");
      }
    }
    if (c === "[") {
      i++;
      ws();
      if (text[i] === "]") {
        i++;
        return;
      }
      for (let n = 0; ; n++) {
        value(`${path}[${n}]`);
        ws();
        if (text[i] === ",") {
          i++;
          continue;
        }
        if (text[i] === "]") {
          i++;
          return;
        }
        fail("expected ',' or ']'");
      }
    }
    if (c === '"') {
      str();
      return;
    }
    const m = /^(-?\d+(\.\d+)?([eE][+-]?\d+)?|true|false|null)/.exec(text.slice(i, i + 400));
    if (!m) fail("expected a value");
    i += m![0].length;
  };
  ws();
  if (text[i] !== "{") fail("a log line must be a JSON object");
  value("");
  ws();
  if (i !== text.length) fail("trailing text");
  return dups;
}

/** Every line of a log that is not a JSON object, or names a key twice, with why. */
export function badLogLines(log: string): Array<{ line: string; problem: string }> {
  const bad: Array<{ line: string; problem: string }> = [];
  for (const line of log.split("\n")) {
    if (line.trim() === "") continue;
    try {
      const d = duplicateKeys(line);
      if (d.length) bad.push({ line, problem: `duplicate keys: ${d.join(", ")}` });
    } catch (err) {
      bad.push({ line, problem: `not JSON: ${(err as Error).message}` });
    }
  }
  return bad;
}
