/**
 * The meter: an OpenAI-compatible proxy in the daemon process that every model call of a policy
 * goes through. It alone holds the provider key; per episode it enforces the allowlist and the USD
 * cap (upstream's rule decides refusals and clamps; the worst cases in flight bound real spend) and
 * records a receipt per call. This facade wires the parts: episodes.ts (tokens, budgets), server.ts
 * (HTTP), chat.ts (bounds, parse, admit, forward), relay.ts (the answer to the client), booking.ts
 * (settlement and receipts); the rules are pure: admission.ts, exposure.ts, ledger.ts, estimate.ts.
 */
import { InputError } from "../errors.js";
import { type Logger, silentLogger } from "../log.js";
import { floatPrices } from "./admission.js";
import { Booking } from "./booking.js";
import { ChatPath } from "./chat.js";
import {
  type Activity,
  type Budget4,
  budgetView,
  Episodes,
  summarize,
  type UsageSummary,
} from "./episodes.js";
import { Gate } from "./gate.js";
import { type Allowlist, compilePrices, type PriceTable, priceTableHash } from "./prices.js";
import { type Receipt, ReceiptQueue, type ReceiptSink } from "./receipt.js";
import { DEFAULT_RETRY, type RetryPolicy } from "./retry.js";
import { ScanPool, type ScanPoolOptions } from "./scan-pool.js";
import { type Listener, type ListenOptions, MeterServer } from "./server.js";
import { Upstream } from "./upstream.js";

export type { Activity, Budget4, ModelUsage, UsageSummary } from "./episodes.js";
export type { Listener, ListenOptions } from "./server.js";

const MiB = 1024 * 1024;

export interface MeterOptions {
  /** Provider base URL including /v1 (LLM_BASE_URL, or the simulator's url). */
  upstreamUrl: string;
  /** The operator's provider key; sent upstream only, never logged. */
  apiKey?: string;
  allowlist: Allowlist;
  prices: PriceTable;
  /** Receipts are also persisted here in batches (the SQLite ReceiptRepo). */
  receipts?: ReceiptSink;
  log?: Logger;
  /** One provider attempt's deadline, head and body (default 900 s: upstream's total timeout). */
  upstreamTimeoutMs?: number;
  retry?: Partial<RetryPolicy>;
  /** Largest request body accepted (default 64 MiB, upstream's limit: agents resend whole conversations). */
  maxBodyBytes?: number;
  /** Request bytes all calls may hold at once (a body and its forwarded copy; default 512 MiB). */
  maxBufferedBytes?: number;
  /** Request bytes one token may hold at once (default 160 MiB: one largest body and its copy). */
  maxBytesPerToken?: number;
  /** Non-stream answer bytes all calls may hold at once, read and not yet taken by their clients (default 512 MiB). */
  maxAnswerBytes?: number;
  /** The same per token (default 128 MiB: two of the largest answers); past it a call fails with 429. */
  maxAnswerBytesPerToken?: number;
  /** A client that takes no byte of its answer for this long, while bytes wait for it, is cut (default 60 s). */
  clientIdleMs?: number;
  /** Calls of one token in flight at once (default 32); more wait, their bodies unread. */
  maxCallsPerToken?: number;
  /** Receipts kept per episode (default 2000, as upstream keeps rows); counters go on. */
  maxRowsPerEpisode?: number;
  /** Time to receive a whole request (default 120 s). */
  requestTimeoutMs?: number;
  /** Connections per listener (default 512). */
  maxConnections?: number;
  receiptFlushMs?: number;
  receiptBatch?: number;
  /** Which request bodies are scanned on the event loop (the rest in a worker thread). */
  scans?: ScanPoolOptions;
}

export class Meter {
  readonly priceTableHash: string;
  private readonly log: Logger;
  private readonly upstream: Upstream;
  private readonly queue: ReceiptQueue | null;
  private readonly episodes: Episodes;
  private readonly server: MeterServer;
  private readonly scans: ScanPool;
  private stopped = false;

  constructor(opts: MeterOptions) {
    // Fails closed at start: an allowlisted model without a price is a configuration error.
    const prices = compilePrices(opts.allowlist, opts.prices);
    this.priceTableHash = priceTableHash(opts.prices);
    const modelsBody = Buffer.from(
      JSON.stringify({
        object: "list",
        data: opts.allowlist.models.map((id) => ({ id, object: "model", created: 0, owned_by: "engy" })),
      }),
    );
    this.log = (opts.log ?? silentLogger).child({ component: "meter" });
    this.upstream = new Upstream({
      url: opts.upstreamUrl,
      apiKey: opts.apiKey,
      timeoutMs: opts.upstreamTimeoutMs ?? 900_000,
    });
    this.queue = opts.receipts
      ? new ReceiptQueue(opts.receipts, {
          flushMs: opts.receiptFlushMs,
          maxBatch: opts.receiptBatch,
          log: this.log,
        })
      : null;
    const maxBodyBytes = opts.maxBodyBytes ?? 64 * MiB;
    this.episodes = new Episodes(this.log, opts.receipts, this.queue, {
      callsPerToken: opts.maxCallsPerToken ?? 32,
      bytesPerToken: opts.maxBytesPerToken ?? Math.max(160 * MiB, 2 * maxBodyBytes),
      answerBytesPerToken: opts.maxAnswerBytesPerToken ?? 128 * MiB,
      rowsPerEpisode: opts.maxRowsPerEpisode ?? 2000,
      closeSettleMs: 5_000,
    });
    this.scans = new ScanPool(this.log, opts.scans);
    const chat = new ChatPath({
      prices,
      fprices: floatPrices(opts.prices),
      allowed: new Set(opts.allowlist.models),
      upstream: this.upstream,
      retry: { ...DEFAULT_RETRY, ...opts.retry },
      maxBodyBytes,
      bytes: new Gate(opts.maxBufferedBytes ?? 512 * MiB),
      answers: {
        overall: new Gate(opts.maxAnswerBytes ?? 512 * MiB),
        idleMs: opts.clientIdleMs ?? 60_000,
      },
      booking: new Booking(this.queue),
      scans: this.scans,
      apiKey: opts.apiKey,
      log: this.log,
    });
    this.server = new MeterServer(this.episodes, chat, modelsBody, this.log, {
      requestTimeoutMs: opts.requestTimeoutMs ?? 120_000,
      maxConnections: opts.maxConnections ?? 512,
    });
  }

  /** A bearer token for one episode with its own cap: "ep-" + 24 random bytes, base64url. */
  mint(episodeId: string, capUsd: number): string {
    if (this.stopped) throw new InputError("meter_stopped", "the meter is stopped");
    return this.episodes.mint(episodeId, capUsd);
  }

  /**
   * Retire a token (later calls → 401), abort its calls in flight, and return its usage once they
   * have settled (within 5 s): the summary books what they cost, as their receipts do.
   */
  close(token: string): Promise<UsageSummary> {
    return this.episodes.close(token);
  }

  /** Live usage of a token (also answers for recently closed ones). */
  summary(token: string): UsageSummary {
    return summarize(this.episodes.episode(token));
  }

  /** For the episode watchdog: monotonic start, last finished forwarded call, count. */
  lastActivity(token: string): Activity {
    const ep = this.episodes.episode(token);
    const a: Activity = { startedAt: ep.startedAt, calls: ep.calls };
    if (ep.lastCompletedAt !== undefined) a.lastCompletedAt = ep.lastCompletedAt;
    return a;
  }

  /** The episode's receipts in arrival order (meter.json). Older episodes are read back from the sink. */
  receiptsFor(episodeId: string): Receipt[] {
    return this.episodes.receiptsFor(episodeId);
  }

  /** {cap, spent, reserved, remaining} of a token, as GET /v1/budget reports it (upstream's figures). */
  budget(token: string): Budget4 {
    return budgetView(this.episodes.episode(token));
  }

  /**
   * Serve on host:port (port 0: any). May be called several times: the loopback listener plus one
   * per episode on that episode's network gateway. A listener given `onlyToken` answers that one
   * token and treats every other as unknown, so an episode's network can only ever spend its own
   * budget, whatever token reaches it; without it, a listener accepts every live token.
   * `fallbackToEphemeral`: when the port is taken, take any free one (as upstream's meter does; for
   * the standalone meter — an episode's listener keeps its port, the only one its firewall admits).
   */
  async listen(
    host: string,
    port: number,
    onlyToken?: string,
    opts: Omit<ListenOptions, "onlyToken"> = {},
  ): Promise<Listener> {
    if (this.stopped) throw new InputError("meter_stopped", "the meter is stopped");
    return this.server.listen(host, port, { ...opts, onlyToken });
  }

  /** Close every listener, abort calls in flight, write the remaining receipts. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.episodes.abortAll();
    await this.server.close();
    await this.scans.close();
    this.queue?.flush();
    await this.upstream.destroy();
    this.log.info(
      { receipts_written: this.queue?.written ?? 0, receipt_failures: this.queue?.failures ?? 0 },
      "meter.stopped",
    );
  }
}
