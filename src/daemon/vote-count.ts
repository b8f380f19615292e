/**
 * Was this validator's vote counted? The platform answers a score POST from a validator whose
 * `version` is below its `min_supported` with 200, like any other, and drops the row only when it
 * finalizes the epoch (trajectoryRL INCENTIVE_MECHANISM.md v6.2 at 319e21c, "Submission Filter
 * Pipeline" step [6]: "counted toward inactivity, prompts upgrade"; docs/API.md lists no version
 * check among the score POST's validations). What a validator can see is the finalized epoch's
 * `submissions[]` on GET /api/v2/winner/current — "the per-validator votes that produced the
 * verdict" (docs/API.md) — without its own. So a vote the platform accepted (HTTP 200, or a 409
 * duplicate of one it did) and that is missing there was filtered: an alarm with its fix, never a
 * silent loss. A rejection verdict is left out: step [1] drops every `rejected: true` row. Pure.
 */
import type { OutboxEntry, WinnerCurrent } from "../platform/index.js";

export type VoteCount =
  | { kind: "counted"; epochId: number }
  | { kind: "not_counted"; epochId: number; deliveredAt: number | null }
  /** No finalized epoch yet, or this validator delivered no countable vote for it. */
  | { kind: "unknown" };

export function ownVoteCount(
  wc: WinnerCurrent,
  hotkey: string,
  delivered: OutboxEntry | undefined,
): VoteCount {
  const epochId = wc.finalized_epoch?.challenge_epoch_id;
  if (epochId === undefined || !delivered || delivered.epochId !== epochId) return { kind: "unknown" };
  const accepted =
    delivered.state === "delivered" &&
    (delivered.outcome === "delivered" || delivered.outcome === "duplicate");
  if (!accepted || delivered.verdict.challenger.rejected === true) return { kind: "unknown" };
  return wc.submissions.some((s) => s.validator_hotkey === hotkey)
    ? { kind: "counted", epochId }
    : { kind: "not_counted", epochId, deliveredAt: delivered.deliveredAt };
}

/** The alarm's text: what happened, the likely cause, and the fix. */
export function voteNotCountedMessage(epochId: number, votesAs: string): string {
  return (
    `epoch ${epochId} finalized without this validator's vote, which the platform had accepted: its ` +
    `submission filter dropped it — a validator version below the platform's min_supported (this build ` +
    `sends version ${votesAs}), or stake, inactivity or the active set. Fix: upgrade trajrl-validator to ` +
    `the release for the platform's current rules (after 3 uncounted epochs the platform takes this ` +
    `validator out of the quorum)`
  );
}
