/**
 * Provenance: every answer the agent acted on must be one a model wrote through the meter. The
 * meter fingerprints each answer it forwarded (src/meter/fingerprint.ts: sha of the stripped text,
 * sha of the [name, canonical arguments] list of its tool calls); here the same fingerprint is
 * taken of each assistant message the agent recorded (turns.jsonl, tool-call arguments as the model
 * sent them, before any repair) and matched against the episode's receipts as a multiset. An
 * answer that matches no receipt was made up or edited by the policy. Pure.
 */
import { fingerprint } from "../meter/index.js";

export interface AnswerProvenance {
  /** Agent turns that carried an answer (text or tool calls). */
  turns: number;
  matched: number;
  unmatched: number;
  /** The first turn whose answer no model gave, for the error message. */
  first_unmatched_turn: number | null;
}

/** What provenance reads of a turn record (src/episode/turn-records.ts parses them). */
export interface ProvenanceTurn {
  turn: number;
  messages: ReadonlyArray<{ role: string; content?: string | null | undefined }>;
  tool_calls: ReadonlyArray<{ name: string; arguments_raw: string }>;
}

export interface ReceiptFingerprint {
  content_sha: string | null;
  tool_sha: string | null;
}

const keyOf = (content: string | null, tools: string | null) => `${content ?? ""}|${tools ?? ""}`;

export function checkProvenance(
  turns: readonly ProvenanceTurn[],
  receipts: readonly ReceiptFingerprint[],
): AnswerProvenance {
  const available = new Map<string, number>();
  for (const r of receipts) {
    if (r.content_sha === null && r.tool_sha === null) continue;
    const k = keyOf(r.content_sha, r.tool_sha);
    available.set(k, (available.get(k) ?? 0) + 1);
  }
  const out: AnswerProvenance = { turns: 0, matched: 0, unmatched: 0, first_unmatched_turn: null };
  for (const t of turns) {
    const answer = t.messages[0];
    if (answer?.role !== "assistant") continue;
    const fp = fingerprint(
      answer.content ?? "",
      t.tool_calls.map((c) => ({ name: c.name, arguments: c.arguments_raw })),
    );
    if (fp.contentSha === null && fp.toolSha === null) continue;
    out.turns++;
    const k = keyOf(fp.contentSha, fp.toolSha);
    const n = available.get(k) ?? 0;
    if (n > 0) {
      available.set(k, n - 1);
      out.matched++;
    } else {
      out.unmatched++;
      out.first_unmatched_turn ??= t.turn;
    }
  }
  return out;
}
