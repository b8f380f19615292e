/**
 * set_weights (or a timelocked commit when the subnet runs commit-reveal) over a connected
 * @polkadot/api: build, sign, submit and follow one extrinsic to a definite outcome. A submission
 * whose websocket drops is recovered by scanning new blocks for its hash and, when it is nowhere to
 * be seen, re-sending the SAME signed bytes: the pool deduplicates them by hash and the nonce makes
 * a second inclusion impossible, so a lost connection never double-submits.
 */
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import type { ApiPromise, WsProvider } from "@polkadot/api";
import type { QueryableModuleStorage, SubmittableExtrinsic } from "@polkadot/api/types";
import { u8aToHex } from "@polkadot/util";
import { InfraError, InputError, isAbortError, ValidatorError } from "../errors.js";
import type { Logger } from "../log.js";
import { toBool, toNum, withDeadline } from "./codec.js";
import { parsePoolRejection, weightsErrorKind } from "./errors.js";
import { extrinsicStatus, type InBlock, readInBlock } from "./inclusion.js";
import type { Hotkey } from "./keys.js";
import { buildTimelockedCommit } from "./timelock.js";
import type { SetWeightsOptions, SetWeightsResult, WeightsMode } from "./types.js";
import { U16_MAX } from "./weights.js";

type WatchResult =
  | { kind: "inBlock"; blockHash: string }
  | { kind: "rejected"; name: string; message: string; custom?: number }
  | { kind: "dropped"; status: string }
  | { kind: "disconnected" }
  | { kind: "deadline" }
  | { kind: "aborted" };

/** What `track` settles on; `send` adds the ids. */
type TrackOutcome = Partial<SetWeightsResult> & Pick<SetWeightsResult, "outcome">;

/** The signed extrinsic `track` follows, and its limits. */
interface Tracked {
  hex: string;
  txHash: string;
  fromBlock: number;
  eraDeath: number;
  deadline: number;
  signal: AbortSignal | undefined;
  log: Logger;
}

/**
 * What `track` carries between watches: resends so far, the last block searched, and whether a
 * lost socket owes one resend.
 */
interface TrackState {
  resubmissions: number;
  scannedTo: number;
  needsResend: boolean;
}

const abortedOutcome = (resubmissions: number): TrackOutcome => ({
  outcome: "aborted" as const,
  message: "aborted by the caller; the extrinsic may still be included",
  resubmissions,
});

const foundOutcome = (b: InBlock, resubmissions: number): TrackOutcome => ({
  outcome: b.success ? ("included" as const) : ("failed" as const),
  blockHash: b.blockHash,
  blockNumber: b.blockNumber,
  errorName: b.errorName,
  resubmissions,
});

/** Pool answers to a resend that mean the first send is pooled or already included. */
const BENIGN_ON_RESEND = new Set(["AlreadyImported", "PriorityTooLow", "Stale", "TemporarilyBanned"]);

export interface WeightsSenderOptions {
  api: ApiPromise;
  provider: WsProvider;
  log: Logger;
  /** Mortal era of our extrinsics, in blocks. */
  eraPeriod: number;
  /** How often to look for a lost transaction after a reconnect. */
  pollIntervalMs: number;
  /** Seconds per block, for the commit-reveal round. */
  blockTimeS: number;
  /** Wall clock in seconds (drand rounds are wall-clock); injectable for tests. */
  nowS?: (() => number) | undefined;
}

/** Sends weights over one connection (the client makes one per connect). */
export class WeightsSender {
  private readonly api: ApiPromise;
  private readonly provider: WsProvider;
  private readonly log: Logger;
  private readonly opts: WeightsSenderOptions;

  constructor(opts: WeightsSenderOptions) {
    this.api = opts.api;
    this.provider = opts.provider;
    this.log = opts.log;
    this.opts = opts;
  }

  async send(
    hotkey: Hotkey,
    netuid: number,
    uids: number[],
    weights: number[],
    versionKey: number,
    opts: SetWeightsOptions = {},
  ): Promise<SetWeightsResult> {
    const api = this.api;
    if (uids.length !== weights.length || uids.length === 0)
      throw new InputError(
        "weights_invalid",
        `uids (${uids.length}) and weights (${weights.length}) must be non-empty and equal`,
      );
    for (const v of [...uids, ...weights])
      if (!Number.isInteger(v) || v < 0 || v > U16_MAX)
        throw new InputError("weights_invalid", `${v} is not a u16`);
    if (!Number.isSafeInteger(versionKey) || versionKey < 0)
      throw new InputError("weights_invalid", `bad version key ${versionKey}`);
    const deadline = performance.now() + (opts.timeoutMs ?? 120_000);
    const signal = opts.signal;
    const log = this.log.child({ netuid, signer: hotkey.ss58 });
    let mode: WeightsMode = "set_weights";
    const result = (r: Partial<SetWeightsResult> & Pick<SetWeightsResult, "outcome">): SetWeightsResult => ({
      mode,
      txHash: undefined,
      blockHash: undefined,
      blockNumber: undefined,
      errorName: undefined,
      errorKind: r.errorName ? weightsErrorKind(r.errorName) : undefined,
      message: undefined,
      nonce: undefined,
      resubmissions: 0,
      revealRound: undefined,
      ...r,
    });
    // Build and sign. Failures here are connection problems: retryable, nothing was sent.
    let tx: SubmittableExtrinsic<"promise">;
    let nonce: number;
    let fromBlock: number;
    let revealRound: number | undefined;
    try {
      const header = await api.rpc.chain.getHeader();
      fromBlock = header.number.toNumber();
      const at = await api.at(header.hash);
      const q = at.query.subtensorModule!;
      const commitReveal = toBool(await q.commitRevealWeightsEnabled!(netuid));
      const txs = api.tx.subtensorModule!;
      if (!commitReveal) {
        tx = txs.setWeights!(netuid, uids, weights, versionKey);
      } else {
        const built = await this.buildCommit(api, q, netuid, uids, weights, versionKey, fromBlock, hotkey);
        if ("unsupported" in built)
          return result({
            outcome: "rejected",
            errorName: "CommitRevealUnsupported",
            message: built.unsupported,
          });
        ({ tx, mode, revealRound } = built);
      }
      nonce = (await api.rpc.system.accountNextIndex(hotkey.ss58)).toNumber();
      await tx.signAsync(hotkey.keyringPair(), { nonce, era: this.opts.eraPeriod });
    } catch (err) {
      if (err instanceof ValidatorError) throw err;
      throw new InfraError(
        "chain_sign_failed",
        `cannot prepare the weights extrinsic: ${(err as Error).message}`,
        { cause: err },
      );
    }
    const hex = tx.toHex();
    const txHash = tx.hash.toHex();
    // The era was anchored at the header polkadot-js signed against (≥ fromBlock): its birth is the
    // first block ≥ fromBlock in the era's phase; from birth + period on it can never be included.
    let eraDeath = Number.POSITIVE_INFINITY;
    if (tx.era.isMortalEra) {
      const period = tx.era.asMortalEra.period.toNumber();
      const phase = tx.era.asMortalEra.phase.toNumber();
      eraDeath = fromBlock + ((((phase - fromBlock) % period) + period) % period) + period;
    }
    log.info(
      { mode, txHash, nonce, from: fromBlock, uids: uids.length, revealRound },
      "chain.weights.submit",
    );
    const track = await this.track(api, { hex, txHash, fromBlock, eraDeath, deadline, signal, log });
    const out = result({ ...track, txHash, nonce, revealRound });
    log.info(
      {
        outcome: out.outcome,
        txHash,
        block: out.blockNumber,
        error: out.errorName,
        resubmissions: out.resubmissions,
      },
      "chain.weights.result",
    );
    return out;
  }

  private async buildCommit(
    api: ApiPromise,
    q: QueryableModuleStorage<"promise">,
    netuid: number,
    uids: number[],
    values: number[],
    versionKey: number,
    head: number,
    hotkey: Hotkey,
  ): Promise<
    { tx: SubmittableExtrinsic<"promise">; mode: WeightsMode; revealRound: number } | { unsupported: string }
  > {
    const txs = api.tx.subtensorModule!;
    const tempo = toNum(await q.tempo!(netuid));
    const reveal = typeof q.revealPeriodEpochs === "function" ? toNum(await q.revealPeriodEpochs(netuid)) : 1;
    const round = {
      tempo,
      currentBlock: head,
      netuid,
      revealPeriodEpochs: reveal,
      blockTimeS: this.opts.blockTimeS,
      nowS: this.opts.nowS?.() ?? Date.now() / 1000,
    };
    if (typeof txs.commitTimelockedWeights === "function") {
      const c = await buildTimelockedCommit(
        { hotkey: hotkey.keyringPair().publicKey, uids, values, versionKey },
        round,
      );
      const version =
        typeof q.commitRevealWeightsVersion === "function"
          ? toNum(
              await q.commitRevealWeightsVersion(
                ...(q.commitRevealWeightsVersion.creator.meta.type.isPlain ? [] : [netuid]),
              ),
            )
          : 4;
      // Hex, not Uint8Array: polkadot-js reads a Uint8Array given for Bytes as already length-prefixed.
      const args: unknown[] = [netuid, u8aToHex(c.commit), c.revealRound];
      if (txs.commitTimelockedWeights.meta.args.length >= 4) args.push(version);
      return {
        tx: txs.commitTimelockedWeights(...args),
        mode: "commit_timelocked_weights",
        revealRound: c.revealRound,
      };
    }
    if (typeof txs.commitCrv3Weights === "function") {
      const c = await buildTimelockedCommit({ uids, values, versionKey }, round);
      return {
        tx: txs.commitCrv3Weights(netuid, u8aToHex(c.commit), c.revealRound),
        mode: "commit_crv3_weights",
        revealRound: c.revealRound,
      };
    }
    return { unsupported: "commit-reveal is enabled but the runtime offers no timelocked commit call" };
  }

  /** Submit and follow one signed extrinsic to a definite outcome, across reconnects. */
  private async track(api: ApiPromise, t: Tracked): Promise<TrackOutcome> {
    const s: TrackState = { resubmissions: 0, scannedTo: t.fromBlock, needsResend: false };
    let w = await this.watch(api, t.hex, t.deadline, t.signal);
    for (;;) {
      const verdict = await this.judgeWatch(api, w, s, t);
      if (verdict) return verdict;
      // Lost sight of it: look for it in every block since signing, resend once per lost socket.
      const next = await this.findOrResend(api, s, t);
      if ("done" in next) return next.done;
      w = next.watch;
    }
  }

  /** What one watch's end means: a definite outcome, or undefined when the extrinsic is out of sight. */
  private async judgeWatch(
    api: ApiPromise,
    w: WatchResult,
    s: TrackState,
    t: Tracked,
  ): Promise<TrackOutcome | undefined> {
    const resubmissions = s.resubmissions;
    switch (w.kind) {
      case "inBlock":
        try {
          const b = await readInBlock(api, w.blockHash, t.txHash);
          if (b) return foundOutcome(b, resubmissions);
        } catch (err) {
          t.log.warn({ err: (err as Error).message }, "chain.weights.inblock_read_failed");
        }
        return undefined;
      case "rejected":
        // After a resend, "already pooled" or "nonce already used" means the first send landed.
        if (resubmissions === 0 || !BENIGN_ON_RESEND.has(w.name))
          return { outcome: "rejected", errorName: w.name, message: w.message, resubmissions };
        return undefined;
      case "dropped":
        return {
          outcome: "rejected",
          errorName: w.status,
          message: `the pool reported ${w.status}`,
          resubmissions,
        };
      case "aborted":
        return abortedOutcome(resubmissions);
      case "deadline":
        return {
          outcome: "timeout",
          message: "no inclusion seen before the deadline; it may still land",
          resubmissions,
        };
      case "disconnected":
        // The node may or may not have the bytes: sending the same signed bytes again is always
        // safe (same hash, same nonce), so we do, once per loss.
        s.needsResend = true;
        return undefined;
    }
  }

  /** Poll until the extrinsic is found, its era or the deadline ends, the signal aborts, or a resend is being watched. */
  private async findOrResend(
    api: ApiPromise,
    s: TrackState,
    t: Tracked,
  ): Promise<{ done: TrackOutcome } | { watch: WatchResult }> {
    for (;;) {
      if (t.signal?.aborted) return { done: abortedOutcome(s.resubmissions) };
      if (performance.now() >= t.deadline)
        return {
          done: {
            outcome: "timeout",
            message: "no inclusion found before the deadline; it may still land",
            resubmissions: s.resubmissions,
          },
        };
      const step = await this.scanOnce(api, s, t);
      if (step) return step;
      await sleep(this.opts.pollIntervalMs, undefined, { signal: t.signal }).catch(() => undefined);
    }
  }

  /** One look at the chain: the blocks since the last look, the era, then a resend if one is owed. */
  private async scanOnce(
    api: ApiPromise,
    s: TrackState,
    t: Tracked,
  ): Promise<{ done: TrackOutcome } | { watch: WatchResult } | undefined> {
    try {
      const head = (
        await withDeadline(api.rpc.chain.getHeader(), 5_000, t.signal, "chain_request_timeout")
      ).number.toNumber();
      const found = await this.scanBlocks(api, s, t, head);
      if (found) return { done: found };
      if (head >= t.eraDeath)
        return {
          done: {
            outcome: "rejected",
            errorName: "EraExpired",
            message: "the extrinsic's era ended without inclusion",
            resubmissions: s.resubmissions,
          },
        };
      if (s.needsResend) {
        s.needsResend = false;
        s.resubmissions++;
        t.log.warn({ resubmissions: s.resubmissions }, "chain.weights.resend");
        return { watch: await this.watch(api, t.hex, t.deadline, t.signal) };
      }
    } catch (err) {
      if (isAbortError(err)) return { done: abortedOutcome(s.resubmissions) };
      t.log.debug({ err: (err as Error).message }, "chain.weights.scan_failed");
    }
    return undefined;
  }

  /** Every block after the last scanned one up to `head`: the extrinsic's outcome where it is found. */
  private async scanBlocks(
    api: ApiPromise,
    s: TrackState,
    t: Tracked,
    head: number,
  ): Promise<TrackOutcome | undefined> {
    for (let n = s.scannedTo + 1; n <= head; n++) {
      const b = await readInBlock(api, (await api.rpc.chain.getBlockHash(n)).toHex(), t.txHash);
      if (b) {
        t.log.info({ block: n, resubmissions: s.resubmissions }, "chain.weights.found_after_reconnect");
        return foundOutcome(b, s.resubmissions);
      }
      s.scannedTo = n;
    }
    return undefined;
  }

  /** submitAndWatch until InBlock/Finalized, a pool verdict, a lost socket, the deadline or the signal. */
  private watch(
    api: ApiPromise,
    hex: string,
    deadline: number,
    signal: AbortSignal | undefined,
  ): Promise<WatchResult> {
    return new Promise<WatchResult>((resolve) => {
      if (signal?.aborted) return resolve({ kind: "aborted" });
      let settled = false;
      let unsub: (() => void) | undefined;
      const onDisconnected = () => finish({ kind: "disconnected" });
      const onAbort = () => finish({ kind: "aborted" });
      const timer = setTimeout(() => finish({ kind: "deadline" }), Math.max(0, deadline - performance.now()));
      api.on("disconnected", onDisconnected);
      signal?.addEventListener("abort", onAbort, { once: true });
      function finish(r: WatchResult) {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        api.off("disconnected", onDisconnected);
        try {
          unsub?.();
        } catch {
          // the subscription died with its socket
        }
        resolve(r);
      }
      const provider = this.provider;
      if (!api.isConnected || !provider) return finish({ kind: "disconnected" });
      // Straight to the provider, not api.rpc: rpc-core memoizes subscriptions by their params, so
      // re-sending the same bytes after a lost socket would silently reuse the dead subscription.
      provider
        .subscribe(
          "author_extrinsicUpdate",
          "author_submitAndWatchExtrinsic",
          [hex],
          (error, status: unknown) => {
            if (error) return;
            const s = extrinsicStatus(status);
            if ((s.kind === "inBlock" || s.kind === "finalized") && s.hash)
              finish({ kind: "inBlock", blockHash: s.hash });
            else if (s.kind === "invalid" || s.kind === "dropped" || s.kind === "usurped")
              finish({ kind: "dropped", status: s.kind });
          },
        )
        .then((id) => {
          unsub = () => {
            provider.unsubscribe("author_extrinsicUpdate", "author_unwatchExtrinsic", id).catch(() => {});
          };
          if (settled) unsub();
        })
        .catch((err: unknown) => {
          const rej = parsePoolRejection(err);
          if (rej)
            finish({
              kind: "rejected",
              name: rej.name,
              message: rej.message,
              ...(rej.custom === undefined ? {} : { custom: rej.custom }),
            });
          else finish({ kind: "disconnected" });
        });
    });
  }
}
