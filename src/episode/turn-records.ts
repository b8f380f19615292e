/**
 * The built-in agent's session record (`turns.jsonl`, agent/README.md) read at the boundary: each
 * line parsed with zod into the fields the episode uses (provenance, the agent's summary), the rest
 * passed through. A line that is not JSON, not an object, of an unknown type or missing what its
 * type promises is counted and reported, never thrown: a record the agent (or anyone) got wrong
 * must not crash the episode. Pure.
 */
import { z } from "zod";

const ToolCallRecord = z
  .object({
    name: z.string(),
    /** What the model sent, verbatim: what provenance fingerprints. */
    arguments_raw: z.string(),
  })
  .passthrough();

const Message = z
  .object({
    role: z.enum(["system", "user", "assistant", "tool"]),
    content: z.string().nullable().optional(),
  })
  .passthrough();

const count = z.number().int().nonnegative();

const TurnRecord = z
  .object({
    type: z.literal("turn"),
    turn: count,
    messages: z.array(Message),
    tool_calls: z.array(ToolCallRecord),
    tool_call_count: count,
    finish_reason: z.string().nullable(),
  })
  .passthrough();

const SummaryRecord = z
  .object({
    type: z.literal("summary"),
    reason: z.string(),
    code: z.string().optional(),
    turns: count,
    tool_call_count: count,
  })
  .passthrough();

const SessionRecord = z.object({ type: z.literal("session") }).passthrough();

export type ValidTurnRecord = z.infer<typeof TurnRecord>;
export type ValidSummaryRecord = z.infer<typeof SummaryRecord>;

export interface InvalidRecord {
  /** 1-based line number in turns.jsonl. */
  line: number;
  /** The record's `type` when it had one (a forged or broken turn shows as "turn"). */
  type: string | null;
  reason: string;
}

export interface TurnRecords {
  session: Record<string, unknown> | undefined;
  turns: ValidTurnRecord[];
  summary: ValidSummaryRecord | undefined;
  /** Lines that are not a valid record (the first few are kept in `firstInvalid`). */
  invalid: number;
  /** Of those, lines that claimed to be a turn: an answer the episode cannot check. */
  invalidTurns: number;
  firstInvalid: InvalidRecord[];
}

const KEEP_INVALID = 5;

export function parseTurnRecords(text: string): TurnRecords {
  const out: TurnRecords = {
    session: undefined,
    turns: [],
    summary: undefined,
    invalid: 0,
    invalidTurns: 0,
    firstInvalid: [],
  };
  const bad = (line: number, type: string | null, reason: string) => {
    out.invalid++;
    if (type === "turn") out.invalidTurns++;
    if (out.firstInvalid.length < KEEP_INVALID) out.firstInvalid.push({ line, type, reason });
  };
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!;
    if (raw.trim() === "") continue;
    const n = i + 1;
    let rec: unknown;
    try {
      rec = JSON.parse(raw);
    } catch {
      bad(n, null, "not JSON");
      continue;
    }
    if (rec === null || typeof rec !== "object" || Array.isArray(rec)) {
      bad(n, null, "not an object");
      continue;
    }
    const type = (rec as { type?: unknown }).type;
    const schema =
      type === "turn"
        ? TurnRecord
        : type === "summary"
          ? SummaryRecord
          : type === "session"
            ? SessionRecord
            : null;
    if (schema === null) {
      bad(n, typeof type === "string" ? type : null, "unknown record type");
      continue;
    }
    const r = schema.safeParse(rec);
    if (!r.success) {
      const issue = r.error.issues[0];
      bad(n, type as string, `${issue?.path.join(".") || "record"}: ${issue?.message ?? "invalid"}`);
      continue;
    }
    if (type === "turn") out.turns.push(r.data as ValidTurnRecord);
    else if (type === "summary") out.summary = r.data as ValidSummaryRecord;
    else out.session = r.data as Record<string, unknown>;
  }
  return out;
}
