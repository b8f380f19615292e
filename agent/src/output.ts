/**
 * Bounded capture of tool output: the first half of the cap and the last half are kept, the
 * middle is counted and dropped, so a command that prints gigabytes costs the agent constant
 * memory and the model sees both how it started and how it ended. Pure.
 */

export class HeadTailBuffer {
  private readonly headCap: number;
  private readonly tailCap: number;
  private head: Buffer[] = [];
  private headLen = 0;
  /** Tail chunks; trimmed from the front when over tailCap. */
  private tail: Buffer[] = [];
  private tailLen = 0;
  private total = 0;

  constructor(cap: number) {
    const c = Math.max(2, Math.floor(cap));
    this.headCap = Math.ceil(c / 2);
    this.tailCap = c - this.headCap;
  }

  push(chunk: Buffer): void {
    this.total += chunk.length;
    let rest = chunk;
    if (this.headLen < this.headCap) {
      const take = Math.min(this.headCap - this.headLen, rest.length);
      this.head.push(rest.subarray(0, take));
      this.headLen += take;
      rest = rest.subarray(take);
    }
    if (rest.length === 0) return;
    this.tail.push(rest);
    this.tailLen += rest.length;
    while (this.tailLen > this.tailCap) {
      const first = this.tail[0] as Buffer;
      const excess = this.tailLen - this.tailCap;
      if (first.length <= excess) {
        this.tail.shift();
        this.tailLen -= first.length;
      } else {
        // Copy so the dropped prefix of a large chunk can be garbage-collected.
        this.tail[0] = Buffer.from(first.subarray(excess));
        this.tailLen -= excess;
      }
    }
  }

  get totalBytes(): number {
    return this.total;
  }

  get omittedBytes(): number {
    return this.total - this.headLen - this.tailLen;
  }

  /** The kept text, with a marker where bytes were dropped. */
  text(): string {
    const head = Buffer.concat(this.head).toString("utf8");
    const tail = Buffer.concat(this.tail).toString("utf8");
    const omitted = this.omittedBytes;
    if (omitted === 0) return head + tail;
    return `${head}\n[... ${omitted} bytes omitted ...]\n${tail}`;
  }
}

/** Cap a whole string the same way (for file reads and search results). */
export function capText(text: string, cap: number): { text: string; omittedBytes: number } {
  const buf = Buffer.from(text, "utf8");
  if (buf.length <= cap) return { text, omittedBytes: 0 };
  const b = new HeadTailBuffer(cap);
  b.push(buf);
  return { text: b.text(), omittedBytes: b.omittedBytes };
}
