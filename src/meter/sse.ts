/**
 * Server-sent events, split at byte level so what is forwarded stays byte-identical to what came in.
 * Lines end at LF (a CR before it is part of the terminator, so CRLF streams work); an empty line
 * ends an event. Comments (": keep-alive") and field lines other than `data` are kept in the raw
 * bytes and ignored for parsing. UTF-8 never splits at an LF byte, so decoding per line is safe.
 */

export interface SseEvent {
  /** The event's bytes, terminator included: write these to forward it unchanged. */
  raw: Buffer;
  /** The joined `data:` lines, or null for a comment-only / data-less event. */
  data: string | null;
}

const LF = 0x0a;
const CR = 0x0d;

/** The data field of one line, or undefined when the line is not a data line. */
function dataOf(buf: Buffer, start: number, end: number): string | undefined {
  // "data:" = 64 61 74 61 3a
  if (
    end - start < 5 ||
    buf[start] !== 0x64 ||
    buf[start + 1] !== 0x61 ||
    buf[start + 2] !== 0x74 ||
    buf[start + 3] !== 0x61 ||
    buf[start + 4] !== 0x3a
  )
    return undefined;
  let s = start + 5;
  if (buf[s] === 0x20) s++;
  return buf.toString("utf8", s, end);
}

export class SseSplitter {
  private tail: Buffer | null = null;
  /** The last push's events were exactly its chunk (nothing carried in, nothing left over). */
  exact = false;

  /** Feed bytes; returns the events completed by them. An unterminated event stays pending. */
  push(chunk: Buffer): SseEvent[] {
    const carried = this.tail !== null;
    const buf = this.tail === null ? chunk : Buffer.concat([this.tail, chunk]);
    const events: SseEvent[] = [];
    let eventStart = 0;
    let lineStart = 0;
    let data: string | null = null;
    for (;;) {
      const lf = buf.indexOf(LF, lineStart);
      if (lf < 0) break;
      const lineEnd = lf > lineStart && buf[lf - 1] === CR ? lf - 1 : lf;
      if (lineEnd === lineStart) {
        // An empty line: the event is complete (a lone blank line between events is one too).
        events.push({ raw: buf.subarray(eventStart, lf + 1), data });
        eventStart = lf + 1;
        data = null;
      } else {
        const d = dataOf(buf, lineStart, lineEnd);
        if (d !== undefined) data = data === null ? d : `${data}\n${d}`;
      }
      lineStart = lf + 1;
    }
    this.tail = eventStart < buf.length ? buf.subarray(eventStart) : null;
    this.exact = !carried && this.tail === null;
    return events;
  }

  /** Bytes of a started, unterminated event (what a cut stream leaves). */
  get pending(): number {
    return this.tail?.length ?? 0;
  }

  /** At the end of the stream: the unterminated last event, if any (parsed as if terminated). */
  end(): SseEvent | null {
    const t = this.tail;
    this.tail = null;
    if (t === null) return null;
    let data: string | null = null;
    let lineStart = 0;
    while (lineStart < t.length) {
      let lf = t.indexOf(LF, lineStart);
      if (lf < 0) lf = t.length;
      const lineEnd = lf > lineStart && t[lf - 1] === CR ? lf - 1 : lf;
      const d = dataOf(t, lineStart, lineEnd);
      if (d !== undefined) data = data === null ? d : `${data}\n${d}`;
      lineStart = lf + 1;
    }
    return { raw: t, data };
  }
}
