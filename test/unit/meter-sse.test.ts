import { hash } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { AnswerAccumulator, errorInfo, parseUsage } from "../../src/meter/answer.js";
import { fingerprint, normArgs, pyJsonDumpsCompact, pyStrip } from "../../src/meter/fingerprint.js";
import { DEFAULT_RETRY, firstChunkRetryable, retryDelayMs } from "../../src/meter/retry.js";
import { SseSplitter } from "../../src/meter/sse.js";
import { type PyValue, pyJsonDumps, pyJsonParse } from "../../src/pack/index.js";

const STREAM = [
  'data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n',
  ": keep-alive\n\n",
  'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"héllo "}}]}\r\n\r\n',
  'event: message\ndata: {"id":"c1",\ndata: "choices":[{"index":0,"delta":{"content":"wörld"}}]}\n\n',
  'data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"x_engy":{"request_id":"engy-9"}}\n\n',
  'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}\n\n',
  "data: [DONE]\n\n",
].join("");

describe("SSE splitter", () => {
  it("property: any chunking yields the same events, and their bytes concatenate to the input", () => {
    const bytes = Buffer.from(STREAM);
    const whole = new SseSplitter().push(bytes);
    expect(whole.map((e) => e.data)).toEqual([
      '{"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}',
      null,
      '{"id":"c1","choices":[{"index":0,"delta":{"content":"héllo "}}]}',
      '{"id":"c1",\n"choices":[{"index":0,"delta":{"content":"wörld"}}]}',
      '{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"x_engy":{"request_id":"engy-9"}}',
      '{"id":"c1","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}',
      "[DONE]",
    ]);
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 12 }),
        (cuts) => {
          const points = [0, ...cuts.sort((a, b) => a - b), bytes.length];
          const s = new SseSplitter();
          const events = [];
          for (let k = 0; k + 1 < points.length; k++)
            events.push(...s.push(bytes.subarray(points[k], points[k + 1])));
          expect(s.end()).toBeNull();
          expect(events.map((e) => e.data)).toEqual(whole.map((e) => e.data));
          expect(Buffer.concat(events.map((e) => e.raw)).equals(bytes)).toBe(true);
        },
      ),
      { numRuns: 500 },
    );
  });

  it("says when a chunk was exactly whole events (so it can be forwarded as it came)", () => {
    const s = new SseSplitter();
    s.push(Buffer.from("data: 1\n\ndata: 2\n\n"));
    expect(s.exact).toBe(true);
    s.push(Buffer.from("data: 3\n"));
    expect(s.exact).toBe(false);
    s.push(Buffer.from("\n"));
    expect(s.exact).toBe(false); // completed a carried event
    s.push(Buffer.from("data: 4\n\n"));
    expect(s.exact).toBe(true);
  });

  it("an unterminated last event stays pending and is parsed at the end", () => {
    const s = new SseSplitter();
    expect(s.push(Buffer.from('data: {"a":1}\n\ndata: {"b"'))).toHaveLength(1);
    expect(s.pending).toBe(10);
    expect(s.end()).toEqual({ raw: Buffer.from('data: {"b"'), data: '{"b"' });
  });
});

describe("answer accumulation", () => {
  it("collects usage, ids, finish reason and text from a stream", () => {
    const acc = new AnswerAccumulator();
    for (const e of new SseSplitter().push(Buffer.from(STREAM))) if (e.data !== null) acc.onEvent(e.data);
    expect(acc.usage).toEqual({ promptTokens: 12, cachedTokens: 4, completionTokens: 3 });
    expect(acc.engyRequestId).toBe("engy-9");
    expect(acc.responseId).toBe("c1");
    expect(acc.finishReason).toBe("stop");
    expect(acc.sawDone).toBe(true);
    expect(acc.fingerprint().contentSha).toBe(fingerprint("héllo wörld", []).contentSha);
  });

  it("property: a text delta recognised without JSON.parse leaves the same answer as the full parse", () => {
    const ident = fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom("chatcmpl-1", ""));
    const chunk = fc.record({
      id: ident,
      created: fc.oneof(fc.nat(), fc.constantFrom("0123", "1e5", "-1")),
      model: ident,
      fp: fc.oneof(fc.constant(undefined), fc.constant(null), ident),
      role: fc.boolean(),
      content: fc.oneof(
        fc.string({ unit: "binary", maxLength: 12 }),
        fc.constantFrom('a"b', "\\", "\u0000x", "é😀"),
      ),
      finish: fc.constantFrom(null, null, "stop"),
      extra: fc.constantFrom("", ',"usage":null', ',"x_engy":{"request_id":"r"}'),
    });
    type Chunk = typeof chunk extends fc.Arbitrary<infer T> ? T : never;
    const text = (c: Chunk) => {
      const delta = `{${c.role ? '"role":"assistant",' : ""}"content":${JSON.stringify(c.content)}}`;
      const fp = c.fp === undefined ? "" : `"system_fingerprint":${JSON.stringify(c.fp)},`;
      return `{"id":${JSON.stringify(c.id)},"object":"chat.completion.chunk","created":${c.created},"model":${JSON.stringify(c.model)},${fp}"choices":[{"index":0,"delta":${delta},"logprobs":null,"finish_reason":${JSON.stringify(c.finish)}}]${c.extra}}`;
    };
    // Raw texts too: a control character or a broken escape inside the literal.
    const raw = fc.oneof(
      chunk.map(text),
      chunk.map((c) => text(c).replace('"content":"', '"content":"\u0001')),
      chunk.map((c) => text(c).replace('"content":"', '"content":"\\x')),
    );
    fc.assert(
      fc.property(fc.array(raw, { maxLength: 6 }), (events) => {
        const fast = new AnswerAccumulator();
        const slow = new AnswerAccumulator(false);
        for (const e of events) {
          fast.onEvent(e);
          slow.onEvent(e);
        }
        expect(fast.fingerprint()).toEqual(slow.fingerprint());
        expect([fast.responseId, fast.finishReason, fast.usage, fast.unparsable, fast.events]).toEqual([
          slow.responseId,
          slow.finishReason,
          slow.usage,
          slow.unparsable,
          slow.events,
        ]);
      }),
      { numRuns: 3000 },
    );
  });

  it("assembles streamed tool calls by index like a non-stream message", () => {
    const s = new AnswerAccumulator();
    s.onEvent(
      '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"read_file","arguments":"{\\"path\\":"}}]}}]}',
    );
    s.onEvent(
      '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"terminal","arguments":"{\\"command\\": \\"ls\\"}"}}]}}]}',
    );
    s.onEvent(
      '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\\"/x\\"}"}}]}}]}',
    );
    const b = new AnswerAccumulator();
    b.onBody({
      choices: [
        {
          message: {
            content: null,
            tool_calls: [
              { function: { name: "terminal", arguments: '{"command":"ls"}' } },
              { function: { name: "read_file", arguments: '{"path": "/x"}' } },
            ],
          },
        },
      ],
    });
    expect(s.fingerprint().toolSha).not.toBeNull();
    expect(s.fingerprint()).toEqual(b.fingerprint());
  });

  it("recognises error objects and which of them are worth a retry", () => {
    expect(
      errorInfo({ error: { message: "concurrency limit", type: "overloaded", code: 503 } })?.retryable,
    ).toBe(true);
    expect(
      errorInfo({ error: { message: "Rate limit exceeded", code: "rate_limit_exceeded" } })?.retryable,
    ).toBe(true);
    expect(errorInfo({ error: { message: "bad schema", type: "invalid_request_error" } })?.retryable).toBe(
      false,
    );
    expect(errorInfo({ id: "x" })).toBeNull();
  });

  it("usage is validated: wrong shapes are rejected, cached tokens default to 0", () => {
    expect(parseUsage({ prompt_tokens: 5, completion_tokens: 2 })).toEqual({
      ok: true,
      usage: { promptTokens: 5, cachedTokens: 0, completionTokens: 2 },
    });
    expect(parseUsage({ prompt_tokens: -1, completion_tokens: 2 }).ok).toBe(false);
    expect(parseUsage({ prompt_tokens: "5", completion_tokens: 2 }).ok).toBe(false);
    expect(parseUsage({ prompt_tokens: 1.5, completion_tokens: 2 }).ok).toBe(false);
  });
});

describe("fingerprints match the Python validator", () => {
  // Expected values computed with CPython using trajectoryrl/policy/meter.py's documented rule.
  it("content and tool-call hashes", () => {
    expect(fingerprint("  Hello, wörld! \n", [])).toEqual({
      contentSha: "e2f9d7e54e593984",
      contentLen: 13,
      toolSha: null,
      toolCalls: 0,
    });
    expect(
      fingerprint("", [{ name: "terminal", arguments: '{"command": "ls -la /app", "timeout": 30}' }]).toolSha,
    ).toBe("e2e04d91885bf829");
    expect(
      fingerprint("x", [
        { name: "read_file", arguments: '{"path":"/workspace/SKILL.md"}' },
        { name: "write_file", arguments: '{"z":1.0,"a":"é\\u00e9","n":[1,2e5]}' },
      ]),
    ).toEqual({ contentSha: "2d711642b726b044", contentLen: 1, toolSha: "d1e3e4dbd2bbb622", toolCalls: 2 });
    expect(fingerprint("\u3000text\xa0", [{ name: "terminal", arguments: "not json {" }])).toEqual({
      contentSha: "982d9e3eb996f559",
      contentLen: 4,
      toolSha: "4bce8e669d9b5255",
      toolCalls: 1,
    });
    // content_len is Python's len(): code points, an astral character once.
    expect(fingerprint(" 😀é ", []).contentLen).toBe(2);
  });

  it("property: the fast path of the fingerprints gives the Python-faithful path's bytes", () => {
    const reference = (text: string) => {
      try {
        return pyJsonDumpsCompact(pyJsonParse(text));
      } catch {
        return pyStrip(text);
      }
    };
    const text = fc.oneof(
      fc.json({ maxDepth: 3 }),
      fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v, null, 1)),
      fc.constantFrom(
        '{"a":1,"a":2}',
        '{"b":1.0}',
        '{"n":12345678901234567890}',
        "[-0]",
        '{"x":NaN}',
        " {} ",
        '{"é":"\\ud800"}',
        "nope",
      ),
      fc.string({ maxLength: 12 }),
    );
    fc.assert(
      fc.property(text, (t) => {
        expect(normArgs(t)).toBe(reference(t));
      }),
      { numRuns: 3000 },
    );
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.string(), fc.string()), { maxLength: 4 }), (pairs) => {
        const fp = fingerprint(
          "",
          pairs.map(([name, a]) => ({ name, arguments: a })),
        );
        const calls: PyValue[] = pairs.map(([name, a]) => [name, normArgs(a)]);
        expect(fp.toolSha).toBe(pairs.length ? hash("sha256", pyJsonDumps(calls), "hex").slice(0, 16) : null);
      }),
      { numRuns: 500 },
    );
  });

  it("normalises arguments: sorted keys, compact, floats as Python prints them", () => {
    expect(normArgs('{"b": 1.0, "a": [1e5, "ü"]}')).toBe('{"a":[100000.0,"\\u00fc"],"b":1.0}');
    expect(normArgs("  broken ")).toBe("broken");
    expect(pyStrip("\u2003 x \x1c")).toBe("x");
  });
});

describe("retry policy: upstream's schedule", () => {
  it("429/503: up to 6 retries, 1.5 s × the retry's number; a first-chunk error: up to 8, 2 s × n, one counter", () => {
    const waits = (kind: "status" | "stream") =>
      Array.from({ length: 10 }, (_, k) => retryDelayMs(DEFAULT_RETRY, kind, k));
    expect(waits("status")).toEqual([1500, 3000, 4500, 6000, 7500, 9000, null, null, null, null]);
    expect(waits("stream")).toEqual([2000, 4000, 6000, 8000, 10000, 12000, 14000, 16000, null, null]);
    // Shared counter: after 6 status retries, a first-chunk error still has two left.
    expect(retryDelayMs(DEFAULT_RETRY, "stream", 6)).toBe(14000);
  });

  it("a first chunk is retried when '\"error\"' or 'concurrency' is in its first 400 bytes", () => {
    expect(firstChunkRetryable(Buffer.from('data: {"error":{"message":"x"}}\n\n'))).toBe(true);
    expect(firstChunkRetryable(Buffer.from("data: too much concurrency\n\n"))).toBe(true);
    expect(
      firstChunkRetryable(Buffer.from('data: {"choices":[{"delta":{"content":"\\"error\\""}}]}\n\n')),
    ).toBe(false);
    expect(firstChunkRetryable(Buffer.from(`data: {"choices":[]}${" ".repeat(400)}"error"`))).toBe(false);
  });
});

describe("pyStrip", () => {
  it("property: strips exactly Python's whitespace set at both ends", () => {
    const space = fc.constantFrom(
      ..."\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000",
    );
    const other = fc.constantFrom(..."ab\u00e9\ufeff\u200b\x00_");
    fc.assert(
      fc.property(fc.array(space), fc.array(fc.oneof(space, other)), fc.array(space), (l, mid, r) => {
        const core = mid
          .join("")
          .replace(
            /^[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+|[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+$/g,
            "",
          );
        expect(pyStrip(l.join("") + mid.join("") + r.join(""))).toBe(core);
      }),
    );
  });
});
