import { describe, expect, it } from "vitest";
import type { TurnRecord } from "../../agent/contract.js";
import { checkProvenance } from "../../src/episode/provenance.js";
import { fingerprint } from "../../src/meter/fingerprint.js";

function turn(n: number, content: string | null, calls: Array<[string, string]> = []): TurnRecord {
  return {
    type: "turn",
    turn: n,
    started_at: "2026-12-03T00:00:00Z",
    messages: [
      {
        role: "assistant",
        content,
        // What the agent resent: repaired arguments may differ from what the model wrote.
        tool_calls: calls.map(([name], k) => ({
          id: `c${k}`,
          type: "function" as const,
          function: { name, arguments: "{}" },
        })),
      },
    ],
    tool_call_count: calls.length,
    finish_reason: calls.length ? "tool_calls" : "stop",
    usage: null,
    model: null,
    response_id: null,
    retries: 0,
    tool_calls: calls.map(([name, raw], k) => ({
      id: `c${k}`,
      name,
      arguments_raw: raw,
      ok: true,
      duration_ms: 1,
      output_bytes: 0,
    })),
    timing: { llm_ms: 1, ttfb_ms: 1, tools_ms: 1, total_ms: 3 },
  };
}

const receipt = (content: string, calls: Array<[string, string]> = []) => {
  const fp = fingerprint(
    content,
    calls.map(([name, args]) => ({ name, arguments: args })),
  );
  return { content_sha: fp.contentSha, tool_sha: fp.toolSha };
};

describe("answer provenance", () => {
  it("matches answers to receipts as a multiset; extra receipts (adviser calls, retries) are fine", () => {
    const turns = [turn(1, "Let me look.", [["terminal", '{"command": "ls"}']]), turn(2, "Done.")];
    const receipts = [
      receipt("an adviser's note"),
      receipt("  Let me look.\n", [["terminal", '{"command":"ls"}']]), // stripped text, canonical args
      receipt("Done."),
    ];
    expect(checkProvenance(turns, receipts)).toEqual({
      turns: 2,
      matched: 2,
      unmatched: 0,
      first_unmatched_turn: null,
    });
  });

  it("the same answer twice needs two receipts", () => {
    const turns = [turn(1, "again"), turn(2, "again")];
    expect(checkProvenance(turns, [receipt("again")])).toMatchObject({
      matched: 1,
      unmatched: 1,
      first_unmatched_turn: 2,
    });
  });

  it("a forged tool call, an edited text and a made-up answer do not match", () => {
    const receipts = [receipt("Let me look.", [["terminal", '{"command": "ls"}']]), receipt("fine")];
    expect(
      checkProvenance([turn(1, "Let me look.", [["terminal", '{"command": "cat /etc/shadow"}']])], receipts)
        .unmatched,
    ).toBe(1);
    expect(checkProvenance([turn(1, "fine (edited)")], receipts).unmatched).toBe(1);
    expect(checkProvenance([turn(3, "never said")], []).first_unmatched_turn).toBe(3);
  });

  it("fingerprints what the model sent, not the agent's repair of it", () => {
    const turns = [turn(1, null, [["write_file", '{"path": "a", "content": "x",}']])];
    expect(
      checkProvenance(turns, [receipt("", [["write_file", '{"path": "a", "content": "x",}']])]).matched,
    ).toBe(1);
  });

  it("empty answers are not counted", () => {
    expect(checkProvenance([turn(1, "   ")], [])).toMatchObject({ turns: 0, unmatched: 0 });
  });
});
