/**
 * Whether an in-progress epoch is worth evaluating now. Pure; mirrors the Python daemon's gates
 * (trajectoryrl/base/validator.py `_eval_loop_tick`, `_epoch_has_budget`, `_commitment_from_epoch`).
 */
import type { EpochCurrent } from "./schemas.js";

/** Past this fraction of the epoch's blocks the eval would likely land after finalize: skip. */
export const LATEST_START_RATIO = 0.5;

export type EpochDecision =
  | { evaluate: true; epochId: number; packUrl: string; packHash: string; specNumber: number | null }
  | {
      evaluate: false;
      epochId: number | null;
      reason: "no_epoch" | "already_scored" | "too_late" | "no_pack_url" | "not_in_progress";
    };

/**
 * `alreadyScored` comes from ScoredEpochRepo. When the server cannot report `elapsed_blocks`
 * (its chain RPC is down) or the epoch length is unknown, the time gate is passed, as in Python.
 * One gate is ours: an epoch whose status is not `in_progress` is not evaluated (the Python tick
 * does not look; the server refuses a score for a closed epoch, so no verdict can differ).
 */
export function assessEpoch(
  current: EpochCurrent | null,
  alreadyScored: (epochId: number) => boolean,
  latestStartRatio = LATEST_START_RATIO,
): EpochDecision {
  const epoch = current?.epoch;
  if (!current || !epoch) return { evaluate: false, epochId: null, reason: "no_epoch" };
  const epochId = epoch.challenge_epoch_id;
  if (epoch.status !== "in_progress") return { evaluate: false, epochId, reason: "not_in_progress" };
  if (alreadyScored(epochId)) return { evaluate: false, epochId, reason: "already_scored" };
  const length = epoch.budget_length_blocks;
  if (current.elapsed_blocks !== null && length > 0 && current.elapsed_blocks / length > latestStartRatio) {
    return { evaluate: false, epochId, reason: "too_late" };
  }
  if (!epoch.challenger_pack_url) return { evaluate: false, epochId, reason: "no_pack_url" };
  return {
    evaluate: true,
    epochId,
    packUrl: epoch.challenger_pack_url,
    packHash: epoch.challenger_pack_hash,
    specNumber: epoch.spec_number,
  };
}

/**
 * The mid-evaluation abort probe: is the epoch we are evaluating still the current one? A failed
 * probe (null `current` because of a transport error is the caller's to decide; pass `undefined`)
 * assumes yes, to avoid false aborts, as Python does.
 */
export function stillCurrent(
  current: EpochCurrent | null | undefined,
  epochId: number,
  packHash: string,
): boolean {
  if (current === undefined) return true;
  const e = current?.epoch;
  if (e?.status !== "in_progress") return false;
  return e.challenge_epoch_id === epochId && e.challenger_pack_hash === packHash.toLowerCase();
}
