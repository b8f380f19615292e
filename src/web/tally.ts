/**
 * Counters of what this process has seen since it started, fed from LiveStatus events: meter calls by
 * model, episodes by outcome and failure class, set_weights results. One source for both /metrics and
 * /api/status, so the two can never disagree. Pure: plain maps, no I/O.
 */
import type { EpisodeEndEvent, LiveStatus, MeterCallEvent, WeightsEvent } from "../status/index.js";

export interface ModelTally {
  calls: number;
  /** Calls the meter answered itself: over the cap or outside the allowlist (no upstream call). */
  refusals: { cap: number; allowlist: number };
  /** Calls whose max_tokens the meter lowered to fit the cap. */
  clamps: number;
  /** Calls answered with a non-2xx status (refusals included). */
  errors: number;
  usd: number;
  promptTokens: number;
  completionTokens: number;
}

export interface EpisodeTally {
  outcome: EpisodeEndEvent["outcome"];
  /** "none" for an episode without a failure. */
  failureClass: string;
  count: number;
}

export interface TallySnapshot {
  meter: Record<string, ModelTally>;
  episodes: EpisodeTally[];
  weights: { attempts: number; results: Record<string, number> };
}

const emptyModel = (): ModelTally => ({
  calls: 0,
  refusals: { cap: 0, allowlist: 0 },
  clamps: 0,
  errors: 0,
  usd: 0,
  promptTokens: 0,
  completionTokens: 0,
});

export class Tally {
  private readonly meter = new Map<string, ModelTally>();
  private readonly episodes = new Map<string, EpisodeTally>();
  private readonly weightResults = new Map<string, number>();
  private weightAttempts = 0;

  meterCall(e: MeterCallEvent): void {
    const m = this.meter.get(e.model) ?? emptyModel();
    m.calls++;
    if (e.refused) m.refusals[e.refused]++;
    if (e.clamped) m.clamps++;
    if (e.status < 200 || e.status >= 300) m.errors++;
    // A negative or non-finite amount is a producer bug; never let it corrupt a monotonic counter.
    if (Number.isFinite(e.usd) && e.usd > 0) m.usd += e.usd;
    if (e.promptTokens > 0) m.promptTokens += e.promptTokens;
    if (e.completionTokens > 0) m.completionTokens += e.completionTokens;
    this.meter.set(e.model, m);
  }

  episodeEnd(e: EpisodeEndEvent): void {
    const failureClass = e.failureClass ?? "none";
    const key = `${e.outcome}\u0000${failureClass}`;
    const t = this.episodes.get(key) ?? { outcome: e.outcome, failureClass, count: 0 };
    t.count++;
    this.episodes.set(key, t);
  }

  /**
   * One finished set_weights attempt. A "pending" report (an attempt that started) is not counted, so
   * a producer that reports both the start and the end of an attempt does not count it twice.
   */
  weights(e: WeightsEvent): void {
    if (e.outcome === "pending") return;
    this.weightAttempts++;
    this.weightResults.set(e.outcome, (this.weightResults.get(e.outcome) ?? 0) + 1);
  }

  /** Subscribe to a LiveStatus; returns the unsubscribe function. */
  attach(live: LiveStatus): () => void {
    const onMeter = (e: MeterCallEvent) => this.meterCall(e);
    const onEpisode = (e: EpisodeEndEvent) => this.episodeEnd(e);
    const onWeights = (e: WeightsEvent) => this.weights(e);
    live.on("meterCall", onMeter);
    live.on("episodeEnd", onEpisode);
    live.on("weights", onWeights);
    return () => {
      live.off("meterCall", onMeter);
      live.off("episodeEnd", onEpisode);
      live.off("weights", onWeights);
    };
  }

  snapshot(): TallySnapshot {
    const meter: Record<string, ModelTally> = {};
    for (const [model, m] of [...this.meter].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      meter[model] = { ...m, refusals: { ...m.refusals } };
    return {
      meter,
      episodes: [...this.episodes.values()]
        .map((e) => ({ ...e }))
        .sort((a, b) => a.outcome.localeCompare(b.outcome) || a.failureClass.localeCompare(b.failureClass)),
      weights: { attempts: this.weightAttempts, results: Object.fromEntries(this.weightResults) },
    };
  }
}
