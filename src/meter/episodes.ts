/**
 * The meter's episodes: tokens minted per episode, each with its own budget and counters, retired
 * by close(); the receipts of recently closed episodes are kept a while for receiptsFor().
 */
import { randomBytes } from "node:crypto";
import { InputError } from "../errors.js";
import type { Logger } from "../log.js";
import { newView, pyFixed6, pyRound6, remainingBefore, type UpstreamView } from "./admission.js";
import { Gate } from "./gate.js";
import type { CallAbort } from "./http.js";
import { type Budget, newBudget } from "./ledger.js";
import { type Pico, picoToUsd, usdToPico } from "./money.js";
import type { Receipt, ReceiptQueue, ReceiptSink } from "./receipt.js";

export interface ModelUsage {
  calls: number;
  cost_usd: number;
  prompt_tokens: number;
  cached_tokens: number;
  completion_tokens: number;
}

export interface UsageSummary {
  episode_id: string;
  cap_usd: number;
  cost_usd: number;
  reserved_usd: number;
  /** Calls forwarded upstream (refusals are counted apart). */
  calls: number;
  /** Forwarded calls answered with a status other than 200, as upstream counts them (refusals are in `refused`). */
  errors: number;
  /** Forwarded calls answered 200 whose answer was cut (by the provider, a deadline, or a client that stopped reading). */
  cut: number;
  /** Of `cost_usd`, what was booked at reservations: calls whose usage could not be had (cut, timed out, aborted). */
  estimated_usd: number;
  /** The longest a forwarded call waited for the provider's first byte (one that got none: until it ended), seconds. */
  longest_wait_s: number;
  refused_cap: number;
  refused_model: number;
  /** Calls answered by the meter itself, by reason (cap, model, invalid_request, body_too_large, …). */
  refused: Record<string, number>;
  clamped: number;
  /** Cost above reservations (the estimate was low): booked, and visible. */
  overshoot_usd: number;
  /** Retries made (429/503 and errors as a first stream chunk). */
  retries: number;
  /** Calls that had to wait for the calls in flight before their worst case fit (exposure.ts). */
  waited: number;
  /** Receipts not kept because the episode reached its row bound. */
  rows_dropped: number;
  by_model: Record<string, ModelUsage>;
  tokens: { prompt: number; cached: number; completion: number };
}

export interface Activity {
  /** performance.now() when the token was minted. */
  startedAt: number;
  /** performance.now() when a forwarded call last finished (any status). */
  lastCompletedAt?: number;
  calls: number;
}

export interface Budget4 {
  cap_usd: number;
  spent_usd: number;
  reserved_usd: number;
  remaining_usd: number;
}

/** Closed tokens (and closed episodes' receipts) kept in memory. */
const RECENT_EPISODES = 256;

/** Per-episode limits (issue 20: exhaustion). */
export interface EpisodeLimits {
  /** Calls of one token being read, waiting or forwarded at once; more wait (their bodies unread). */
  callsPerToken: number;
  /** Request bytes one token may hold at once. */
  bytesPerToken: number;
  /** Non-stream answer bytes one token may hold at once (read, and not yet taken by its client). */
  answerBytesPerToken: number;
  /** Receipts kept per episode (upstream keeps 2000 rows); the counters go on. */
  rowsPerEpisode: number;
  /** How long close() waits for the calls it aborted to settle before it summarises anyway. */
  closeSettleMs: number;
}

/** A call waiting for its worst case to fit beside the calls in flight. */
export interface ExposureWaiter {
  /** Try now: true when decided (admitted or refused), false to keep waiting. */
  attempt(): boolean;
  /** The episode was closed or the meter stopped. */
  abandon(): void;
}

export interface ModelAgg {
  calls: number;
  cost: Pico;
  prompt: number;
  cached: number;
  completion: number;
}

/** Receipts of one episode id (shared by its tokens), kept in memory until evicted after close. */
export interface EpisodeRecord {
  episodeId: string;
  receipts: Receipt[];
  nextSeq: number;
  liveTokens: number;
}

export class Episode {
  /** The exact ledger (pico-dollars). */
  budget: Budget;
  /** The episode as upstream's meter sees it: decides refusals, clamps and the budget header. */
  readonly view: UpstreamView;
  calls = 0;
  errors = 0;
  cut = 0;
  /** Booked at reservations (no usage could be had), pico-dollars. */
  estimated: Pico = 0n;
  longestWaitMs = 0;
  refusedCap = 0;
  refusedModel = 0;
  readonly refused = new Map<string, number>();
  clamped = 0;
  retries = 0;
  waited = 0;
  rowsDropped = 0;
  readonly byModel = new Map<string, ModelAgg>();
  readonly tokens = { prompt: 0, cached: 0, completion: 0 };
  readonly startedAt = performance.now();
  lastCompletedAt: number | undefined;
  readonly inflight = new Set<CallAbort>();
  /** Forwarded calls not yet settled, and the sum of their worst cases. */
  forwarded = 0;
  exposure: Pico = 0n;
  readonly exposureQueue: ExposureWaiter[] = [];
  readonly callGate: Gate;
  readonly byteGate: Gate;
  readonly answerGate: Gate;
  closed = false;
  /** The summary close() returns, once the calls it aborted have settled. */
  closing: Promise<UsageSummary> | undefined;
  private settledWaiters: (() => void)[] = [];
  /**
   * The per-call line carries only the meter's own fields (no headers, no token), so it skips the
   * project-wide wildcard redaction, which costs more than the rest of a call's bookkeeping.
   */
  readonly callLog: Logger;

  constructor(
    readonly record: EpisodeRecord,
    capUsd: number,
    readonly log: Logger,
    readonly limits: EpisodeLimits,
  ) {
    this.budget = newBudget(usdToPico(capUsd));
    this.view = newView(capUsd);
    this.callGate = new Gate(limits.callsPerToken);
    this.byteGate = new Gate(limits.bytesPerToken);
    this.answerGate = new Gate(limits.answerBytesPerToken);
    this.callLog = log.child(
      {},
      { redact: { paths: ["token", "authorization", "apiKey"], censor: "[redacted]" } },
    );
  }

  countRefusal(reason: string): void {
    this.refused.set(reason, (this.refused.get(reason) ?? 0) + 1);
  }

  /** A settled call's receipt is kept: wake close() when no forwarded call is left unsettled. */
  noteSettled(): void {
    if (this.forwarded > 0 || this.settledWaiters.length === 0) return;
    for (const w of this.settledWaiters.splice(0)) w();
  }

  /** Resolves true once every forwarded call is settled and receipted, false after `ms`. */
  settled(ms: number): Promise<boolean> {
    if (this.forwarded === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.settledWaiters = this.settledWaiters.filter((w) => w !== done);
        resolve(false);
      }, ms);
      const done = () => {
        clearTimeout(t);
        resolve(true);
      };
      this.settledWaiters.push(done);
    });
  }

  /** Admit waiting calls, in order, while they can be decided. */
  pumpExposure(): void {
    const q = this.exposureQueue;
    while (q.length > 0 && q[0]!.attempt()) q.shift();
  }
}

/** The x-trajrl-budget-remaining-usd value before a call, as upstream computes it (no valid token: 0). */
export function remainingHeader(ep: Episode | null): string {
  return ep === null ? "0.000000" : pyFixed6(remainingBefore(ep.view));
}

/** GET /v1/budget: upstream's figures (rounded to 6 decimals as Python rounds). */
export function budgetView(ep: Episode): Budget4 {
  const v = ep.view;
  return {
    cap_usd: v.cap,
    spent_usd: pyRound6(v.spent),
    reserved_usd: pyRound6(v.reserved),
    remaining_usd: pyRound6(remainingBefore(v)),
  };
}

export function summarize(ep: Episode): UsageSummary {
  const byModel: Record<string, ModelUsage> = {};
  for (const [m, a] of [...ep.byModel.entries()].sort((x, y) => (x[0] < y[0] ? -1 : 1))) {
    byModel[m] = {
      calls: a.calls,
      cost_usd: picoToUsd(a.cost),
      prompt_tokens: a.prompt,
      cached_tokens: a.cached,
      completion_tokens: a.completion,
    };
  }
  return {
    episode_id: ep.record.episodeId,
    cap_usd: picoToUsd(ep.budget.cap),
    cost_usd: picoToUsd(ep.budget.spent),
    reserved_usd: picoToUsd(ep.budget.reserved),
    calls: ep.calls,
    errors: ep.errors,
    cut: ep.cut,
    estimated_usd: picoToUsd(ep.estimated),
    longest_wait_s: Math.round(ep.longestWaitMs) / 1000,
    refused_cap: ep.refusedCap,
    refused_model: ep.refusedModel,
    refused: Object.fromEntries([...ep.refused].sort((a, b) => (a[0] < b[0] ? -1 : 1))),
    clamped: ep.clamped,
    overshoot_usd: picoToUsd(ep.budget.overshoot),
    retries: ep.retries,
    waited: ep.waited,
    rows_dropped: ep.rowsDropped,
    by_model: byModel,
    tokens: { ...ep.tokens },
  };
}

/** Live tokens, recently closed tokens, and the receipts of recent episodes. */
export class Episodes {
  private readonly live = new Map<string, Episode>();
  /** Closed tokens, newest last, so close()/summary() stay answerable for a while. */
  private readonly recent = new Map<string, Episode>();
  private readonly records = new Map<string, EpisodeRecord>();

  constructor(
    private readonly log: Logger,
    private readonly sink: ReceiptSink | undefined,
    private readonly queue: ReceiptQueue | null,
    private readonly limits: EpisodeLimits,
  ) {}

  get liveCount(): number {
    return this.live.size;
  }

  /** A bearer token for one episode with its own cap: "ep-" + 24 random bytes, base64url. */
  mint(episodeId: string, capUsd: number): string {
    if (!episodeId) throw new InputError("invalid_episode_id", "episode id must be non-empty");
    if (!Number.isFinite(capUsd) || capUsd < 0) throw new InputError("invalid_cap", `invalid cap: ${capUsd}`);
    const token = `ep-${randomBytes(24).toString("base64url")}`;
    let record = this.records.get(episodeId);
    if (record === undefined) {
      record = { episodeId, receipts: [], nextSeq: 1, liveTokens: 0 };
      this.records.set(episodeId, record);
    }
    record.liveTokens++;
    this.live.set(token, new Episode(record, capUsd, this.log.child({ episode: episodeId }), this.limits));
    this.log.info({ episode: episodeId, cap_usd: capUsd }, "meter.episode.minted");
    return token;
  }

  /**
   * Retire a token (later calls → 401), abort its calls in flight, and return its usage once they
   * have settled (each booked on what it used, else its reservation), waiting at most `settleMs`.
   */
  close(token: string): Promise<UsageSummary> {
    const ep = this.live.get(token);
    if (ep === undefined) {
      const old = this.recent.get(token);
      if (old !== undefined) return old.closing ?? Promise.resolve(summarize(old));
      return Promise.reject(new InputError("unknown_token", "unknown episode token"));
    }
    this.live.delete(token);
    ep.closed = true;
    // Nothing may be billed to an episode after it ended; aborted calls settle on what they used.
    for (const ac of ep.inflight) ac.abort("episode_closed");
    for (const w of ep.exposureQueue.splice(0)) w.abandon();
    ep.record.liveTokens--;
    this.recent.set(token, ep);
    this.evict();
    ep.closing = this.summaryOnceSettled(ep);
    return ep.closing;
  }

  private async summaryOnceSettled(ep: Episode): Promise<UsageSummary> {
    const inFlight = ep.forwarded;
    if (!(await ep.settled(this.limits.closeSettleMs)))
      ep.log.warn(
        { unsettled: ep.forwarded, wait_ms: this.limits.closeSettleMs },
        "meter.episode.close_unsettled",
      );
    const summary = summarize(ep);
    ep.log.info({ ...summary, by_model: undefined, aborted: inFlight }, "meter.episode.closed");
    return summary;
  }

  /** The live episode of a token, or null. */
  liveEpisode(token: string): Episode | null {
    return this.live.get(token) ?? null;
  }

  /** A live or recently closed token's episode. */
  episode(token: string): Episode {
    const ep = this.live.get(token) ?? this.recent.get(token);
    if (ep === undefined) throw new InputError("unknown_token", "unknown episode token");
    return ep;
  }

  /** Abort every live episode's calls in flight (the meter is stopping). */
  abortAll(): void {
    for (const ep of this.live.values()) {
      for (const ac of ep.inflight) ac.abort("meter_stopped");
      for (const w of ep.exposureQueue.splice(0)) w.abandon();
    }
  }

  /** The episode's receipts in arrival order (meter.json). Older episodes are read back from the sink. */
  receiptsFor(episodeId: string): Receipt[] {
    const rec = this.records.get(episodeId);
    if (rec !== undefined) return [...rec.receipts].sort((a, b) => a.seq - b.seq);
    if (this.sink?.listByEpisode) {
      this.queue?.flush();
      return this.sink.listByEpisode(episodeId);
    }
    return [];
  }

  private evict(): void {
    // A closed token's Episode holds its record (the receipts): keeping more closed tokens than
    // records would keep evicted receipts alive. Both are bounded by the same count.
    while (this.recent.size > RECENT_EPISODES) {
      const oldest = this.recent.keys().next().value as string;
      this.recent.delete(oldest);
    }
    let closedRecords = 0;
    for (const r of this.records.values()) if (r.liveTokens === 0) closedRecords++;
    for (const [id, r] of this.records) {
      if (closedRecords <= RECENT_EPISODES) break;
      if (r.liveTokens === 0) {
        this.records.delete(id);
        closedRecords--;
      }
    }
  }
}
