import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { FaultSchedule, mergeFaults, parseFaultHeader } from "../../src/engy-sim/faults.js";
import { DEFAULT_PROFILE, resolveProfile, SIM_MODELS } from "../../src/engy-sim/profile.js";
import { draw } from "../../src/engy-sim/rng.js";
import {
  ADVERSARIAL,
  countTokens,
  messageTokens,
  promptTokens,
  truncateToTokens,
} from "../../src/engy-sim/tokens.js";
import { applyMaxTokens, completionTokensOf, streamEvents } from "../../src/engy-sim/wire.js";
import type { ValidatorError } from "../../src/errors.js";
import { estimatePromptTokens } from "../../src/meter/estimate.js";

const root = new URL("../..", import.meta.url).pathname;

describe("engy-sim model list and profiles", () => {
  it("the simulator's model ids equal allowlist.json's (or the SPEC 25 list while that file is absent)", () => {
    const spec25 = [
      "deepseek-v4-flash-0731",
      "deepseek-v4.1-flash",
      "qwen3.6-35b-a3b",
      "qwen3.8-27b",
      "glm-5.3-flash",
      "glm-5.2",
      "glm-5.3",
      "kimi-k3",
    ];
    const file = join(root, "allowlist.json");
    let expected = spec25;
    if (existsSync(file)) {
      const json = JSON.parse(readFileSync(file, "utf8")) as unknown;
      const models = Array.isArray(json) ? json : (json as { models?: unknown }).models;
      expect(Array.isArray(models), "allowlist.json: expected an array or {models: [...]}").toBe(true);
      expected = (models as unknown[]).map((m) =>
        typeof m === "string"
          ? m
          : String((m as { id?: string; model?: string }).id ?? (m as { model?: string }).model),
      );
    }
    expect([...SIM_MODELS].sort()).toEqual([...expected].sort());
    expect(new Set(SIM_MODELS).size).toBe(8);
  });

  it("skill rises with price (price-table.json when present): expensive = strong", () => {
    const file = join(root, "price-table.json");
    const prices: Record<string, { prompt: number; completion: number }> = existsSync(file)
      ? (
          JSON.parse(readFileSync(file, "utf8")) as {
            models: Record<string, { prompt: number; completion: number }>;
          }
        ).models
      : {};
    const ids = [...SIM_MODELS];
    if (Object.keys(prices).length > 0) {
      expect(Object.keys(prices).sort()).toEqual([...ids].sort());
      // Blended list price of a typical agent turn (mostly prompt), a stable proxy for "cost tier".
      const cost = (id: string) => prices[id]!.prompt * 3 + prices[id]!.completion;
      ids.sort((a, b) => cost(a) - cost(b));
    }
    const skills = ids.map((id) => DEFAULT_PROFILE.models[id]!.skill);
    expect(skills).toEqual([...skills].sort((a, b) => a - b));
    expect(DEFAULT_PROFILE.models["kimi-k3"]!.skill).toBeGreaterThanOrEqual(0.85);
    expect(Math.min(...skills)).toBeLessThanOrEqual(0.4);
  });

  it("an override changes only what it names; unknown models and bad values are input errors", () => {
    const p = resolveProfile({ models: { "kimi-k3": { skill: 0.5 } }, partial_rate: 0 });
    expect(p.models["kimi-k3"]!.skill).toBe(0.5);
    expect(p.models["kimi-k3"]!.ttft_ms).toBe(DEFAULT_PROFILE.models["kimi-k3"]!.ttft_ms);
    expect(p.models["glm-5.3"]).toEqual(DEFAULT_PROFILE.models["glm-5.3"]);
    expect(p.partial_rate).toBe(0);
    // A whole resolved profile is a valid override of itself (callers may pass SimProfile objects).
    expect(resolveProfile(DEFAULT_PROFILE)).toEqual(DEFAULT_PROFILE);
    const bad = (o: unknown) => {
      try {
        resolveProfile(o as never);
        return undefined;
      } catch (e) {
        return e as ValidatorError;
      }
    };
    expect(bad({ models: { "gpt-9": { skill: 1 } } })?.code).toBe("invalid_sim_profile");
    expect(bad({ models: { "kimi-k3": { skill: 1.5 } } })?.code).toBe("invalid_sim_profile");
    expect(bad({ models: { "kimi-k3": { skil: 0.5 } } })?.failureClass).toBe("input");
  });
});

describe("engy-sim token rule", () => {
  it("ASCII ≈ 4 chars per token rounded up, 1 per non-ASCII code point", () => {
    expect(countTokens("")).toBe(0);
    expect(countTokens("abcd")).toBe(1);
    expect(countTokens("abcde")).toBe(2);
    expect(countTokens("héllo")).toBe(1 + 1); // 4 ASCII → 1, é → 1
    expect(countTokens("日本語")).toBe(3);
    expect(countTokens("😀")).toBe(1); // one code point, two UTF-16 units
  });

  it("messages carry 4 tokens of overhead; tools count in the prompt", () => {
    const m = { content: "abcdefgh", toolCalls: [] };
    expect(messageTokens(m)).toBe(4 + 2);
    expect(
      messageTokens({ content: "", toolCalls: [{ name: "terminal", arguments: '{"command":"ls"}' }] }),
    ).toBe(4 + 4 + 2 + 4);
    const tools = [{ type: "function", function: { name: "terminal" } }];
    expect(promptTokens([m], tools)).toBe(3 + 6 + countTokens(JSON.stringify(tools)));
    expect(promptTokens([m], undefined)).toBe(3 + 6);
  });

  it("truncateToTokens keeps the longest prefix within the limit", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 80 }), fc.nat(40), (s, n) => {
        const t = truncateToTokens(s, n);
        expect(s.startsWith(t)).toBe(true);
        expect(countTokens(t)).toBeLessThanOrEqual(n);
        if (t.length < s.length)
          expect(
            countTokens(s.slice(0, t.length + (s.codePointAt(t.length)! > 0xffff ? 2 : 1))),
          ).toBeGreaterThan(n);
      }),
      { numRuns: 200 },
    );
  });
});

describe("engy-sim adversarial tokenizer", () => {
  it("digits, symbols and spaces one each, letters four to a token, non-ASCII one per UTF-8 byte", () => {
    expect(countTokens("abcdefgh", ADVERSARIAL)).toBe(2);
    expect(countTokens("0123456789", ADVERSARIAL)).toBe(10);
    expect(countTokens("a1b2", ADVERSARIAL)).toBe(4);
    expect(countTokens("!@# ", ADVERSARIAL)).toBe(4);
    expect(countTokens("é日😀", ADVERSARIAL)).toBe(2 + 3 + 4);
  });

  it("property: never more than one token per UTF-8 byte; truncation keeps the longest prefix within the limit", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 80 }), fc.nat(40), (s, n) => {
        expect(countTokens(s, ADVERSARIAL)).toBeLessThanOrEqual(Buffer.byteLength(s));
        const t = truncateToTokens(s, n, ADVERSARIAL);
        expect(s.startsWith(t)).toBe(true);
        expect(countTokens(t, ADVERSARIAL)).toBeLessThanOrEqual(n);
        if (t.length < s.length)
          expect(
            countTokens(s.slice(0, t.length + (s.codePointAt(t.length)! > 0xffff ? 2 : 1)), ADVERSARIAL),
          ).toBeGreaterThan(n);
      }),
      { numRuns: 300 },
    );
  });

  it("beats upstream's estimate where an adversary would push: a digit run costs ~2.4× the estimate", () => {
    const digits = "7".repeat(120_000);
    const billed = promptTokens([{ content: digits, toolCalls: [] }], undefined, ADVERSARIAL);
    const est = estimatePromptTokens({ messages: [{ role: "user", content: digits }] });
    expect(billed / est).toBeGreaterThan(2.3);
  });
});

describe("engy-sim draws", () => {
  it("are deterministic, in [0,1), and roughly uniform", () => {
    expect(draw(11, "x", 0, "solve")).toBe(draw(11, "x", 0, "solve"));
    expect(draw(11, "x", 0, "solve")).not.toBe(draw(12, "x", 0, "solve"));
    let below = 0;
    for (let i = 0; i < 2000; i++) {
      const u = draw("u", i);
      expect(u).toBeGreaterThanOrEqual(0);
      expect(u).toBeLessThan(1);
      if (u < 0.3) below++;
    }
    expect(below / 2000).toBeGreaterThan(0.25);
    expect(below / 2000).toBeLessThan(0.35);
  });
});

describe("engy-sim faults", () => {
  it("parses the x-sim-fault header grammar", () => {
    expect(parseFaultHeader("429;retry-after=3")).toEqual([{ kind: "429", retryAfterS: 3 }]);
    expect(parseFaultHeader("stall=250, drip=10,no-usage")).toEqual([
      { kind: "stall", ms: 250 },
      { kind: "drip", ms: 10 },
      { kind: "no_usage" },
    ]);
    expect(parseFaultHeader("cut=3")).toEqual([{ kind: "cut", afterChunks: 3 }]);
    expect(parseFaultHeader("error")).toEqual([{ kind: "error" }]);
    for (const bad of ["teapot", "stall", "429=5", "cut;retry-after=1", "drip=x"])
      expect(() => parseFaultHeader(bad), bad).toThrow();
    const merged = mergeFaults(parseFaultHeader("503,stall=5,stall=9"));
    expect(merged.status).toEqual({ code: 503, retryAfterS: 1 });
    expect(merged.stallMs).toBe(9);
  });

  it("a plan fires bursts, every Nth request, per model, and seeded rates reproducibly", () => {
    const fired = (s: FaultSchedule, model: string, n: number) =>
      Array.from({ length: n }, () => s.next(model).length > 0);
    const burst = new FaultSchedule(1, { rules: [{ fault: { kind: "503" }, count: 2 }] });
    expect(fired(burst, "kimi-k3", 5)).toEqual([true, true, false, false, false]);
    const every = new FaultSchedule(1, { rules: [{ fault: { kind: "429" }, start: 3, every: 3 }] });
    expect(fired(every, "kimi-k3", 7)).toEqual([false, false, true, false, false, true, false]);
    const periodic = new FaultSchedule(1, { rules: [{ fault: { kind: "429" }, every: 4, count: 2 }] });
    expect(fired(periodic, "m", 8)).toEqual([true, true, false, false, true, true, false, false]);
    const perModel = new FaultSchedule(1, {
      rules: [{ fault: { kind: "cut" }, model: "glm-5.2", count: 1 }],
    });
    expect(fired(perModel, "kimi-k3", 2)).toEqual([false, false]);
    expect(fired(perModel, "glm-5.2", 2)).toEqual([true, false]);
    const rate = (seed: number) =>
      fired(new FaultSchedule(seed, { rules: [{ fault: { kind: "error" }, rate: 0.5 }] }), "m", 40);
    expect(rate(7)).toEqual(rate(7));
    expect(rate(7)).not.toEqual(rate(8));
    const n = rate(7).filter(Boolean).length;
    expect(n).toBeGreaterThan(10);
    expect(n).toBeLessThan(30);
    burst.set({ rules: [{ fault: { kind: "503" }, count: 1 }] });
    expect(fired(burst, "kimi-k3", 2)).toEqual([true, false]);
  });
});

describe("engy-sim wire", () => {
  const calls = [
    { name: "read_file", arguments: '{"path":"/workspace/SKILL.md"}' },
    { name: "read_file", arguments: '{"path":"/workspace/INSTRUCTION.md"}' },
  ];

  it("max_tokens cuts text first, then tool calls mid-arguments, and reports truncation", () => {
    const text = "x".repeat(40); // 10 tokens
    expect(applyMaxTokens(text, calls, undefined).truncated).toBe(false);
    expect(applyMaxTokens(text, calls, 1000).truncated).toBe(false);
    const a = applyMaxTokens(text, calls, 4);
    expect(a).toEqual({ content: "x".repeat(16), toolCalls: [], truncated: true });
    const b = applyMaxTokens(text, calls, 10 + 3 + 8 + 5);
    expect(b.truncated).toBe(true);
    expect(b.toolCalls).toHaveLength(2);
    expect(b.toolCalls[1]!.arguments).not.toBe(calls[1]!.arguments);
    expect(() => JSON.parse(b.toolCalls[1]!.arguments)).toThrow();
    expect(completionTokensOf(b.content, b.toolCalls)).toBeLessThanOrEqual(26);
  });

  it("stream events: role first, tool-call id+name in the first fragment, finish, optional usage, [DONE]", () => {
    const completion = {
      id: "chatcmpl-x",
      created: 1,
      model: "kimi-k3",
      requestId: "req_1",
      content: "Reading the files now, then I will look at /app.",
      toolCalls: calls.map((c, i) => ({ ...c, id: `call_${i}` })),
      finishReason: "tool_calls" as const,
      usage: {
        prompt_tokens: 10,
        completion_tokens: 5,
        total_tokens: 15,
        prompt_tokens_details: { cached_tokens: 0 },
      },
    };
    const evs = streamEvents(completion, { usage: true, chunkChars: 8 });
    expect(evs.at(-1)).toBe("data: [DONE]\n\n");
    const json = evs.slice(0, -1).map((e) => JSON.parse(e.slice(6)));
    expect(json[0].choices[0].delta.role).toBe("assistant");
    const fragments = json.flatMap((j) => j.choices[0]?.delta?.tool_calls ?? []);
    expect(fragments.filter((f: { id?: string }) => f.id).map((f: { id: string }) => f.id)).toEqual([
      "call_0",
      "call_1",
    ]);
    for (const [i, c] of calls.entries())
      expect(
        fragments
          .filter((f: { index: number }) => f.index === i)
          .map((f: { function: { arguments?: string } }) => f.function.arguments ?? "")
          .join(""),
      ).toBe(c.arguments);
    const finish = json.at(-2);
    expect(finish.choices[0].finish_reason).toBe("tool_calls");
    expect(finish.x_engy.request_id).toBe("req_1");
    expect(json.at(-1).choices).toEqual([]);
    expect(json.at(-1).usage.total_tokens).toBe(15);
    expect(streamEvents(completion, { usage: false, chunkChars: 8 }).some((e) => e.includes('"usage"'))).toBe(
      false,
    );
  });
});
