import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ChatStreamAccumulator, StreamErrorChunk } from "../../agent/src/completion.js";
import { SseDecoder } from "../../agent/src/sse.js";
import { replyChunks } from "../helpers/scripted-model.js";

const decodeAll = (parts: string[]) => {
  const d = new SseDecoder();
  const events = parts.flatMap((p) => d.push(p));
  return [...events, ...d.end()];
};

describe("agent SSE decoder", () => {
  it("dispatches data events on blank lines, ignoring comments and other fields", () => {
    const events = decodeAll([
      ': keep-alive\n\nevent: x\nid: 3\nretry: 10\ndata: {"a":1}\n\ndata: [DONE]\n\n',
    ]);
    expect(events).toEqual([
      { event: "x", data: '{"a":1}' },
      { event: undefined, data: "[DONE]" },
    ]);
  });

  it("treats LF, CRLF and lone CR as line ends, even when CR and LF arrive in separate chunks", () => {
    expect(decodeAll(["data: a\r\n\r\ndata: b\r\r", "data: c\n\n"]).map((e) => e.data)).toEqual([
      "a",
      "b",
      "c",
    ]);
    // The CR ends one chunk and its LF starts the next: one line break, not two (no empty event split).
    expect(decodeAll(["data: x\r", "\ndata: y\r\n\r\n"]).map((e) => e.data)).toEqual(["x\ny"]);
  });

  it("joins multi-line data with \\n and keeps a value without the optional space", () => {
    expect(decodeAll(["data:first\ndata: second\n\n"]).map((e) => e.data)).toEqual(["first\nsecond"]);
  });

  it("delivers a final event that lacks its blank line at end of stream", () => {
    expect(decodeAll(['data: {"last":true}']).map((e) => e.data)).toEqual(['{"last":true}']);
  });

  it("yields the same events however the byte stream is chunked (property)", () => {
    const stream =
      ': c\r\n\r\ndata: {"x":"é ✓"}\r\n\r\ndata: line1\ndata: line2\n\nevent: e\rdata: z\r\rdata: [DONE]\n\n';
    const whole = decodeAll([stream]);
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: stream.length }), { maxLength: 12 }), (cuts) => {
        const points = [...new Set(cuts)].sort((a, b) => a - b);
        const parts: string[] = [];
        let prev = 0;
        for (const p of points) {
          parts.push(stream.slice(prev, p));
          prev = p;
        }
        parts.push(stream.slice(prev));
        expect(decodeAll(parts)).toEqual(whole);
      }),
      { numRuns: 300 },
    );
  });
});

describe("agent stream accumulator", () => {
  it("merges content, reasoning and tool-call fragments by index, keeps finish and usage", () => {
    const acc = new ChatStreamAccumulator();
    for (const c of replyChunks({
      content: "Let me look.",
      reasoning: "thinking",
      toolCalls: [
        { id: "c1", name: "terminal", arguments: '{"command": "ls -la /app"}' },
        { id: "c2", name: "read_file", arguments: '{"path": "/workspace/SKILL.md"}' },
      ],
      usage: { prompt_tokens: 100, completion_tokens: 20, cached_tokens: 64 },
      fragment: 3,
    }))
      acc.add(c);
    const r = acc.result(1);
    expect(r.content).toBe("Let me look.");
    expect(r.reasoning).toBe("thinking");
    expect(r.toolCalls).toEqual([
      { id: "c1", type: "function", function: { name: "terminal", arguments: '{"command": "ls -la /app"}' } },
      {
        id: "c2",
        type: "function",
        function: { name: "read_file", arguments: '{"path": "/workspace/SKILL.md"}' },
      },
    ]);
    expect(r.finishReason).toBe("tool_calls");
    expect(r.usage).toEqual({
      prompt_tokens: 100,
      completion_tokens: 20,
      total_tokens: 120,
      cached_tokens: 64,
    });
  });

  it("handles interleaved parallel fragments, repeated names and missing ids", () => {
    const acc = new ChatStreamAccumulator();
    const ch = (tool_calls: object[]) => ({ choices: [{ index: 0, delta: { tool_calls } }] });
    acc.add(ch([{ index: 1, function: { name: "read_file", arguments: '{"pa' } }]));
    acc.add(ch([{ index: 0, id: "a", function: { name: "terminal", arguments: '{"command":' } }]));
    acc.add(ch([{ index: 1, function: { name: "read_file", arguments: 'th":"x"}' } }]));
    acc.add(ch([{ index: 0, function: { arguments: '"pwd"}' } }]));
    acc.add({ choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] });
    const r = acc.result(4);
    expect(r.toolCalls.map((c) => [c.id, c.function.name, c.function.arguments])).toEqual([
      ["a", "terminal", '{"command":"pwd"}'],
      ["call_t4_1", "read_file", '{"path":"x"}'],
    ]);
  });

  it("turns an error chunk into StreamErrorChunk, flagging the meter's budget error", () => {
    const acc = new ChatStreamAccumulator();
    expect(() => acc.add({ error: { message: "upstream died", type: "upstream" } })).toThrow(
      StreamErrorChunk,
    );
    try {
      acc.add({ error: { message: "cap reached", type: "cap" } });
    } catch (e) {
      expect((e as StreamErrorChunk).budget).toBe(true);
    }
  });
});
