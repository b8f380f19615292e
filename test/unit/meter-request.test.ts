import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseUsage, usageSchema } from "../../src/meter/answer.js";
import { chatKnobsSchema, knobsLookValid, parseChatKnobs } from "../../src/meter/request.js";

/** Values near every boundary the schemas draw, plus the wrong types. */
const edgy = fc.oneof(
  fc.constantFrom(undefined, null, true, false, 0, 1, -1, 1.5, 63, 64, 128, 129, 100_000_000, 100_000_001),
  fc.constantFrom(1_000_000_000, 1_000_000_001, Number.NaN, Number.POSITIVE_INFINITY, "", "x", "1", [], {}),
  fc.integer(),
  fc.double(),
  fc.string({ maxLength: 3 }),
);

describe("request knobs: the fast check agrees with the zod schema", () => {
  it("property: accepts exactly what the schema accepts, and returns the same knobs", () => {
    const body = fc.record(
      {
        model: fc.oneof(edgy, fc.constantFrom("kimi-k3", "x".repeat(200), "x".repeat(201))),
        messages: fc.oneof(edgy, fc.constant([{ role: "user", content: "hi" }])),
        stream: edgy,
        stream_options: fc.oneof(edgy, fc.record({ include_usage: edgy }, { requiredKeys: [] })),
        max_tokens: edgy,
        max_completion_tokens: edgy,
        n: edgy,
        temperature: edgy,
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(body, (b) => {
        const z = chatKnobsSchema.safeParse(b);
        // the fast path never accepts what the schema refuses
        if (knobsLookValid(b)) expect(z.success).toBe(true);
        const r = parseChatKnobs(b);
        expect(r.ok).toBe(z.success);
        if (r.ok && z.success) expect(r.knobs).toEqual(z.data);
      }),
      { numRuns: 5000 },
    );
  });

  it("names the first bad field", () => {
    expect(parseChatKnobs({ model: "m", messages: [], max_tokens: 0 })).toEqual({
      ok: false,
      message: expect.stringContaining("max_tokens"),
    });
    expect(parseChatKnobs({ messages: [] })).toMatchObject({
      ok: false,
      message: expect.stringContaining("model"),
    });
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
