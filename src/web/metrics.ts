/**
 * /metrics in the Prometheus text format (prom-client, with its default process metrics). Every
 * value is set from one StatusSnapshot right before rendering, so a scrape is a consistent picture
 * and /metrics agrees with /api/status by construction. Counters come from the process's Tally
 * (they restart at 0 with the process, which Prometheus' rate() handles).
 */
import { Counter, collectDefaultMetrics, Gauge, Registry } from "prom-client";
import type { StatusSnapshot } from "./snapshot.js";

export const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

const toSeconds = (ms: number) => ms / 1000;

type Registers = Registry[];

/** The validator itself: who it is, and its episodes by outcome. */
function identityMetrics(registers: Registers) {
  return {
    info: new Gauge({
      name: "trajrl_validator_info",
      help: "Always 1; the labels describe this validator.",
      labelNames: ["version", "network", "netuid", "simulated"] as const,
      registers,
    }),
    episodes: new Counter({
      name: "trajrl_episodes_total",
      help: "Episodes ended since start, by outcome (scored, failed, retry, unresolved) and failure class.",
      labelNames: ["outcome", "failure_class"] as const,
      registers,
    }),
  };
}

/** The meter: calls, spend, clamps, refusals and tokens by model. */
function meterMetrics(registers: Registers) {
  return {
    meterCalls: new Counter({
      name: "trajrl_meter_calls_total",
      help: "Model calls through the meter since start, by model.",
      labelNames: ["model"] as const,
      registers,
    }),
    meterSpend: new Counter({
      name: "trajrl_meter_spend_usd_total",
      help: "USD charged by the meter since start, by model (frozen price table).",
      labelNames: ["model"] as const,
      registers,
    }),
    meterClamps: new Counter({
      name: "trajrl_meter_clamps_total",
      help: "Calls whose max_tokens the meter lowered to fit the episode cap, by model.",
      labelNames: ["model"] as const,
      registers,
    }),
    meterRefusals: new Counter({
      name: "trajrl_meter_refusals_total",
      help: "Calls the meter refused without an upstream call, by model and reason (cap, allowlist).",
      labelNames: ["model", "reason"] as const,
      registers,
    }),
    meterTokens: new Counter({
      name: "trajrl_meter_tokens_total",
      help: "Tokens billed through the meter since start, by model and kind (prompt, completion).",
      labelNames: ["model", "kind"] as const,
      registers,
    }),
  };
}

/** set_weights attempts and their outcomes. */
function weightMetrics(registers: Registers) {
  return {
    weightAttempts: new Counter({
      name: "trajrl_set_weights_attempts_total",
      help: "Finished set_weights attempts since start.",
      registers,
    }),
    weightResults: new Counter({
      name: "trajrl_set_weights_results_total",
      help: "Finished set_weights attempts since start, by outcome (included, failed, rejected, timeout, …).",
      labelNames: ["outcome"] as const,
      registers,
    }),
  };
}

/** The daemon loops: last tick, last success, staleness. */
function loopMetrics(registers: Registers) {
  return {
    loopLastOk: new Gauge({
      name: "trajrl_loop_last_success_timestamp_seconds",
      help: "Unix time of each loop's last successful tick.",
      labelNames: ["loop"] as const,
      registers,
    }),
    loopLastTick: new Gauge({
      name: "trajrl_loop_last_tick_timestamp_seconds",
      help: "Unix time of each loop's last tick, successful or not.",
      labelNames: ["loop"] as const,
      registers,
    }),
    loopStale: new Gauge({
      name: "trajrl_loop_stale",
      help: "1 when a loop has not ticked within 3x its interval.",
      labelNames: ["loop"] as const,
      registers,
    }),
  };
}

/** The epoch and the running evaluation. */
function evaluationMetrics(registers: Registers) {
  return {
    epoch: new Gauge({
      name: "trajrl_current_epoch_id",
      help: "The challenge epoch the validator is on; -1 before one is seen.",
      registers,
    }),
    evalInProgress: new Gauge({
      name: "trajrl_evaluation_in_progress",
      help: "1 while an evaluation runs.",
      registers,
    }),
    evalScenarios: new Gauge({
      name: "trajrl_evaluation_scenarios",
      help: "Scenarios of the running evaluation, by phase.",
      labelNames: ["phase"] as const,
      registers,
    }),
    evalSpent: new Gauge({
      name: "trajrl_evaluation_spent_usd",
      help: "USD spent so far by the running evaluation.",
      registers,
    }),
  };
}

/** Alarms, health checks, readiness and the verdict outbox. */
function healthMetrics(registers: Registers) {
  return {
    alarms: new Gauge({
      name: "trajrl_alarms_active",
      help: "Active alarms, by severity.",
      labelNames: ["severity"] as const,
      registers,
    }),
    alarm: new Gauge({
      name: "trajrl_alarm_active",
      help: "1 for each active alarm, by code.",
      labelNames: ["code", "severity"] as const,
      registers,
    }),
    health: new Gauge({
      name: "trajrl_health_check_ok",
      help: "1 when the check passes: loops, database, docker (liveness, /healthz); upstreams (chain and platform reachable within DEGRADED_AFTER_S).",
      labelNames: ["check"] as const,
      registers,
    }),
    ready: new Gauge({
      name: "trajrl_ready",
      help: "1 when /readyz passes: healthy, not degraded.",
      registers,
    }),
    outbox: new Gauge({
      name: "trajrl_verdict_outbox_entries",
      help: "Verdicts in the outbox, by state (pending, delivered, abandoned).",
      labelNames: ["state"] as const,
      registers,
    }),
  };
}

/** The pool's engines: state, slots, episodes, failures, image cache. */
function engineMetrics(registers: Registers) {
  return {
    engineUp: new Gauge({
      name: "trajrl_engine_up",
      help: "1 while an engine of the pool takes episodes (ready), 0 while it is out of placement (down, being checked).",
      labelNames: ["engine"] as const,
      registers,
    }),
    engineDraining: new Gauge({
      name: "trajrl_engine_draining",
      help: "1 while an engine is drained (`engines drain NAME`): no new episodes, running ones finish.",
      labelNames: ["engine"] as const,
      registers,
    }),
    engineSlots: new Gauge({
      name: "trajrl_engine_slots",
      help: "Episode slots of an engine (absent: bounded by the evaluation's concurrency).",
      labelNames: ["engine"] as const,
      registers,
    }),
    engineRunning: new Gauge({
      name: "trajrl_engine_running_episodes",
      help: "Episodes running on an engine now.",
      labelNames: ["engine"] as const,
      registers,
    }),
    engineEpisodes: new Counter({
      name: "trajrl_engine_episodes_total",
      help: "Episodes that ended on an engine since start, by outcome (scored, failed).",
      labelNames: ["engine", "outcome"] as const,
      registers,
    }),
    engineFailures: new Counter({
      name: "trajrl_engine_failures_total",
      help: "Failures of an engine since start, by code: failed checks, losses (engine_lost), infra failures of its episodes.",
      labelNames: ["engine", "code"] as const,
      registers,
    }),
    engineImages: new Gauge({
      name: "trajrl_engine_images",
      help: "The evaluations' images verified present on an engine (its image cache).",
      labelNames: ["engine"] as const,
      registers,
    }),
    engineImageCopies: new Counter({
      name: "trajrl_engine_image_copies_total",
      help: "Images copied to an engine from the first engine since start.",
      labelNames: ["engine"] as const,
      registers,
    }),
    engineImageBytes: new Counter({
      name: "trajrl_engine_image_copied_bytes_total",
      help: "Bytes of images copied to an engine since start.",
      labelNames: ["engine"] as const,
      registers,
    }),
    engineImagePulls: new Counter({
      name: "trajrl_engine_image_pulls_total",
      help: "Registry images an engine pulled by digest itself since start.",
      labelNames: ["engine"] as const,
      registers,
    }),
  };
}

/** The cached winner the weights are set for. */
function winnerMetrics(registers: Registers) {
  return {
    winnerAge: new Gauge({
      name: "trajrl_winner_cache_age_seconds",
      help: "Age of the cached winner (the seat weights are set for); absent when nothing is cached.",
      labelNames: ["fresh"] as const,
      registers,
    }),
  };
}

/** Every validator metric, registered in the order /metrics lists them. */
function createMetrics(registers: Registers) {
  return {
    ...identityMetrics(registers),
    ...meterMetrics(registers),
    ...weightMetrics(registers),
    ...loopMetrics(registers),
    ...evaluationMetrics(registers),
    ...healthMetrics(registers),
    ...engineMetrics(registers),
    ...winnerMetrics(registers),
  };
}

export class ValidatorMetrics {
  readonly registry = new Registry();
  private readonly m: ReturnType<typeof createMetrics>;

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    if (opts.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    this.m = createMetrics([this.registry]);
  }

  /** Set every validator metric from a snapshot (counters are totals, so they are reset and re-set). */
  update(s: StatusSnapshot): void {
    const m = this.m;
    m.info.reset();
    m.info.set(
      {
        version: s.version,
        network: s.node.network,
        netuid: String(s.node.netuid),
        simulated: String(s.node.simulated),
      },
      1,
    );

    for (const c of [m.episodes, m.meterCalls, m.meterSpend, m.meterClamps, m.meterRefusals, m.meterTokens])
      c.reset();
    for (const e of s.counters.episodes)
      m.episodes.inc({ outcome: e.outcome, failure_class: e.failureClass }, e.count);
    for (const [model, t] of Object.entries(s.counters.meter)) {
      m.meterCalls.inc({ model }, t.calls);
      m.meterSpend.inc({ model }, t.usd);
      m.meterClamps.inc({ model }, t.clamps);
      m.meterRefusals.inc({ model, reason: "cap" }, t.refusals.cap);
      m.meterRefusals.inc({ model, reason: "allowlist" }, t.refusals.allowlist);
      m.meterTokens.inc({ model, kind: "prompt" }, t.promptTokens);
      m.meterTokens.inc({ model, kind: "completion" }, t.completionTokens);
    }
    m.weightAttempts.reset();
    m.weightAttempts.inc(s.counters.weights.attempts);
    m.weightResults.reset();
    for (const [outcome, n] of Object.entries(s.counters.weights.results))
      m.weightResults.inc({ outcome }, n);

    for (const g of [m.loopLastOk, m.loopLastTick, m.loopStale]) g.reset();
    for (const l of s.loops) {
      if (l.lastOkAt !== undefined) m.loopLastOk.set({ loop: l.name }, toSeconds(l.lastOkAt));
      if (l.lastTickAt !== undefined) m.loopLastTick.set({ loop: l.name }, toSeconds(l.lastTickAt));
      m.loopStale.set({ loop: l.name }, l.stale ? 1 : 0);
    }

    m.epoch.set(s.epoch ? s.epoch.epochId : -1);
    m.evalInProgress.set(s.evaluation ? 1 : 0);
    m.evalScenarios.reset();
    const phases = new Map<string, number>();
    for (const sc of s.evaluation?.scenarios ?? []) phases.set(sc.phase, (phases.get(sc.phase) ?? 0) + 1);
    for (const [phase, n] of phases) m.evalScenarios.set({ phase }, n);
    m.evalSpent.set(s.evaluation?.spentUsd ?? 0);

    m.alarms.reset();
    m.alarm.reset();
    const bySeverity = { warn: 0, error: 0 };
    for (const a of s.alarms) {
      bySeverity[a.severity]++;
      m.alarm.set({ code: a.code, severity: a.severity }, 1);
    }
    for (const [severity, n] of Object.entries(bySeverity)) m.alarms.set({ severity }, n);

    m.health.reset();
    if (s.health) {
      m.health.set({ check: "loops" }, s.health.checks.loops.ok ? 1 : 0);
      m.health.set({ check: "database" }, s.health.checks.database.ok ? 1 : 0);
      m.health.set({ check: "docker" }, s.health.checks.docker.ok ? 1 : 0);
      m.health.set({ check: "upstreams" }, s.health.checks.upstreams.ok ? 1 : 0);
    }
    m.ready.set(s.health?.ready ? 1 : 0);

    for (const g of [
      m.engineUp,
      m.engineDraining,
      m.engineSlots,
      m.engineRunning,
      m.engineEpisodes,
      m.engineFailures,
      m.engineImages,
      m.engineImageCopies,
      m.engineImageBytes,
      m.engineImagePulls,
    ])
      g.reset();
    for (const e of s.engines ?? []) {
      const engine = e.name;
      m.engineUp.set({ engine }, e.state === "ready" ? 1 : 0);
      m.engineDraining.set({ engine }, e.draining ? 1 : 0);
      if (e.slots !== null) m.engineSlots.set({ engine }, e.slots);
      m.engineRunning.set({ engine }, e.running);
      m.engineEpisodes.inc({ engine, outcome: "scored" }, e.episodes.scored);
      m.engineEpisodes.inc({ engine, outcome: "failed" }, e.episodes.failed);
      for (const [code, n] of Object.entries(e.failures)) m.engineFailures.inc({ engine, code }, n);
      m.engineImages.set({ engine }, e.images.present);
      m.engineImageCopies.inc({ engine }, e.images.copies);
      m.engineImageBytes.inc({ engine }, e.images.copiedBytes);
      m.engineImagePulls.inc({ engine }, e.images.pulls);
    }

    m.outbox.reset();
    for (const [state, n] of Object.entries(s.outbox.counts)) m.outbox.set({ state }, n);
    m.winnerAge.reset();
    if (s.winner) m.winnerAge.set({ fresh: String(s.winner.fresh) }, toSeconds(s.winner.ageMs));
  }

  async render(s: StatusSnapshot): Promise<string> {
    this.update(s);
    return this.registry.metrics();
  }
}
