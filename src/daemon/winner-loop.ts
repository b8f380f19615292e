/**
 * The winner loop's work: GET /winner/current → the winner cache (the platform's seat is adopted
 * as is, as upstream's `_refresh_winner_cache` does), then the advisory cross-checks of
 * winner-check.ts; a divergence raises `consensus_divergence`, an agreement clears it. The same
 * answer tells whether this validator's own vote for the finalized epoch was counted
 * (vote-count.ts): one the platform accepted and then filtered raises `vote_not_counted`.
 */
import type { Logger } from "../log.js";
import type { PlatformClient, WinnerCurrent } from "../platform/index.js";
import type { LiveStatus } from "../status/index.js";
import type { VerdictOutboxRepo, WinnerCacheRepo } from "../store/index.js";
import { UPSTREAM_RELEASE } from "../subnet.js";
import { ALARM } from "./eval-loop.js";
import { ownVoteCount, voteNotCountedMessage } from "./vote-count.js";
import {
  type CrossCheck,
  crossCheckSeat,
  crossCheckWinner,
  DIVERGENCE_TOLERANCE,
  type SeatCheck,
  type SeatClock,
  seatClockOf,
} from "./winner-check.js";

export interface WinnerRefresherDeps {
  platform: Pick<PlatformClient, "getWinnerCurrent">;
  cache: WinnerCacheRepo;
  live: LiveStatus;
  log: Logger;
  now: () => number;
  /** STAKE_WEIGHTED_CONSENSUS: weigh the score check's mean by stake (upstream: equal weights). */
  stakeWeighted: boolean;
  /** A spec's maximum score (its scenario count); undefined when this build does not know the spec. */
  maxScoreOf?(spec: number): Promise<number | undefined>;
  /** This validator's votes (evaluating only): is the one for the finalized epoch in its votes? */
  ownVotes?: { hotkey: string; outbox: Pick<VerdictOutboxRepo, "get"> };
}

export class WinnerRefresher {
  private readonly log: Logger;
  private reported = "";
  /** The seat as the last answer left it (from the cache of the previous run at first). */
  private clock: SeatClock | undefined;
  private seatCheck: SeatCheck | undefined;
  /** The finalized epoch whose accepted vote the platform did not count (the alarm's subject). */
  private uncounted: number | undefined;

  constructor(private readonly d: WinnerRefresherDeps) {
    this.log = d.log.child({ component: "winner" });
    const previous = d.cache.read(d.now(), Number.POSITIVE_INFINITY);
    if (previous) this.clock = seatClockOf(previous.winner, undefined);
  }

  async tick(signal: AbortSignal): Promise<undefined> {
    const d = this.d;
    const wc = await d.platform.getWinnerCurrent({ signal });
    d.cache.put(wc, d.now());
    d.live.clear(ALARM.platformUnreachable);
    const score = crossCheckWinner(wc, { stakeWeighted: d.stakeWeighted });
    const epochId = wc.finalized_epoch?.challenge_epoch_id ?? null;
    if (this.seatCheck === undefined || epochId !== this.clock?.asOfEpochId)
      this.seatCheck = await this.checkSeat(wc);
    this.clock = seatClockOf(wc, this.clock);
    this.alarm(score, this.seatCheck);
    this.checkOwnVote(wc);
    return undefined;
  }

  private checkOwnVote(wc: WinnerCurrent): void {
    const own = this.d.ownVotes;
    const epochId = wc.finalized_epoch?.challenge_epoch_id;
    if (!own || epochId === undefined) return;
    const v = ownVoteCount(wc, own.hotkey, own.outbox.get(epochId, own.hotkey));
    if (v.kind === "not_counted") {
      if (this.uncounted !== v.epochId)
        this.log.error({ epoch: v.epochId, votesAs: UPSTREAM_RELEASE }, "winner.vote_not_counted");
      this.uncounted = v.epochId;
      this.d.live.raise(ALARM.voteNotCounted, voteNotCountedMessage(v.epochId, UPSTREAM_RELEASE), "error");
    } else if (v.kind === "counted") {
      if (this.uncounted !== undefined) this.log.info({ epoch: v.epochId }, "winner.vote_counted_again");
      this.uncounted = undefined;
      this.d.live.clear(ALARM.voteNotCounted);
    }
  }

  private async checkSeat(wc: WinnerCurrent): Promise<SeatCheck> {
    const spec = wc.finalized_epoch?.spec_number ?? null;
    let max: number | undefined;
    if (spec !== null && this.d.maxScoreOf) max = await this.d.maxScoreOf(spec).catch(() => undefined);
    const check = crossCheckSeat(wc, this.clock, { maxScoreOf: () => max });
    if (check.kind === "not_applicable")
      this.log.debug(
        { epoch: wc.finalized_epoch?.challenge_epoch_id, reason: check.reason },
        "winner.seat_check_skipped",
      );
    else
      this.log.info(
        {
          epoch: check.epochId,
          replaced: check.replaced,
          localReplaced: check.local.replaced,
          consensus: check.consensus.score,
          qualified: check.consensus.qualified,
          bar: check.local.bar?.threshold ?? null,
          ageEpochs: check.ageEpochs,
        },
        check.kind === "agree" ? "winner.seat_check_agrees" : "winner.seat_check_diverges",
      );
    return check;
  }

  private alarm(score: CrossCheck, seat: SeatCheck): void {
    const problems: string[] = [];
    if (score.kind === "diverge")
      problems.push(
        `epoch ${score.epochId}: local consensus ${score.local.toFixed(4)} vs the server's winner score ${score.server.toFixed(4)} (Δ ${score.delta.toFixed(4)} > ${DIVERGENCE_TOLERANCE})`,
      );
    if (seat.kind === "diverge") {
      const bar = seat.local.bar
        ? ` bar ${seat.local.bar.threshold.toFixed(4)} at seat age ${seat.ageEpochs}`
        : " empty seat";
      problems.push(
        `epoch ${seat.epochId}: the platform ${seat.replaced ? "replaced" : "held"} the seat; the same votes ${seat.local.replaced ? "replace" : "hold"} it (consensus ${seat.consensus.score.toFixed(4)}, qualified ${seat.consensus.qualified},${bar})`,
      );
    }
    if (problems.length > 0) {
      const key = problems.join("; ");
      if (key !== this.reported) this.log.warn({ problems }, "winner.consensus_divergence");
      this.reported = key;
      this.d.live.raise(ALARM.consensusDivergence, key, "warn");
    } else if (score.kind === "agree" || seat.kind === "agree") {
      if (this.reported) this.log.info("winner.consensus_agrees_again");
      this.reported = "";
      this.d.live.clear(ALARM.consensusDivergence);
    }
  }
}
