import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseUsage, usageSchema } from "../../src/meter/answer.js";
import {
  CLAMPED_FIELDS,
  DROPPED_FIELDS,
  forwardBody,
  InvalidRequest,
  parseChatRequest,
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
      thinking_budget: 100_000,
      max_thinking_tokens: 100_000,
      max_reasoning_tokens: 100_000,
      min_tokens: 5_000,
      reasoning: { effort: "high", max_tokens: 90_000 },
      thinking: { type: "enabled", budget_tokens: 90_000 },
      ignore_eos: true,
    };
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

  it("knobs read as Python reads them: stream by truthiness, n for the worst case", () => {
    const req = (b: string) => parseChatRequest(Buffer.from(b));
    expect(req('{"stream":1}').stream).toBe(true);
    expect(req('{"stream":"false"}').stream).toBe(true);
    expect(req('{"stream":0}').stream).toBe(false);
    expect(req('{"stream":[]}').stream).toBe(false);
    expect(req('{"n":3}').n).toBe(3);
    expect(req('{"n":"2"}').n).toBe(2);
    expect(req('{"n":0}').n).toBe(1);
    expect(() => req('{"max_tokens":1e400}')).toThrow(InvalidRequest);
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
            if (["max_tokens", "max_completion_tokens", "stream_options"].includes(k)) continue;
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
