/**
 * Incremental Server-Sent Events decoder (the subset OpenAI-style streams use): `data:` lines
 * joined by "\n" into one event, dispatched on a blank line; `:` comment lines and other fields
 * (`event`, `id`, `retry`) ignored except `event`; LF, CRLF and lone CR all end a line, even when
 * the CR and LF arrive in different chunks. Pure: feed text, get events.
 */

export interface SseEvent {
  event: string | undefined;
  data: string;
}

export class SseDecoder {
  private buf = "";
  private data: string[] = [];
  private event: string | undefined;
  /** The previous chunk ended in CR: a leading LF of the next chunk belongs to that line break. */
  private skipLf = false;

  push(text: string): SseEvent[] {
    const out: SseEvent[] = [];
    let s = text;
    if (this.skipLf && s.startsWith("\n")) s = s.slice(1);
    this.skipLf = false;
    this.buf += s;
    let start = 0;
    for (let i = 0; i < this.buf.length; i++) {
      const c = this.buf.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      this.line(this.buf.slice(start, i), out);
      if (c === 13) {
        if (i + 1 < this.buf.length) {
          if (this.buf.charCodeAt(i + 1) === 10) i++;
        } else {
          this.skipLf = true;
        }
      }
      start = i + 1;
    }
    this.buf = this.buf.slice(start);
    return out;
  }

  /** End of stream: a final event without its blank line is still delivered (lenient). */
  end(): SseEvent[] {
    const out: SseEvent[] = [];
    if (this.buf !== "") this.line(this.buf, out);
    this.buf = "";
    this.dispatch(out);
    return out;
  }

  private line(line: string, out: SseEvent[]): void {
    if (line === "") {
      this.dispatch(out);
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.event = value;
  }

  private dispatch(out: SseEvent[]): void {
    if (this.data.length > 0) out.push({ event: this.event, data: this.data.join("\n") });
    this.data = [];
    this.event = undefined;
  }
}
