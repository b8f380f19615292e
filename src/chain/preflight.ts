/** Pre-flight checks before signing weights: pure over a snapshot. */
import type { Preflight, PreflightProblem, SubnetSnapshot } from "./types.js";
import { U16_MAX } from "./weights.js";

export interface PreflightInput {
  hotkey: string;
  uids: readonly number[];
  weights: readonly number[];
  versionKey: number;
}

export function preflightCheck(snap: SubnetSnapshot, input: PreflightInput): Preflight {
  const problems: PreflightProblem[] = [];
  const neuron = snap.neurons.find((n) => n.hotkey === input.hotkey);
  const uid = neuron?.uid;
  let blocksUntilAllowed = 0;
  if (!neuron) {
    problems.push({
      code: "not_registered",
      kind: "permanent",
      message: `hotkey ${input.hotkey} holds no uid on subnet ${snap.netuid}`,
    });
  } else {
    if (!neuron.validatorPermit)
      problems.push({
        code: "no_validator_permit",
        kind: "permanent",
        message: `uid ${neuron.uid} has no validator permit on subnet ${snap.netuid}`,
      });
    // The chain allows weights when head − LastUpdate ≥ WeightsSetRateLimit (0 = never set).
    const since = snap.block - neuron.lastUpdate;
    if (neuron.lastUpdate > 0 && since < snap.weightsSetRateLimit) {
      blocksUntilAllowed = snap.weightsSetRateLimit - since;
      problems.push({
        code: "rate_limited",
        kind: "rate_limited",
        message: `last weights at block ${neuron.lastUpdate}, ${since} blocks ago; the limit is ${snap.weightsSetRateLimit}`,
      });
    }
  }
  if (snap.weightsVersionKey > 0 && input.versionKey < snap.weightsVersionKey)
    problems.push({
      code: "version_key_too_low",
      kind: "permanent",
      message: `version key ${input.versionKey} is below the subnet's ${snap.weightsVersionKey}`,
    });
  const n = snap.neurons.length;
  const badUid = input.uids.find((u) => !Number.isInteger(u) || u < 0 || u >= n);
  const badWeight = input.weights.find((w) => !Number.isInteger(w) || w < 0 || w > U16_MAX);
  if (
    input.uids.length !== input.weights.length ||
    input.uids.length === 0 ||
    badUid !== undefined ||
    badWeight !== undefined
  )
    problems.push({
      code: "weights_invalid",
      kind: "permanent",
      message:
        input.uids.length !== input.weights.length
          ? `uids (${input.uids.length}) and weights (${input.weights.length}) differ in length`
          : input.uids.length === 0
            ? "no weights to set"
            : badUid !== undefined
              ? `uid ${badUid} is not on subnet ${snap.netuid} (n = ${n})`
              : `weight ${badWeight} is not a u16`,
    });
  else if (new Set(input.uids).size !== input.uids.length)
    problems.push({ code: "weights_invalid", kind: "permanent", message: "duplicate uids" });
  // Subtensor lets a validator weigh only itself; otherwise it needs min(MinAllowedWeights, n) entries.
  const selfOnly = uid !== undefined && input.uids.length === 1 && input.uids[0] === uid;
  const minLen = Math.min(snap.minAllowedWeights, n);
  if (!selfOnly && input.uids.length > 0 && input.uids.length < minLen)
    problems.push({
      code: "weight_vec_too_short",
      kind: "permanent",
      message: `${input.uids.length} weight(s) set, the subnet requires at least ${minLen}`,
    });
  return { ok: problems.length === 0, uid, block: snap.block, blocksUntilAllowed, problems };
}
