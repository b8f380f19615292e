/**
 * Small helpers shared by the chain modules: SCALE codec values to plain numbers, and waits that
 * honour an AbortSignal and a deadline.
 */
import type { Codec } from "@polkadot/types/types";
import { type ErrorCode, InfraError } from "../errors.js";

export const toNum = (c: Codec): number => {
  const v = c.toPrimitive();
  if (typeof v === "number") return v;
  if (typeof v === "string" || typeof v === "bigint") return Number(v);
  if (typeof v === "boolean") return v ? 1 : 0;
  throw new InfraError("chain_decode_failed", `expected a number, got ${JSON.stringify(v)}`);
};
export const toBig = (c: Codec): bigint => BigInt(c.toString());
export const toBool = (c: Codec): boolean => c.toPrimitive() === true;
export const toList = <T>(c: Codec): T[] => c.toPrimitive() as T[];

/** `p`, or an InfraError `code` after `ms`, or the signal's reason when it aborts first. */
export async function withDeadline<T>(
  p: Promise<T>,
  ms: number,
  signal: AbortSignal | undefined,
  code: ErrorCode,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new InfraError(code, `no answer from the chain within ${ms} ms`)),
          ms,
        );
        if (signal) {
          onAbort = () => reject(signal.reason ?? new DOMException("aborted", "AbortError"));
          if (signal.aborted) onAbort();
          else signal.addEventListener("abort", onAbort, { once: true });
        }
      }),
    ]);
  } finally {
    clearTimeout(timer);
    if (onAbort) signal?.removeEventListener("abort", onAbort);
  }
}
