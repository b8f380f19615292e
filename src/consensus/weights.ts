/**
 * Who gets the weight, as upstream's validator decides it (validator.py `_weight_loop_tick`):
 *
 * - a seated winner (the platform gives both a hotkey and a uid) and a fresh cache: 100 % to the
 *   uid the platform gives (upstream never looks the hotkey up on the chain);
 * - a seated winner but a cache older than the trust horizon: burn, everything to the owner's uid;
 * - no seat (cold start, no uid, never fetched): copy the subnet owner's weight row from the chain
 *   (`_fallback_owner_weights`), and burn to the owner's uid only when that row is unreadable
 *   (no owner uid, an empty row, a uid outside the subnet).
 *
 * Never an empty vector: a validator that sets no weights is deregistered. Pure; the row is read
 * by the caller (src/chain) and converted here exactly as bittensor's metagraph converts it.
 */

export const DEFAULT_MAX_WINNER_CACHE_AGE_MS = 24 * 60 * 60 * 1000;

/**
 * winner: the platform's seat; owner_row: no seat, the owner's row copied; no_seat: no seat and
 * the owner's row unreadable, burned; stale_winner_cache: a seat too old to trust, burned.
 */
export type WeightsReason = "winner" | "owner_row" | "no_seat" | "stale_winner_cache";

/** One stored weight: (destination uid, u16 value), as `SubtensorModule.Weights` holds it. */
export type WeightEntry = readonly [uid: number, value: number];

export interface WeightsInput {
  /** The platform's seated winner; null when there is none or nothing was ever fetched. */
  seat: { hotkey: string; uid: number | null } | null;
  /** Age of the cached winner (from the platform), ms; Infinity when nothing was ever fetched. */
  cacheAgeMs: number;
  maxCacheAgeMs?: number;
  /** The subnet owner's uid (the burn target). */
  ownerUid: number;
  /** The owner's stored weight row; undefined when it could not be read. */
  ownerRow: readonly WeightEntry[] | undefined;
  /** Neurons on the subnet (the metagraph's n: the row's length). */
  neuronCount: number;
}

export interface WeightsVector {
  uids: number[];
  /** Floats; convert with the chain's float → u16 rule before emitting. */
  weights: number[];
  reason: WeightsReason;
  /** Everything goes to the owner's uid (the chain burns it). */
  burn: boolean;
}

function isUid(n: unknown): n is number {
  return typeof n === "number" && Number.isInteger(n) && n >= 0 && n <= 0xffff;
}

/** The platform's seat counts only with a hotkey and a uid (winner_state.py `is_seated`). */
export function isSeated(seat: WeightsInput["seat"]): seat is { hotkey: string; uid: number } {
  return seat !== null && seat.hotkey !== "" && seat.uid !== null;
}

export function weightsVector(input: WeightsInput): WeightsVector {
  if (!isUid(input.ownerUid)) throw new RangeError(`ownerUid must be a u16, got ${input.ownerUid}`);
  const burn = (reason: WeightsReason): WeightsVector => ({
    uids: [input.ownerUid],
    weights: [1],
    reason,
    burn: true,
  });
  if (!isSeated(input.seat)) {
    const row = input.ownerRow
      ? ownerRowWeights(input.ownerRow, input.ownerUid, input.neuronCount)
      : undefined;
    if (!row) return burn("no_seat");
    const burnsOnly = row.uids.length === 1 && row.uids[0] === input.ownerUid;
    return { ...row, reason: "owner_row", burn: burnsOnly };
  }
  const maxAge = input.maxCacheAgeMs ?? DEFAULT_MAX_WINNER_CACHE_AGE_MS;
  // NaN or negative ages come from a broken clock; do not trust such a cache.
  if (!(input.cacheAgeMs >= 0) || input.cacheAgeMs > maxAge) return burn("stale_winner_cache");
  return {
    uids: [input.seat.uid],
    weights: [1],
    reason: "winner",
    burn: input.seat.uid === input.ownerUid,
  };
}

/** Whether the weights depend on the owner's row (only then is it worth reading from the chain). */
export function needsOwnerRow(seat: WeightsInput["seat"]): boolean {
  return !isSeated(seat);
}

/**
 * The owner's row as upstream copies it: bittensor's `convert_weight_uids_and_vals_to_tensor`
 * (a float32 row of length n, values placed by uid, divided by their float32 sum) and then every
 * uid with a weight > 0. Undefined where upstream gets nothing: the owner outside the subnet, a uid
 * outside the row (numpy raises), an all-zero row.
 */
export function ownerRowWeights(
  row: readonly WeightEntry[],
  ownerUid: number,
  neuronCount: number,
): { uids: number[]; weights: number[] } | undefined {
  const n = Math.max(0, Math.floor(neuronCount));
  if (ownerUid >= n) return undefined;
  const dense = new Float32Array(n);
  for (const [uid, value] of row) {
    if (!Number.isInteger(uid) || uid < 0 || uid >= n) return undefined;
    dense[uid] = value; // a later entry for the same uid wins, as the Python loop's assignment does
  }
  const sum = float32PairwiseSum(dense);
  if (!(sum > 0)) return undefined;
  const uids: number[] = [];
  const weights: number[] = [];
  for (let uid = 0; uid < n; uid++) {
    // float32 / float32, correctly rounded to float32 (numpy's in-place `/=` on a float32 array).
    const w = Math.fround(dense[uid]! / sum);
    if (w > 0) {
      uids.push(uid);
      weights.push(w);
    }
  }
  return uids.length > 0 ? { uids, weights } : undefined;
}

/**
 * `np.sum` of a contiguous float32 array: numpy's pairwise summation (blocks of up to 128 summed
 * with 8 accumulators, halves above that), every addition rounded to float32. For a subnet's u16
 * row (n ≤ 256) every partial sum is an integer below 2^24 and the order cannot matter; the exact
 * order keeps larger rows equal too.
 */
export function float32PairwiseSum(a: Float32Array, start = 0, n = a.length): number {
  const f = Math.fround;
  if (n < 8) {
    let res = f(-0);
    for (let i = 0; i < n; i++) res = f(res + a[start + i]!);
    return res;
  }
  if (n <= 128) {
    const r = [0, 1, 2, 3, 4, 5, 6, 7].map((j) => a[start + j]!);
    let i = 8;
    for (; i < n - (n % 8); i += 8) for (let j = 0; j < 8; j++) r[j] = f(r[j]! + a[start + i + j]!);
    let res = f(f(f(r[0]! + r[1]!) + f(r[2]! + r[3]!)) + f(f(r[4]! + r[5]!) + f(r[6]! + r[7]!)));
    for (; i < n; i++) res = f(res + a[start + i]!);
    return res;
  }
  let n2 = Math.floor(n / 2);
  n2 -= n2 % 8;
  return f(float32PairwiseSum(a, start, n2) + float32PairwiseSum(a, start + n2, n - n2));
}
