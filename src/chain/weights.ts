/**
 * Float weights → the u16 vector set_weights carries, exactly as the Python SDK's
 * convert_weights_and_uids_for_emit after convert_and_normalize_weights_and_uids:
 * weights become float32 (numpy), are divided by their maximum (in float64, as Python does
 * with float(np.float32)), multiplied by 65535, rounded half to even (Python's round), and
 * entries that round to 0 are dropped together with their uids.
 */
import { InputError } from "../errors.js";

export const U16_MAX = 65535;

/** Python's round(): nearest integer, ties to even. */
export function roundHalfEven(x: number): number {
  const f = Math.floor(x);
  const d = x - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

export interface EmitWeights {
  uids: number[];
  weights: number[];
}

export function convertWeightsForEmit(uids: readonly number[], weights: readonly number[]): EmitWeights {
  if (uids.length !== weights.length)
    throw new InputError(
      "weights_invalid",
      `uids (${uids.length}) and weights (${weights.length}) differ in length`,
    );
  for (const u of uids)
    if (!Number.isInteger(u) || u < 0 || u > U16_MAX)
      throw new InputError("weights_invalid", `uid ${u} is not a u16`);
  const w32 = weights.map((w) => Math.fround(w));
  for (const w of w32)
    if (!Number.isFinite(w) || w < 0)
      throw new InputError("weights_invalid", `weight ${w} is negative or not finite`);
  if (w32.length === 0) return { uids: [], weights: [] };
  // The SDK checks sum == 0 (numpy float32 sum); all weights being ≥ 0, that is "all zero".
  const max = Math.max(...w32);
  if (max === 0) return { uids: [], weights: [] };
  const out: EmitWeights = { uids: [], weights: [] };
  for (let i = 0; i < w32.length; i++) {
    const v = roundHalfEven((w32[i]! / max) * U16_MAX);
    if (v !== 0) {
      out.uids.push(uids[i]!);
      out.weights.push(v);
    }
  }
  return out;
}
