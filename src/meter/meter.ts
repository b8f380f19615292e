/**
 * The meter: an OpenAI-compatible proxy in the daemon process that every model call of a policy
 * goes through. It alone holds the provider key; per episode it enforces the allowlist and the USD
 * cap (reserve the worst case before forwarding, settle on the provider's usage after) and records
 * a receipt per call. This facade wires the parts: episodes.ts (tokens, budgets), server.ts (HTTP),
 * chat.ts (validate, reserve, forward), relay.ts (the answer to the client), booking.ts
 * (settlement and receipts); the arithmetic is in ledger.ts, the estimate in estimate.ts.
 */
import { InputError } from "../errors.js";
import { type Logger, silentLogger } from "../log.js";
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
import { type Allowlist, compilePrices, type PriceTable, priceTableHash } from "./prices.js";
import { type Receipt, ReceiptQueue, type ReceiptSink } from "./receipt.js";
import { DEFAULT_RETRY, type RetryPolicy } from "./retry.js";
import { type Listener, MeterServer } from "./server.js";
import { Upstream } from "./upstream.js";

export type { Activity, Budget4, ModelUsage, UsageSummary } from "./episodes.js";
export type { Listener } from "./server.js";

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
  /** Time to the response head, and the longest silence inside a stream. Default 300 s. */
  upstreamTimeoutMs?: number;
  retry?: Partial<RetryPolicy>;
  /** Largest request body accepted (default 64 MiB: agents resend whole conversations). */
  maxBodyBytes?: number;
  receiptFlushMs?: number;
  receiptBatch?: number;
}

export class Meter {
  readonly priceTableHash: string;
  private readonly log: Logger;
  private readonly upstream: Upstream;
  private readonly queue: ReceiptQueue | null;
  private readonly episodes: Episodes;
  private readonly server: MeterServer;
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
    this.log = (opts.log ?? silentLogger).child({ mod: "meter" });
    this.upstream = new Upstream({
      url: opts.upstreamUrl,
      apiKey: opts.apiKey,
      timeoutMs: opts.upstreamTimeoutMs ?? 300_000,
    });
    this.queue = opts.receipts
      ? new ReceiptQueue(opts.receipts, {
          flushMs: opts.receiptFlushMs,
          maxBatch: opts.receiptBatch,
          log: this.log,
        })
      : null;
    this.episodes = new Episodes(this.log, opts.receipts, this.queue);
    const chat = new ChatPath({
      prices,
      allowed: new Set(opts.allowlist.models),
      upstream: this.upstream,
      retry: { ...DEFAULT_RETRY, ...opts.retry },
      maxBodyBytes: opts.maxBodyBytes ?? 64 * 1024 * 1024,
      booking: new Booking(this.queue),
      log: this.log,
    });
    this.server = new MeterServer(this.episodes, chat, modelsBody, this.log);
  }

  /** A bearer token for one episode with its own cap: "ep-" + 24 random bytes, base64url. */
  mint(episodeId: string, capUsd: number): string {
    if (this.stopped) throw new InputError("meter_stopped", "the meter is stopped");
    return this.episodes.mint(episodeId, capUsd);
  }

  /** Retire a token (later calls → 401), abort its calls in flight, and return its usage. */
  close(token: string): UsageSummary {
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

  /** {cap, spent, reserved, remaining} of a token, as GET /v1/budget reports it. */
  budget(token: string): Budget4 {
    return budgetView(this.episodes.episode(token).budget);
  }

  /**
   * Serve on host:port (port 0: any). May be called several times: the loopback listener plus one
   * per episode on that episode's network gateway. A listener given `onlyToken` answers that one
   * token and treats every other as unknown, so an episode's network can only ever spend its own
   * budget, whatever token reaches it; without it, a listener accepts every live token.
   */
  async listen(host: string, port: number, onlyToken?: string): Promise<Listener> {
    if (this.stopped) throw new InputError("meter_stopped", "the meter is stopped");
    return this.server.listen(host, port, onlyToken);
  }

  /** Close every listener, abort calls in flight, write the remaining receipts. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.episodes.abortAll();
    await this.server.close();
    this.queue?.flush();
    await this.upstream.destroy();
    this.log.info(
      { receipts_written: this.queue?.written ?? 0, receipt_failures: this.queue?.failures ?? 0 },
      "meter.stopped",
    );
  }
}
