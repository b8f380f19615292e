/**
 * Text from outside — a miner's file names, a bench's scenario names, a pack file's name, a message
 * that quotes any of them — made safe for a terminal: the one function every CLI output passes such
 * text through. Every control character (C0 such as ESC, BEL, CR and LF; DEL; C1, whose CSI and OSC
 * act as ESC [ and ESC ] on some terminals) and every invisible formatting character that reorders,
 * hides or breaks what is shown (bidi embeddings, overrides and isolates, zero-width characters,
 * the line and paragraph separators, the BOM, interlinear annotation marks) is written as an
 * escape, so a string can neither clear the screen, move the cursor, set the window title, colour
 * a fake line, start a new line, nor turn the text around. The escapes are JSON's (`\n`, `\r`,
 * `\t`, `\uXXXX`): a JSON document passed through keeps its meaning. Everything else (any script,
 * emoji) is left as it is. The HTML pages have their own escaping (html-escape.ts).
 */

const UNSAFE =
  /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]/g;
const UNSAFE_BUT_NEWLINE =
  /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]/g;

const SHORT: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

function escapeOne(c: string): string {
  return SHORT[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
}

/** One line of outside text, for a terminal: every control and invisible formatting character escaped, newlines too. */
export function termText(value: unknown): string {
  return String(value ?? "").replace(UNSAFE, escapeOne);
}

/**
 * Output of ours that may carry outside text (a table, a report, a message): escaped as termText
 * but for its own line breaks. What every CLI output goes through on its way to the terminal; text
 * that must stay one line is escaped with termText where it is put in.
 */
export function termLines(value: unknown): string {
  return String(value ?? "").replace(UNSAFE_BUT_NEWLINE, escapeOne);
}
