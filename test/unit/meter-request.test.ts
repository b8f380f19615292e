import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseUsage, usageSchema } from "../../src/meter/answer.js";
import { IMAGE_TOKENS } from "../../src/meter/exposure.js";
import {
  CLAMPED_FIELDS,
  DROPPED_FIELDS,
  forwardBody,
  InvalidRequest,
  MAX_KNOB_BYTES,
  parseChatRequest,
  pyTruthy,
} from "../../src/meter/request.js";

/** Values near every boundary the schemas draw, plus the wrong types. */
const edgy = fc.oneof(
  fc.constantFrom(undefined, null, true, false, 0, 1, -1, 1.5, 63, 64, 128, 129, 100_000_000, 100_000_001),
  fc.constantFrom(1_000_000_000, 1_000_000_001, Number.NaN, Number.POSITIVE_INFINITY, "", "x", "1", [], {}),
  fc.integer(),
  fc.double(),
  fc.string({ maxLength: 3 }),
);

describe("the forwarded body", () => {
  const fwd = (body: string, maxTokens = 100) =>
    JSON.parse(forwardBody(parseChatRequest(Buffer.from(body)), maxTokens).toString("utf8")) as Record<
      string,
      unknown
    >;

  it("keeps the client's members byte for byte, max_tokens set, max_completion_tokens dropped", () => {
    const text =
      '{"model": "kimi-k3", "messages": [{"role":"user","content":"caf\\u00e9"}], "max_completion_tokens": 9}';
    const out = forwardBody(parseChatRequest(Buffer.from(text)), 50).toString("utf8");
    expect(out).toBe(
      '{"max_tokens":50,"model": "kimi-k3","messages": [{"role":"user","content":"caf\\u00e9"}]}',
    );
  });

  it("a stream gets stream_options.include_usage (other options kept); a non-stream keeps its options as sent", () => {
    expect(fwd('{"messages":[],"stream":true,"stream_options":{"x":1}}').stream_options).toEqual({
      x: 1,
      include_usage: true,
    });
    expect(fwd('{"messages":[],"stream":"yes"}').stream_options).toEqual({ include_usage: true });
    expect(
      fwd('{"messages":[],"stream":false,"stream_options":{"include_usage":false}}').stream_options,
    ).toEqual({
      include_usage: false,
    });
    expect(() => parseChatRequest(Buffer.from('{"messages":[],"stream":true,"stream_options":[]}'))).toThrow(
      InvalidRequest,
    );
  });

  it("a repeated top-level key is forwarded once, with the value that was priced (the last)", () => {
    const out = fwd('{"model":"glm-5.2","messages":[],"model":"kimi-k3"}');
    expect(out.model).toBe("kimi-k3");
    expect(parseChatRequest(Buffer.from('{"model":"glm-5.2","model":"kimi-k3"}')).model).toBe("kimi-k3");
  });

  it("drops the fields that make a provider bill more than one completion; clamps token budgets to max_tokens", () => {
    const body = {
      messages: [],
      n: 2,
      best_of: 5,
      use_beam_search: true,
      beam_width: 4,
      num_beams: 4,
      num_return_sequences: 4,
      thinking_budget: 100_000,
      max_thinking_tokens: 100_000,
      max_reasoning_tokens: 100_000,
      max_new_tokens: 100_000,
      max_output_tokens: 100_000,
      chat_template: "{% for i in range(99999) %}{{ messages }}{% endfor %}",
      mm_processor_kwargs: { max_pixels: 1e9 },
      web_search_options: {},
      enable_search: true,
      search_parameters: { mode: "on" },
      min_tokens: 5_000,
      reasoning: { effort: "high", max_tokens: 90_000 },
      thinking: { type: "enabled", budget_tokens: 90_000 },
      ignore_eos: true,
    };
    expect(Object.keys(body)).toEqual(expect.arrayContaining([...DROPPED_FIELDS]));
    const out = fwd(JSON.stringify(body), 200);
    for (const k of DROPPED_FIELDS) expect(out, k).not.toHaveProperty(k);
    expect(out).toMatchObject({
      max_tokens: 200,
      n: 2,
      min_tokens: 200,
      reasoning: { effort: "high", max_tokens: 200 },
      thinking: { type: "enabled", budget_tokens: 200 },
      ignore_eos: true,
    });
    // Within max_tokens: forwarded as written.
    expect(fwd('{"messages":[],"min_tokens":10}', 200).min_tokens).toBe(10);
    // They still count in the prompt estimate, as upstream counts every field it does not know.
    const withBudget = parseChatRequest(Buffer.from(JSON.stringify(body))).promptEstimate;
    expect(withBudget).toBeGreaterThan(parseChatRequest(Buffer.from('{"messages":[]}')).promptEstimate);
  });

  it("stream is read by Python's truthiness and forwarded as that boolean (no provider reads it otherwise)", () => {
    const values: unknown[] = [
      "no",
      "false",
      "0",
      "",
      "yes",
      0,
      1,
      0.0,
      [],
      {},
      [0],
      { a: 1 },
      null,
      true,
      false,
    ];
    for (const v of values) {
      const r = parseChatRequest(Buffer.from(JSON.stringify({ messages: [], stream: v })));
      expect(r.stream, JSON.stringify(v)).toBe(pyTruthy(v));
      const out = fwd(JSON.stringify({ messages: [], stream: v, stream_options: { include_usage: "no" } }));
      expect(out.stream, JSON.stringify(v)).toBe(pyTruthy(v));
      if (pyTruthy(v)) expect(out.stream_options).toEqual({ include_usage: true });
    }
    expect(fwd('{"messages":[]}')).not.toHaveProperty("stream");
    // A repeated or escaped key is read and forwarded once, as Python's dict holds it.
    expect(fwd('{"stream":true,"str\\u0065am":"no","messages":[]}').stream).toBe(true);
    expect(fwd('{"stream":"","stream":[],"messages":[]}').stream).toBe(false);
  });

  it("n: absent or null is one completion (not forwarded); an integer 1–128 is forwarded as one; anything else is refused", () => {
    const req = (b: string) => parseChatRequest(Buffer.from(b));
    expect(req('{"n":3}').n).toBe(3);
    expect(fwd('{"n":3}').n).toBe(3);
    expect(fwd('{"n":2.0}').n).toBe(2);
    expect(fwd('{"n":1e0}').n).toBe(1);
    expect(req('{"n":null}').n).toBe(1);
    expect(fwd('{"n":null}')).not.toHaveProperty("n");
    expect(req("{}").n).toBe(1);
    for (const bad of ['"8.0"', '"2"', "true", "0", "-1", "2.5", "129", "NaN", "[]", "{}"])
      expect(() => req(`{"n":${bad}}`), bad).toThrow(InvalidRequest);
    expect(() => req('{"max_tokens":1e400}')).toThrow(InvalidRequest);
  });

  it("a knob the meter parses is refused over 64 KiB (its parse would hold the loop); other fields are not", () => {
    const big = JSON.stringify("x".repeat(MAX_KNOB_BYTES));
    for (const k of ["model", "stream", "stream_options", "max_tokens", "n", "reasoning"])
      expect(() => parseChatRequest(Buffer.from(`{"${k}":${big}}`)), k).toThrow(/more than 65536 bytes/);
    expect(parseChatRequest(Buffer.from(`{"user":${big},"messages":[]}`)).members).toHaveLength(2);
  });

  it("content parts: text and inline images are forwarded (images counted in the bound); other media are refused", () => {
    const req = (content: unknown) =>
      parseChatRequest(Buffer.from(JSON.stringify({ messages: [{ role: "user", content }] })));
    const text = req([{ type: "text", text: "hi" }, "plain", { type: "refusal", refusal: "no" }]);
    const inline = req([
      { type: "text", text: "hi" },
      { type: "image_url", image_url: { url: "data:image/png;base64,AA" } },
    ]);
    const stringUrl = req([{ type: "image_url", image_url: "data:image/webp;base64,AA" }]);
    expect(inline.promptBound - text.promptBound).toBeGreaterThanOrEqual(IMAGE_TOKENS);
    expect(stringUrl.promptBound).toBeGreaterThan(IMAGE_TOKENS);
    for (const part of [
      { type: "image_url", image_url: { url: "https://example.invalid/a.png" } },
      { type: "image_url", image_url: { url: "DATA:image/png;base64,AA" } },
      { type: "video_url", video_url: { url: "data:video/mp4;base64,AA" } },
      { type: "input_audio", input_audio: { data: "AA", format: "wav" } },
      { type: "file", file: { file_id: "f" } },
      { image_url: { url: "https://example.invalid/a.png" } },
      { type: 5 },
    ])
      expect(() => req([part]), JSON.stringify(part)).toThrow(InvalidRequest);
    // The last of a repeated key counts; escaped spellings are read as the provider reads them.
    const raw = (part: string) =>
      parseChatRequest(Buffer.from(`{"messages":[{"role":"user","content":[${part}]}]}`));
    expect(() =>
      raw('{"type":"image_url","image_url":{"url":"data:x"},"image_url":{"url":"http://a/"}}'),
    ).toThrow(InvalidRequest);
    expect(
      raw('{"type":"video_url","type":"image_url","image_url":{"url":"data:x"}}').promptBound,
    ).toBeGreaterThan(IMAGE_TOKENS);
    const esc = (t: string, u: string) =>
      parseChatRequest(
        Buffer.from(
          `{"messages":[{"role":"user","c\\u006fntent":[{"t\\u0079pe":"${t}","image_url":{"url":"${u}"}}]}]}`,
        ),
      );
    expect(() => esc("im\\u0061ge_url", "https://a/")).toThrow(InvalidRequest);
    expect(esc("image_url", "d\\u0061ta:image/png;base64,AA").promptBound).toBeGreaterThan(IMAGE_TOKENS);
    // A part object outside messages[].content is no content part.
    expect(
      parseChatRequest(Buffer.from('{"metadata":[{"type":"video_url"}],"messages":[]}')).members,
    ).toHaveLength(2);
  });

  it("tools: functions only (a provider's own tools search the web and bill per search)", () => {
    const req = (tools: unknown) => parseChatRequest(Buffer.from(JSON.stringify({ messages: [], tools })));
    expect(
      req([
        { type: "function", function: { name: "f", parameters: { type: "object" } } },
        { function: { name: "g" } },
      ]).members,
    ).toHaveLength(2);
    for (const t of [
      { type: "web_search", web_search: {} },
      { type: "builtin_function", function: { name: "$web_search" } },
      { type: "retrieval" },
    ])
      expect(() => req([t]), JSON.stringify(t)).toThrow(/only functions/);
  });

  it("more than 1024 top-level members are refused (each would cost the loop a step)", () => {
    const members = (n: number) => `{${Array.from({ length: n }, (_, k) => `"k${k}":1`).join(",")}}`;
    expect(parseChatRequest(Buffer.from(members(1024))).members).toHaveLength(1024);
    expect(() => parseChatRequest(Buffer.from(members(1025)))).toThrow(/more than 1024 top-level members/);
  });

  it("property: the forwarded body parses, holds every member not rewritten, and max_tokens granted", () => {
    const key = fc.oneof(
      fc.constantFrom(
        "model",
        "messages",
        "stream",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "tools",
      ),
      fc.string({ maxLength: 4 }),
    );
    fc.assert(
      fc.property(
        fc.array(fc.tuple(key, fc.jsonValue({ maxDepth: 2 })), { maxLength: 8 }),
        fc.integer({ min: 1, max: 100_000 }),
        (members, mt) => {
          const text = `{${members.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`).join(",")}}`;
          let r: ReturnType<typeof parseChatRequest>;
          try {
            r = parseChatRequest(Buffer.from(text));
          } catch (err) {
            expect(err).toBeInstanceOf(InvalidRequest);
            return;
          }
          const out = JSON.parse(forwardBody(r, mt).toString("utf8")) as Record<string, unknown>;
          const last = new Map(members);
          expect(out.max_tokens).toBe(mt);
          expect(out).not.toHaveProperty("max_completion_tokens");
          for (const [k, v] of last) {
            if (k === "stream") expect(out.stream).toBe(pyTruthy(v));
            if (["max_tokens", "max_completion_tokens", "stream_options", "stream", "n"].includes(k))
              continue;
            if (DROPPED_FIELDS.has(k) || CLAMPED_FIELDS.has(k)) continue;
            expect(out[k]).toEqual(JSON.parse(JSON.stringify(v)));
          }
        },
      ),
      { numRuns: 2000 },
    );
  });
});

describe("usage: the fast check agrees with the zod schema", () => {
  it("property: same verdict and same numbers", () => {
    const usage = fc.oneof(
      edgy,
      fc.record(
        {
          prompt_tokens: edgy,
          completion_tokens: edgy,
          total_tokens: edgy,
          prompt_tokens_details: fc.oneof(edgy, fc.record({ cached_tokens: edgy }, { requiredKeys: [] })),
        },
        { requiredKeys: [] },
      ),
    );
    fc.assert(
      fc.property(usage, (u) => {
        const z = usageSchema.safeParse(u);
        const r = parseUsage(u);
        expect(r.ok).toBe(z.success);
        if (r.ok && z.success)
          expect(r.usage).toEqual({
            promptTokens: z.data.prompt_tokens,
            cachedTokens: z.data.prompt_tokens_details?.cached_tokens ?? 0,
            completionTokens: z.data.completion_tokens,
          });
      }),
      { numRuns: 5000 },
    );
  });
});
