/**
 * The weight loop's work (issue 9 part 3): every tick a fresh snapshot of the subnet, the plan
 * (weights-plan.ts: winner or burn, float → u16, pre-flight), and when the rate limit allows,
 * set_weights. Every attempt is recorded before it is sent and completed with what the chain said
 * (WeightsRepo), and reported to LiveStatus. The tick returns when to look again.
 */
import type { ChainClient, SetWeightsResult, StoredWeights, SubnetSnapshot } from "../chain/index.js";
import { needsOwnerRow } from "../consensus/index.js";
import { InputError, toValidatorError, ValidatorError } from "../errors.js";
import type { Logger } from "../log.js";
import type { LiveStatus } from "../status/index.js";
import { MARK, type PlatformMarksRepo, type WeightsRepo, type WinnerCacheRepo } from "../store/index.js";
import { ALARM } from "./eval-loop.js";
import {
  nextWeightsDelayMs,
  planWeights,
  type WeightsBackoff,
  type WeightsPlan,
  type WeightsTickOutcome,
  type WinnerView,
} from "./weights-plan.js";

export interface WeightSetterDeps {
  chain: ChainClient;
  netuid: number;
  hotkey: string;
  weights: WeightsRepo;
  winnerCache: WinnerCacheRepo;
  marks: PlatformMarksRepo;
  live: LiveStatus;
  log: Logger;
  /** Wall clock, ms (the winner cache's age). */
  now: () => number;
  winnerCacheTtlMs: number;
  versionKeyOverride?: number;
  /**
   * The burn uid upstream hard-codes for this network and subnet (validator.py OWNER_UID = 74 on
   * finney 11). When the chain's owner hotkey holds another uid, say so (we follow the chain).
   */
  upstreamOwnerUid?: number;
  backoff: WeightsBackoff;
  setWeightsTimeoutMs: number;
}

export class WeightSetter {
  private readonly log: Logger;
  /** Consecutive failures of the same kind, for the back-off. */
  private streak: { kind: string; n: number } = { kind: "", n: 0 };
  private connected = false;
  /** What was last said about uids that differ (logged once per change, not every minute). */
  private saidWinnerUid = "";
  private saidOwnerUid = "";

  constructor(private readonly d: WeightSetterDeps) {
    this.log = d.log.child({ component: "weights", netuid: d.netuid });
  }

  /** Connect if the start-up connection failed; the client reconnects on its own after that. */
  async ensureConnected(signal: AbortSignal): Promise<void> {
    if (this.connected) return;
    await this.d.chain.connect({ signal });
    this.connected = true;
    this.d.live.clear(ALARM.chainUnreachable);
  }

  markConnected(): void {
    this.connected = true;
  }

  /** Back-off for a tick that threw (snapshot, connect): operator problems wait long, the rest retry soon. */
  backoffAfterThrow(failures: number, err: unknown): number {
    const e = toValidatorError(err);
    const permanent = e instanceof InputError || (e instanceof ValidatorError && !e.retryable);
    if (permanent) this.d.live.raise(ALARM.weightsBlocked, `${e.code}: ${e.message}`, "error");
    else this.d.live.upstreamFailed("chain", `chain: ${e.code}: ${e.message}`);
    // The alarm waits for a few failures (a reconnect is a blip); its start is the first one's.
    if (!permanent && failures >= 3)
      this.d.live.raise(
        ALARM.chainUnreachable,
        `chain: ${e.code}: ${e.message} (${failures} failures)`,
        "error",
        this.d.live.outageSince("chain"),
      );
    return nextWeightsDelayMs(
      permanent ? { kind: "blocked" } : { kind: "failed", errorKind: "transient" },
      failures,
      this.d.backoff,
    );
  }

  async tick(signal: AbortSignal): Promise<number> {
    const d = this.d;
    await this.ensureConnected(signal);
    const snap = await d.chain.snapshot(d.netuid, { signal });
    d.live.upstreamReached("chain");
    const plan = await this.plan(snap, signal);
    if (plan.kind === "wait") {
      this.log.debug(
        { block: snap.block, blocksUntilAllowed: plan.blocksUntilAllowed },
        "weights.rate_limited",
      );
      d.live.clear(ALARM.weightsBlocked);
      return this.delay({ kind: "wait", blocksUntilAllowed: plan.blocksUntilAllowed });
    }
    if (plan.kind === "blocked") return this.skipBlocked(plan, snap.block);
    return this.submit(plan, snap, signal);
  }

  /** This snapshot's plan (the winner cache; the owner's row when it decides), and the stale cache's alarm. */
  private async plan(snap: SubnetSnapshot, signal: AbortSignal): Promise<WeightsPlan> {
    const d = this.d;
    const cached = d.winnerCache.read(d.now(), d.winnerCacheTtlMs);
    const seat = cached?.winner.winner ?? null;
    const ownerRow =
      needsOwnerRow(seat && { hotkey: seat.hotkey, uid: seat.uid }) && snap.ownerUid !== undefined
        ? await this.ownerRow(snap.ownerUid, snap.blockHash, signal)
        : undefined;
    const plan = planWeights({
      snapshot: snap,
      hotkey: d.hotkey,
      cached,
      ownerRow,
      ...(d.versionKeyOverride !== undefined ? { versionKeyOverride: d.versionKeyOverride } : {}),
      maxCacheAgeMs: d.winnerCacheTtlMs,
    });
    this.noteUids(snap.ownerUid, plan.kind === "set" ? plan.winner : null);
    if (plan.reason === "stale_winner_cache")
      d.live.raise(
        ALARM.winnerCacheStale,
        `the winner cache is ${Math.round((cached?.ageMs ?? 0) / 60_000)} min old (limit ${Math.round(d.winnerCacheTtlMs / 60_000)} min): burning to the owner`,
        "warn",
      );
    else if (plan.reason !== null) d.live.clear(ALARM.winnerCacheStale);
    return plan;
  }

  /** One attempt: on record before it is sent, completed with what the chain said. */
  private async submit(
    plan: Extract<WeightsPlan, { kind: "set" }>,
    snap: SubnetSnapshot,
    signal: AbortSignal,
  ): Promise<number> {
    const d = this.d;
    const mode = snap.commitRevealEnabled ? "commit_timelocked_weights" : "set_weights";
    const id = d.weights.start({
      netuid: d.netuid,
      block: snap.block,
      mode,
      reason: plan.reason,
      uids: plan.uids,
      weights: plan.weights,
      versionKey: plan.versionKey,
    });
    const fields = {
      attempt: id,
      block: snap.block,
      uid: plan.myUid,
      reason: plan.reason,
      uids: plan.uids,
      weights: plan.weights,
      versionKey: plan.versionKey,
      winner: plan.winner?.hotkey,
    };
    this.log.info(fields, "weights.setting");
    let res: SetWeightsResult;
    try {
      res = await d.chain.setWeights(d.netuid, plan.uids, plan.weights, plan.versionKey, {
        signal,
        timeoutMs: d.setWeightsTimeoutMs,
      });
    } catch (err) {
      const e = toValidatorError(err, "chain_set_weights_failed");
      const permanent = e.failureClass === "input" || !e.retryable;
      d.weights.finish(id, {
        outcome: "failed",
        errorName: e.code,
        errorKind: permanent ? "permanent" : "transient",
        message: e.message,
      });
      this.report(plan, snap.block, { outcome: "failed", errorName: e.code });
      this.log.warn({ ...fields, code: e.code, err: e.message }, "weights.failed");
      return this.failed(permanent ? "permanent" : "transient", `${e.code}: ${e.message}`);
    }
    return this.settled(plan, snap.block, id, fields, res);
  }

  /** What the chain said about an attempt: on record, on the status page, and when to look again. */
  private settled(
    plan: Extract<WeightsPlan, { kind: "set" }>,
    block: number,
    id: number,
    fields: Record<string, unknown>,
    res: SetWeightsResult,
  ): number {
    const d = this.d;
    d.weights.finish(id, {
      outcome: res.outcome,
      errorName: res.errorName,
      errorKind: res.errorKind,
      message: res.message,
      txHash: res.txHash,
      blockHash: res.blockHash,
      includedBlock: res.blockNumber,
      nonce: res.nonce,
      resubmissions: res.resubmissions,
      revealRound: res.revealRound,
      mode: res.mode,
    });
    this.report(plan, block, {
      outcome: res.outcome,
      errorName: res.errorName ?? null,
      txHash: res.txHash ?? null,
      block: res.blockNumber ?? block,
    });
    if (res.outcome === "included") {
      d.marks.set(MARK.lastSetWeightsAt, d.now(), res.txHash);
      d.live.clear(ALARM.weightsBlocked);
      d.live.clear(ALARM.weightsFailing);
      d.live.clear(ALARM.chainUnreachable);
      this.log.info(
        { ...fields, txHash: res.txHash, included: res.blockNumber, mode: res.mode },
        "weights.included",
      );
      return this.delay({ kind: "included" });
    }
    // Outcomes without a name (timeout, aborted, dropped) are worth another try soon.
    const kind = res.errorKind ?? "transient";
    this.log.warn(
      { ...fields, outcome: res.outcome, error: res.errorName, kind, txHash: res.txHash, err: res.message },
      "weights.not_included",
    );
    if (kind === "rate_limited") {
      // The chain saw weights we did not (another process with this hotkey?): wait for the window.
      this.streak = { kind: "", n: 0 };
      return this.delay({ kind: "failed", errorKind: "rate_limited" });
    }
    return this.failed(kind, `${res.outcome} ${res.errorName ?? ""} ${res.message ?? ""}`.trim());
  }

  /** Weights that cannot be set (no burn target, …): a skipped attempt on record, an alarm, a long wait. */
  private skipBlocked(plan: Extract<WeightsPlan, { kind: "blocked" }>, block: number): number {
    const d = this.d;
    const message = plan.problems.map((p) => `${p.code}: ${p.message}`).join("; ");
    const id = d.weights.start({
      netuid: d.netuid,
      block,
      mode: "set_weights",
      reason: plan.reason ?? undefined,
      uids: plan.uids,
      weights: plan.weights,
      versionKey: plan.versionKey,
    });
    d.weights.finish(id, {
      outcome: "skipped",
      errorName: plan.problems[0]?.code,
      errorKind: "permanent",
      message,
    });
    d.live.raise(ALARM.weightsBlocked, `weights not set: ${message}`, "error");
    d.live.weights({
      at: d.now(),
      outcome: "skipped",
      uids: plan.uids,
      weights: plan.weights,
      reason: plan.reason ?? "blocked",
      errorName: plan.problems[0]?.code ?? null,
      block,
    });
    const delay = this.delay({ kind: "blocked" });
    this.log.error({ block, problems: plan.problems, retryInMs: delay }, "weights.blocked");
    return delay;
  }

  /**
   * The owner's stored weights at the snapshot's block. Unreadable (the node failed, the runtime
   * has no such storage) is not an error of the tick: upstream then burns, and so do we.
   */
  private async ownerRow(
    ownerUid: number,
    at: string,
    signal: AbortSignal,
  ): Promise<StoredWeights | undefined> {
    try {
      const row = await this.d.chain.weightsRow(this.d.netuid, ownerUid, { at, signal });
      this.log.debug({ ownerUid, entries: row.length }, "weights.owner_row");
      return row;
    } catch (err) {
      if (signal.aborted) throw err;
      const e = toValidatorError(err);
      this.log.warn({ ownerUid, code: e.code, err: e.message }, "weights.owner_row_unreadable");
      return undefined;
    }
  }

  /** Log (once per change) a winner uid the chain disagrees with, and an owner uid upstream would not burn to. */
  private noteUids(ownerUid: number | undefined, winner: WinnerView | null): void {
    const w = winner && winner.uid !== null && winner.chainUid !== winner.uid ? winner : null;
    const wKey = w ? `${w.hotkey}:${w.uid}:${w.chainUid}` : "";
    if (w && wKey !== this.saidWinnerUid)
      this.log.warn(
        { winner: w.hotkey, platformUid: w.uid, chainUid: w.chainUid ?? null },
        "weights.winner_uid_differs_from_chain",
      );
    this.saidWinnerUid = wKey;
    const up = this.d.upstreamOwnerUid;
    const oKey = up !== undefined && ownerUid !== undefined && ownerUid !== up ? `${ownerUid}` : "";
    if (oKey && oKey !== this.saidOwnerUid)
      this.log.warn({ ownerUid, upstreamOwnerUid: up }, "weights.owner_uid_differs_from_upstream");
    this.saidOwnerUid = oKey;
  }

  private failed(kind: "transient" | "permanent", message: string): number {
    const n = this.bump(kind);
    if (kind === "permanent")
      this.d.live.raise(ALARM.weightsBlocked, `set_weights refused: ${message}`, "error");
    else if (n >= 3)
      this.d.live.raise(ALARM.weightsFailing, `set_weights failed ${n} times in a row: ${message}`, "error");
    return nextWeightsDelayMs({ kind: "failed", errorKind: kind }, n, this.d.backoff);
  }

  private delay(outcome: WeightsTickOutcome): number {
    if (outcome.kind === "blocked") return nextWeightsDelayMs(outcome, this.bump("blocked"), this.d.backoff);
    this.streak = { kind: "", n: 0 };
    return nextWeightsDelayMs(outcome, 0, this.d.backoff);
  }

  private bump(kind: string): number {
    this.streak = this.streak.kind === kind ? { kind, n: this.streak.n + 1 } : { kind, n: 1 };
    return this.streak.n;
  }

  private report(
    plan: { uids: number[]; weights: number[]; reason: string },
    block: number,
    r: { outcome: string; errorName?: string | null; txHash?: string | null; block?: number | null },
  ): void {
    this.d.live.weights({
      at: this.d.now(),
      outcome: r.outcome,
      uids: plan.uids,
      weights: plan.weights,
      reason: plan.reason,
      errorName: r.errorName ?? null,
      txHash: r.txHash ?? null,
      block: r.block ?? block,
    });
  }
}
