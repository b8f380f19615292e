/**
 * The live state of this validator process: loop heartbeats, alarms, the current epoch, the
 * running evaluation's per-scenario progress, recent meter calls and weight attempts.
 * Producers (daemon loops, the evaluation, the meter) write here; the status page, /metrics,
 * /healthz and `status` read it. In-memory only: what must survive a restart lives in SQLite.
 */
import { EventEmitter } from "node:events";
import type { Disposition, EpisodeEnd, EvaluationEvent } from "../evaluation/index.js";
import type { EngineView } from "../pool/index.js";

export type { EngineView };

export interface LoopState {
  name: string;
  /** Expected interval; a loop silent for 3× this is unhealthy. */
  intervalMs: number;
  lastTickAt?: number;
  lastOkAt?: number;
  lastError?: { code: string; message: string; at: number };
  ticks: number;
  failures: number;
}

export type AlarmSeverity = "warn" | "error";

export interface Alarm {
  code: string;
  message: string;
  severity: AlarmSeverity;
  since: number;
  lastSeen: number;
  count: number;
}

/** The two services the validator depends on outside this host; health degrades when one is out too long. */
export type Upstream = "chain" | "platform";

/** An upstream failing since its first failed request (any loop's), with no success since. */
export interface Outage {
  upstream: Upstream;
  since: number;
  lastSeen: number;
  failures: number;
  /** The latest failure, as said to the operator. */
  message: string;
}

export interface EpochView {
  epochId: number;
  challengerHotkey: string;
  packHash: string;
  specNumber: number | null;
  decision: string;
  seenAt: number;
}

/** One scenario's latest progress event, kept by scenario name. */
export type ScenarioProgressView = Omit<EvaluationEvent, "evaluationId" | "scenario">;

export interface EvaluationView {
  evaluationId: string;
  packHash: string;
  label: string;
  epochId: number | null;
  spec: number;
  /** The built-in suite's set (then `spec` is 0). */
  suite?: string;
  startedAt: number;
  capUsd: number;
  scenarios: Record<string, ScenarioProgressView>;
}

export interface MeterCallEvent {
  episodeId: string;
  model: string;
  status: number;
  usd: number;
  clamped: boolean;
  refused?: "cap" | "allowlist";
  promptTokens: number;
  completionTokens: number;
  ttfbMs?: number;
}

export interface WeightsEvent {
  at: number;
  outcome: string;
  uids: number[];
  weights: number[];
  reason: string;
  errorName?: string | null;
  txHash?: string | null;
  block?: number | null;
}

/** The evaluation's episode end; the tally also counts the attempts' dispositions (retry, unresolved). */
export type EpisodeEndEvent = Omit<EpisodeEnd, "outcome"> & {
  outcome: EpisodeEnd["outcome"] | Exclude<Disposition, "final">;
};

/** An image being built or pulled for the next evaluation (the bench's progress). */
export interface ImageProgressView {
  image: string;
  ref: string;
  phase: "pulling" | "building" | "copying" | "ready" | "cached" | "fallback";
  /** The pool's engine it is placed on (absent: the engine that builds and pulls). */
  engine?: string;
  bytes?: number;
  totalBytes?: number;
  note?: string;
  at: number;
}

export interface LiveStatusEvents {
  loop: [LoopState];
  alarm: [Alarm | { code: string; cleared: true }];
  epoch: [EpochView | null];
  evaluation: [EvaluationView | null];
  image: [ImageProgressView];
  engines: [EngineView[]];
  progress: [EvaluationEvent];
  meterCall: [MeterCallEvent];
  weights: [WeightsEvent];
  episodeEnd: [EpisodeEndEvent];
}

export class LiveStatus extends EventEmitter<LiveStatusEvents> {
  readonly startedAt = Date.now();
  readonly loops = new Map<string, LoopState>();
  readonly alarms = new Map<string, Alarm>();
  /** The health clock: each upstream's outage from its first failure (src/web/health.ts degrades on it). */
  readonly outages = new Map<Upstream, Outage>();
  epoch: EpochView | null = null;
  evaluation: EvaluationView | null = null;
  private readonly images = new Map<string, ImageProgressView>();
  /** The engine pool, as its last update gave it (empty until an environment opened one). */
  engines: EngineView[] = [];
  lastWeights: WeightsEvent | null = null;

  constructor(private readonly now: () => number = Date.now) {
    super();
    this.setMaxListeners(50);
  }

  registerLoop(name: string, intervalMs: number): void {
    if (!this.loops.has(name)) this.loops.set(name, { name, intervalMs, ticks: 0, failures: 0 });
  }

  /** A loop finished one tick; `error` when the tick failed. */
  tick(name: string, error?: { code: string; message: string }): void {
    const l = this.loops.get(name) ?? { name, intervalMs: 60_000, ticks: 0, failures: 0 };
    const at = this.now();
    l.lastTickAt = at;
    l.ticks++;
    if (error) {
      l.failures++;
      l.lastError = { ...error, at };
    } else l.lastOkAt = at;
    this.loops.set(name, l);
    this.emit("loop", l);
  }

  /** Loops that have not ticked within 3× their interval (after a grace of one interval from start). */
  staleLoops(): LoopState[] {
    const t = this.now();
    return [...this.loops.values()].filter((l) => {
      const ref = l.lastTickAt ?? this.startedAt;
      return t - ref > 3 * l.intervalMs + (l.lastTickAt === undefined ? l.intervalMs : 0);
    });
  }

  /** `since`: when the trouble began, if before now (an upstream alarm raised after a few failures). */
  raise(code: string, message: string, severity: AlarmSeverity = "warn", since?: number): void {
    const t = this.now();
    const prev = this.alarms.get(code);
    const a: Alarm = prev
      ? { ...prev, message, severity, lastSeen: t, count: prev.count + 1 }
      : { code, message, severity, since: Math.min(since ?? t, t), lastSeen: t, count: 1 };
    this.alarms.set(code, a);
    this.emit("alarm", a);
  }

  /** A request to `upstream` failed (any loop): the first failure of an outage starts its clock. */
  upstreamFailed(upstream: Upstream, message: string): void {
    const t = this.now();
    const prev = this.outages.get(upstream);
    this.outages.set(
      upstream,
      prev
        ? { ...prev, lastSeen: t, failures: prev.failures + 1, message }
        : { upstream, since: t, lastSeen: t, failures: 1, message },
    );
  }

  /** `upstream` answered: its outage, if any, is over. */
  upstreamReached(upstream: Upstream): void {
    this.outages.delete(upstream);
  }

  /** When the current outage of `upstream` began (undefined: none). */
  outageSince(upstream: Upstream): number | undefined {
    return this.outages.get(upstream)?.since;
  }

  clear(code: string): void {
    if (this.alarms.delete(code)) this.emit("alarm", { code, cleared: true });
  }

  setEpoch(e: EpochView | null): void {
    this.epoch = e;
    this.emit("epoch", e);
  }

  startEvaluation(v: Omit<EvaluationView, "scenarios" | "startedAt"> & { scenarios: string[] }): void {
    const scenarios: EvaluationView["scenarios"] = {};
    for (const s of v.scenarios)
      scenarios[s] = { phase: "queued", attempt: 0, spentUsd: 0, capUsd: v.capUsd, elapsedMs: 0 };
    this.evaluation = { ...v, scenarios, startedAt: this.now() };
    this.emit("evaluation", this.evaluation);
  }

  /** Feed every EvaluationEvent of the running evaluation here. */
  onProgress(e: EvaluationEvent): void {
    if (
      this.evaluation &&
      this.evaluation.evaluationId !== e.evaluationId &&
      this.evaluation.evaluationId !== ""
    ) {
      // An event of another evaluation (e.g. a resumed id): adopt it.
      this.evaluation.evaluationId = e.evaluationId;
    }
    if (this.evaluation) {
      const { evaluationId: _id, scenario, ...rest } = e;
      this.evaluation.scenarios[scenario] = rest;
    }
    this.emit("progress", e);
  }

  /** Image builds and pulls while an evaluation's bench is prepared (kept until the evaluation ends). */
  benchProgress(p: Omit<ImageProgressView, "at">): void {
    const v: ImageProgressView = { ...p, at: this.now() };
    this.images.set(p.engine ? `${p.engine}/${p.image}` : p.image, v);
    this.emit("image", v);
  }

  /** The pool's engines changed (state, slots in use, counters). */
  setEngines(views: EngineView[]): void {
    this.engines = views;
    this.emit("engines", views);
  }

  endEvaluation(): void {
    this.images.clear();
    this.evaluation = null;
    this.emit("evaluation", null);
  }

  meterCall(e: MeterCallEvent): void {
    this.emit("meterCall", e);
  }

  episodeEnd(e: EpisodeEndEvent): void {
    this.emit("episodeEnd", e);
  }

  weights(e: WeightsEvent): void {
    this.lastWeights = e;
    this.emit("weights", e);
  }

  snapshot(): {
    startedAt: number;
    now: number;
    loops: LoopState[];
    alarms: Alarm[];
    epoch: EpochView | null;
    evaluation: EvaluationView | null;
    images: ImageProgressView[];
    engines: EngineView[];
    lastWeights: WeightsEvent | null;
  } {
    return {
      startedAt: this.startedAt,
      now: this.now(),
      loops: [...this.loops.values()],
      alarms: [...this.alarms.values()],
      epoch: this.epoch,
      evaluation: this.evaluation,
      images: [...this.images.values()],
      engines: this.engines,
      lastWeights: this.lastWeights,
    };
  }
}
