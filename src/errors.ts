/**
 * The error taxonomy. Every failure of an episode is attributed to exactly one class:
 * - policy:   the miner's fault (crash, hang, refused every call, bad policy file) → scores the episode
 * - upstream: the model provider (5xx, timeouts, truncated streams) → retried or discarded, never costs a miner
 * - infra:    Docker, disk, the platform, the chain, or our own bug → retried or discarded, never costs a miner
 * - input:    something an operator or miner handed us (bad pack, bad flag, bad env) → a clear message, no trace
 * Callers branch on `code`, never on the message.
 */
import type { ErrorCode } from "./error-codes.js";

export type { ErrorCode } from "./error-codes.js";

export type FailureClass = "policy" | "upstream" | "infra" | "input";

export interface ValidatorErrorOptions {
  cause?: unknown;
  retryable?: boolean;
  detail?: Record<string, unknown>;
}

export class ValidatorError extends Error {
  readonly code: ErrorCode;
  readonly failureClass: FailureClass;
  readonly retryable: boolean;
  readonly detail: Record<string, unknown> | undefined;

  constructor(
    failureClass: FailureClass,
    code: ErrorCode,
    message: string,
    opts: ValidatorErrorOptions = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = "ValidatorError";
    this.code = code;
    this.failureClass = failureClass;
    this.retryable = opts.retryable ?? failureClass !== "policy";
    this.detail = opts.detail;
  }

  toJSON(): Record<string, unknown> {
    return { class: this.failureClass, code: this.code, message: this.message, detail: this.detail };
  }
}

/** Bad input from an operator or a miner: printed as one line, never with a stack trace. */
export class InputError extends ValidatorError {
  constructor(code: ErrorCode, message: string, opts: ValidatorErrorOptions = {}) {
    super("input", code, message, { retryable: false, ...opts });
    this.name = "InputError";
  }
}

export class PolicyError extends ValidatorError {
  constructor(code: ErrorCode, message: string, opts: ValidatorErrorOptions = {}) {
    super("policy", code, message, { retryable: false, ...opts });
    this.name = "PolicyError";
  }
}

export class UpstreamError extends ValidatorError {
  constructor(code: ErrorCode, message: string, opts: ValidatorErrorOptions = {}) {
    super("upstream", code, message, { retryable: true, ...opts });
    this.name = "UpstreamError";
  }
}

export class InfraError extends ValidatorError {
  constructor(code: ErrorCode, message: string, opts: ValidatorErrorOptions = {}) {
    super("infra", code, message, { retryable: true, ...opts });
    this.name = "InfraError";
  }
}

/** Anything thrown that is not ours is our bug or the machine's: infra. */
export function toValidatorError(err: unknown, code: ErrorCode = "internal_error"): ValidatorError {
  if (err instanceof ValidatorError) return err;
  if (isAbortError(err))
    return new InfraError("aborted", "the operation was aborted", { cause: err, retryable: false });
  const message = err instanceof Error ? err.message : String(err);
  return new InfraError(code, message, { cause: err });
}

export function isAbortError(err: unknown): boolean {
  return (
    typeof err === "object" &&
    err !== null &&
    ((err as { name?: string }).name === "AbortError" || (err as { code?: string }).code === "ABORT_ERR")
  );
}
