/**
 * Fault injection for reliability tests. A fault comes either from the request (header
 * `x-sim-fault`) or from a plan (profile `faults`, or `setFaults()` at run time). Plans are
 * deterministic: a rule fires on fixed request numbers, or on a seeded draw per request number.
 *
 * Header grammar: a comma-separated list of items `kind[=value][;param=value]`:
 *   429[;retry-after=S]   503[;retry-after=S]   status error before any byte, Retry-After: S (default 1)
 *   stall=MS              wait MS before the first byte
 *   cut[=N]               destroy the socket after N ≥ 1 SSE chunks (default: half; non-stream: half the body)
 *   error[=N]             stream: an OpenAI error object after N chunks, then the end (no [DONE]); non-stream: 500
 *   no-usage              no usage chunk (stream) / no usage field (non-stream)
 *   drip=MS               one small chunk every MS (stream: one token per chunk; non-stream: 64-byte slices)
 */
import { z } from "zod";
import { InputError } from "../errors.js";
import { draw } from "./rng.js";

export const FAULT_KINDS = ["429", "503", "stall", "cut", "error", "no_usage", "drip"] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export const faultSchema = z.strictObject({
  kind: z.enum(FAULT_KINDS),
  /** 429/503: the Retry-After header, seconds. */
  retryAfterS: z.number().int().min(0).max(3600).optional(),
  /** stall: delay before the first byte; drip: delay between chunks (ms). */
  ms: z.number().min(0).max(600_000).optional(),
  /** cut/error: how many SSE chunks go out before the fault. */
  afterChunks: z.number().int().min(0).optional(),
});
export type Fault = z.infer<typeof faultSchema>;

/**
 * A rule fires on matching request number n (1-based, counted per rule over the requests that
 * match `model`): n ≥ start and (n − start) mod every < count (without `every`: one burst of
 * `count` requests from `start`). With `rate`, it fires instead when a seeded draw on (seed, rule,
 * n) is below rate.
 */
export const faultRuleSchema = z.strictObject({
  fault: faultSchema,
  model: z.string().optional(),
  start: z.number().int().min(1).default(1),
  count: z.number().int().min(1).default(1),
  every: z.number().int().min(1).optional(),
  rate: z.number().min(0).max(1).optional(),
});
export type FaultRule = z.input<typeof faultRuleSchema>;
type ParsedRule = z.output<typeof faultRuleSchema>;

export const faultPlanSchema = z.strictObject({ rules: z.array(faultRuleSchema) });
export type FaultPlan = z.input<typeof faultPlanSchema>;

/** The faults to apply to one request, merged from the header and the plan. */
export interface RequestFaults {
  status?: { code: 429 | 503; retryAfterS: number };
  stallMs: number;
  dripMs: number;
  cut?: { afterChunks: number | undefined };
  error?: { afterChunks: number | undefined };
  noUsage: boolean;
}

/** A malformed `x-sim-fault` header: the caller's input (answered 400 with this code). */
export class FaultHeaderError extends InputError {
  constructor(message: string) {
    super("invalid_fault_header", message);
    this.name = "FaultHeaderError";
  }
}

const ITEM = /^(429|503|stall|cut|error|no-usage|no_usage|drip)(?:=(\d+(?:\.\d+)?))?((?:;[a-z-]+=\d+)*)$/;

/** Parse `x-sim-fault` (see the grammar above); throws FaultHeaderError on anything else. */
export function parseFaultHeader(header: string): Fault[] {
  const faults: Fault[] = [];
  for (const raw of header.split(",")) {
    const item = raw.trim().toLowerCase();
    if (item === "") continue;
    const m = ITEM.exec(item);
    if (!m) throw new FaultHeaderError(`unknown fault "${raw.trim()}"`);
    const [, name, value, params] = m;
    const kind = (name === "no-usage" ? "no_usage" : name) as FaultKind;
    const fault: Fault = { kind };
    const n = value === undefined ? undefined : Number(value);
    if (kind === "stall" || kind === "drip") {
      if (n === undefined) throw new FaultHeaderError(`${kind} needs =MS`);
      fault.ms = n;
    } else if (kind === "cut" || kind === "error") {
      if (n !== undefined) fault.afterChunks = Math.floor(n);
    } else if (n !== undefined) {
      throw new FaultHeaderError(`${kind} takes no value`);
    }
    for (const p of (params ?? "").split(";").filter(Boolean)) {
      const [k, v] = p.split("=") as [string, string];
      if (k !== "retry-after" || (kind !== "429" && kind !== "503"))
        throw new FaultHeaderError(`unknown parameter "${k}" for ${kind}`);
      fault.retryAfterS = Number(v);
    }
    faults.push(faultSchema.parse(fault));
  }
  return faults;
}

export function mergeFaults(faults: readonly Fault[]): RequestFaults {
  const out: RequestFaults = { stallMs: 0, dripMs: 0, noUsage: false };
  for (const f of faults) {
    switch (f.kind) {
      case "429":
      case "503":
        out.status ??= { code: f.kind === "429" ? 429 : 503, retryAfterS: f.retryAfterS ?? 1 };
        break;
      case "stall":
        out.stallMs = Math.max(out.stallMs, f.ms ?? 0);
        break;
      case "drip":
        out.dripMs = Math.max(out.dripMs, f.ms ?? 0);
        break;
      case "cut":
        out.cut ??= { afterChunks: f.afterChunks };
        break;
      case "error":
        out.error ??= { afterChunks: f.afterChunks };
        break;
      case "no_usage":
        out.noUsage = true;
        break;
    }
  }
  return out;
}

/** Holds a plan and its per-rule request counters. */
export class FaultSchedule {
  private rules: ParsedRule[] = [];
  private counters: number[] = [];

  constructor(
    private readonly seed: number,
    plan: FaultPlan = { rules: [] },
  ) {
    this.set(plan);
  }

  /** Replace the plan; counters restart, so "the next 2 requests" means exactly that. */
  set(plan: FaultPlan): void {
    this.rules = faultPlanSchema.parse(plan).rules;
    this.counters = this.rules.map(() => 0);
  }

  /** The plan's faults for the next request to `model` (advances the counters of matching rules). */
  next(model: string): Fault[] {
    const fired: Fault[] = [];
    this.rules.forEach((rule, i) => {
      if (rule.model !== undefined && rule.model !== model) return;
      const n = (this.counters[i] ?? 0) + 1;
      this.counters[i] = n;
      if (rule.rate !== undefined) {
        if (draw(this.seed, "fault", i, n) < rule.rate) fired.push(rule.fault);
        return;
      }
      if (n < rule.start) return;
      const offset = n - rule.start;
      if ((rule.every === undefined ? offset : offset % rule.every) < rule.count) fired.push(rule.fault);
    });
    return fired;
  }
}
