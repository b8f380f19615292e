/**
 * Chain failures by NAME. Module errors (ExtrinsicFailed) carry {pallet index, error index}, and
 * the indices move between runtimes (SettingWeightsTooFast is 30 in spec 219, 29 in spec 224), so
 * they are resolved through the connected runtime's metadata, never by number. Pool rejections
 * arrive as JSON-RPC errors ("1010: Invalid Transaction: Custom error: N"); their custom codes are
 * not in the metadata but in subtensor's CustomTransactionError, numbered explicitly and kept
 * stable by subtensor ("do not renumber existing variants").
 */

/** subtensor CustomTransactionError → u8 (runtime/src/.../transaction_extension errors). */
export const SUBTENSOR_CUSTOM_ERRORS: Readonly<Record<number, string>> = {
  0: "ColdkeyInSwapSchedule",
  1: "StakeAmountTooLow",
  2: "BalanceTooLow",
  3: "SubnetNotExists",
  4: "HotkeyAccountDoesntExist",
  5: "NotEnoughStakeToWithdraw",
  6: "RateLimitExceeded",
  7: "InsufficientLiquidity",
  8: "SlippageTooHigh",
  9: "TransferDisallowed",
  10: "HotKeyNotRegisteredInNetwork",
  11: "InvalidIpAddress",
  12: "ServingRateLimitExceeded",
  13: "InvalidPort",
  14: "ZeroMaxAmount",
  15: "InvalidRevealRound",
  16: "CommitNotFound",
  17: "CommitBlockNotInRevealRange",
  18: "InputLengthsUnequal",
  19: "UidNotFound",
  20: "EvmKeyAssociateRateLimitExceeded",
  21: "ColdkeySwapDisputed",
  22: "InvalidRealAccount",
  23: "FailedShieldedTxParsing",
  24: "InvalidShieldedTxPubKeyHash",
  25: "NonAssociatedColdKey",
  26: "DelegateTakeTooLow",
  27: "DelegateTakeTooHigh",
  255: "BadRequest",
};

/** sp_runtime InvalidTransaction / UnknownTransaction texts as substrate's RPC prints them. */
const INVALID_TX_TEXTS: ReadonlyArray<[RegExp, string]> = [
  [/bad signature/i, "BadProof"],
  [/outdated/i, "Stale"],
  [/valid in the future/i, "Future"],
  [/ancient birth block/i, "AncientBirthBlock"],
  [/pay some fees|balance too low/i, "Payment"],
  [/exhaust the block limits/i, "ExhaustsResources"],
  [/bad mandatory/i, "BadMandatory"],
  [/mandatory dispatch/i, "MandatoryValidation"],
  [/call of the transaction is not expected|invalid call/i, "Call"],
  [/signer/i, "BadSigner"],
];

export interface PoolRejection {
  /** JSON-RPC error code: 1010 invalid, 1011 unknown validity, 1012 banned, 1013 already imported, 1014 priority too low. */
  rpcCode: number;
  /** A stable name: the custom error's name, an InvalidTransaction variant, or the RPC error kind. */
  name: string;
  /** The raw custom code, for "Custom error: N". */
  custom?: number;
  message: string;
}

const RPC_CODE_NAMES: Readonly<Record<number, string>> = {
  1002: "VerificationError",
  1011: "UnknownTransactionValidity",
  1012: "TemporarilyBanned",
  1013: "AlreadyImported",
  1014: "PriorityTooLow",
  1015: "CycleDetected",
  1016: "ImmediatelyDropped",
};

/** Parse a pool rejection from the error polkadot-js throws ("CODE: message[: data]"); undefined if it is not one. */
export function parsePoolRejection(err: unknown): PoolRejection | undefined {
  const message = err instanceof Error ? err.message : typeof err === "string" ? err : "";
  const m = /^(\d{4}): ([^:]+)(?:: ([\s\S]*))?$/.exec(message.trim());
  if (!m) return undefined;
  const rpcCode = Number(m[1]);
  const data = m[3] ?? "";
  if (rpcCode === 1010) {
    const custom = /Custom error: (\d+)/i.exec(data);
    if (custom) {
      const n = Number(custom[1]);
      return { rpcCode, name: SUBTENSOR_CUSTOM_ERRORS[n] ?? `Custom${n}`, custom: n, message };
    }
    const known = INVALID_TX_TEXTS.find(([re]) => re.test(data));
    return { rpcCode, name: known?.[1] ?? "InvalidTransaction", message };
  }
  const name = RPC_CODE_NAMES[rpcCode];
  return name ? { rpcCode, name, message } : undefined;
}

export type WeightsErrorKind = "rate_limited" | "permanent" | "transient";

const RATE_LIMITED = new Set([
  "SettingWeightsTooFast",
  "CommittingWeightsTooFast",
  "RateLimitExceeded",
  "TooManyUnrevealedCommits",
  "TxRateLimitExceeded",
]);
/** Operator-side problems that retrying cannot fix: alert, do not loop. */
const PERMANENT = new Set([
  "HotKeyNotRegisteredInSubNet",
  "HotKeyNotRegisteredInNetwork",
  "HotkeyAccountDoesntExist",
  "NeuronNoValidatorPermit",
  "IncorrectWeightVersionKey",
  "CommitRevealEnabled",
  "CommitRevealDisabled",
  "NotEnoughStakeToSetWeights",
  "StakeAmountTooLow",
  "SubnetNotExists",
  "SubNetworkDoesNotExist",
  "WeightVecLengthIsLow",
  "WeightVecNotEqualSize",
  "UidVecContainInvalidOne",
  "UidsLengthExceedUidsInSubNet",
  "MaxWeightExceeded",
  "DuplicateUids",
  "BadProof",
  "Payment",
]);

/** How the weight loop should treat a named failure: wait a window, alert, or retry with back-off. */
export function weightsErrorKind(name: string | undefined): WeightsErrorKind {
  if (name === undefined) return "transient";
  if (RATE_LIMITED.has(name)) return "rate_limited";
  if (PERMANENT.has(name)) return "permanent";
  return "transient";
}
