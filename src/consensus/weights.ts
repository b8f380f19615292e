/**
 * Who gets the weight: 100 % to the seated winner's uid, else everything to the subnet owner's
 * uid (the chain burns miner emission routed to the owner). Never an empty vector: a validator
 * that sets no weights is deregistered.
 */

export const DEFAULT_MAX_WINNER_CACHE_AGE_MS = 24 * 60 * 60 * 1000;

export type WeightsReason = "winner" | "no_seat" | "winner_deregistered" | "stale_winner_cache";

export interface WeightsInput {
  /** The seated winner's uid on the subnet, when there is a seat. */
  winnerUid?: number | undefined;
  ownerUid: number;
  /** The winner's hotkey still holds winnerUid on chain. */
  winnerRegistered: boolean;
  /** Age of the cached winner (from the platform), ms. */
  cacheAgeMs: number;
  maxCacheAgeMs?: number;
}

export interface WeightsVector {
  uids: number[];
  /** Floats summing to 1; convert with the chain's float → u16 rule before emitting. */
  weights: number[];
  reason: WeightsReason;
  burn: boolean;
}

function isUid(n: unknown): n is number {
  return typeof n === "number" && Number.isInteger(n) && n >= 0 && n <= 0xffff;
}

export function weightsVector(input: WeightsInput): WeightsVector {
  if (!isUid(input.ownerUid)) throw new RangeError(`ownerUid must be a u16, got ${input.ownerUid}`);
  const maxAge = input.maxCacheAgeMs ?? DEFAULT_MAX_WINNER_CACHE_AGE_MS;
  const burn = (reason: WeightsReason): WeightsVector => ({
    uids: [input.ownerUid],
    weights: [1],
    reason,
    burn: true,
  });
  if (input.winnerUid === undefined) return burn("no_seat");
  if (!isUid(input.winnerUid)) throw new RangeError(`winnerUid must be a u16, got ${input.winnerUid}`);
  if (!input.winnerRegistered) return burn("winner_deregistered");
  // NaN or negative ages come from a broken clock; do not trust such a cache.
  if (!(input.cacheAgeMs >= 0) || input.cacheAgeMs > maxAge) return burn("stale_winner_cache");
  return {
    uids: [input.winnerUid],
    weights: [1],
    reason: "winner",
    burn: input.winnerUid === input.ownerUid,
  };
}
