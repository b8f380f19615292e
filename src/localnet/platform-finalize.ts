/**
 * How the platform stand-in finalizes an epoch, as upstream's platform describes it
 * (trajectoryRL INCENTIVE_MECHANISM.md v6.2, "Submission Filter Pipeline", at 319e21c): the score
 * POST is answered 200 whatever the version (docs/API.md's score validations check no version), and
 * at finalize the received rows pass the filter — [1] a rejected challenger verdict is dropped,
 * [6] a validator version below `min_supported` is dropped and "counted toward inactivity, prompts
 * upgrade" — the survivors go to aggregation and are what GET /api/v2/winner/current publishes as
 * the finalized epoch's `submissions[]` ("the per-validator votes that produced the verdict",
 * docs/API.md). Steps [2]–[5] (stake, inactivity, active set, signature) are the stand-in's
 * registration and signature checks at POST time. Pure.
 */

/** One dropped row and the step that dropped it. */
export interface FilteredVote {
  validator_hotkey: string;
  step: 1 | 6;
  reason: string;
}

/** `a < b` for dotted release numbers ("0.7.0" < "0.7.10"); a missing or non-numeric part counts as 0. */
export function versionBelow(a: string, b: string): boolean {
  const parts = (v: string) =>
    v
      .replace(/^v/i, "")
      .split(".")
      .map((p) => Number.parseInt(p, 10) || 0);
  const x = parts(a);
  const y = parts(b);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d !== 0) return d < 0;
  }
  return false;
}

/** The filter pipeline over an epoch's received score bodies: the rows that count, and the dropped. */
export function filterVotes(
  rows: readonly Record<string, unknown>[],
  minSupported: string | undefined,
): { counted: Record<string, unknown>[]; filtered: FilteredVote[] } {
  const counted: Record<string, unknown>[] = [];
  const filtered: FilteredVote[] = [];
  for (const row of rows) {
    const hotkey = String(row.validator_hotkey);
    const challenger = (row.challenger ?? {}) as Record<string, unknown>;
    const version = typeof row.version === "string" ? row.version : "";
    if (challenger.rejected === true)
      filtered.push({ validator_hotkey: hotkey, step: 1, reason: "challenger.rejected = true" });
    else if (minSupported !== undefined && versionBelow(version, minSupported))
      filtered.push({
        validator_hotkey: hotkey,
        step: 6,
        reason: `version ${version} < min_supported ${minSupported}`,
      });
    else counted.push(row);
  }
  return { counted, filtered };
}

/** GET /api/v2/winner/current's `submissions[]` entry for a counted row (docs/API.md shape). */
export function submissionOf(row: Record<string, unknown>): Record<string, unknown> {
  const c = (row.challenger ?? {}) as Record<string, unknown>;
  return {
    validator_hotkey: row.validator_hotkey,
    validator_stake: 1000,
    challenger_pack_hash: null,
    challenger_score: c.score ?? null,
    challenger_qualified: c.qualified ?? null,
    challenger_rejected: c.rejected === true,
    winner_pack_hash: null,
    winner_score: null,
    winner_qualified: null,
    winner_rejected: null,
  };
}

/**
 * The body GET /api/v2/winner/current answers once `epoch` is finalized: the seat as it was (the
 * stand-in seats no winner by itself, so the outcome is "winner_held") and the counted votes.
 */
export function finalizedWinnerResponse(
  epoch: {
    challenge_epoch_id: number;
    spec_number: number | null;
    challenger_hotkey: string;
    challenger_pack_hash: string;
    challenger_pack_url: string | null;
  },
  counted: readonly Record<string, unknown>[],
  previous: unknown,
  finalizedAt: string,
): Record<string, unknown> {
  const seat = (previous as { winner?: unknown } | null)?.winner ?? null;
  return {
    success: true,
    winner: seat,
    finalized_epoch: {
      challenge_epoch_id: epoch.challenge_epoch_id,
      spec_number: epoch.spec_number,
      challenger_hotkey: epoch.challenger_hotkey,
      challenger_pack_hash: epoch.challenger_pack_hash,
      challenger_pack_url: epoch.challenger_pack_url,
      outcome: "winner_held",
      winner_replaced: false,
      finalized_at: finalizedAt,
    },
    submissions: counted.map((row) => ({
      ...submissionOf(row),
      challenger_pack_hash: epoch.challenger_pack_hash,
    })),
  };
}
