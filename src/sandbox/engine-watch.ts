/**
 * Knows when the Docker engine went away: a long-lived GET /events stream that ends when the
 * engine stops (restart, upgrade, crash). Every loss bumps `epoch`; episodes compare the epoch at
 * their start and end — containers killed by an engine restart say nothing about the policy, so
 * such an episode is an infra failure and is re-run. The same stream carries the engine's `kill`
 * events for this session's containers: a container killed by someone else (the engine stopping
 * it on shutdown, an operator) is told apart from one that died of its own doing. While the engine
 * is unreachable the watch reconnects with back-off.
 */
import type { Readable } from "node:stream";
import type { Logger } from "../log.js";
import type { Docker } from "./docker.js";

export class EngineWatch {
  /** Incremented on every loss of the engine's event stream. */
  epoch = 0;
  private stream: Readable | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private delayMs = 250;
  /** Told of every loss of the stream (the pool takes the engine out of placement). */
  onLost: (() => void) | undefined;
  /** Container name → kill events seen (bounded: names are removed when episodes forget them). */
  private readonly kills = new Map<string, number>();

  constructor(
    private readonly docker: Docker,
    private readonly log: Logger,
    private readonly sessionLabel: string,
  ) {}

  /** How many times the engine was asked to kill this container (by anyone) since the watch began. */
  killsOf(name: string): number {
    return this.kills.get(name) ?? 0;
  }

  /** Drop what is known of an episode's containers (their names share its prefix). */
  forgetPrefix(prefix: string): void {
    for (const name of this.kills.keys()) if (name.startsWith(prefix)) this.kills.delete(name);
  }

  /** Resolves once the stream is open (or the first attempt failed: the watch keeps trying). */
  async start(): Promise<void> {
    await this.connect();
  }

  /**
   * True when the engine was lost since `epoch` was read. (A watch that never connected says
   * nothing: it must not turn every episode into an infra failure.)
   */
  changedSince(epoch: number): boolean {
    return this.epoch !== epoch;
  }

  /**
   * Another observer (the pool's heartbeat) knows the engine is gone, e.g. cut off without a reset:
   * count it as a loss now and reconnect from scratch.
   */
  declareLost(): void {
    if (this.stopped) return;
    const s = this.stream;
    this.stream = undefined;
    s?.destroy();
    this.epoch++;
    this.log.warn({ losses: this.epoch }, "docker.engine_lost");
    this.schedule();
  }

  /** Whether the event stream is open now. */
  get connected(): boolean {
    return this.stream !== undefined;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.stream?.destroy();
    this.stream = undefined;
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    try {
      const s = (await this.docker.getEvents({
        filters: { type: ["container"], event: ["kill"], label: [this.sessionLabel] },
      })) as unknown as Readable;
      this.stream = s;
      this.delayMs = 250;
      const lost = () => {
        if (this.stream !== s) return;
        this.stream = undefined;
        if (this.stopped) return;
        this.epoch++;
        this.log.warn({ losses: this.epoch }, "docker.engine_lost");
        this.schedule();
        this.onLost?.();
      };
      s.on("end", lost);
      s.on("close", lost);
      s.on("error", lost);
      let buf = "";
      s.on("data", (chunk: Buffer) => {
        buf += chunk.toString("utf8");
        for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          try {
            const ev = JSON.parse(line) as { Actor?: { Attributes?: { name?: string } } };
            const name = ev.Actor?.Attributes?.name;
            if (name) this.kills.set(name, (this.kills.get(name) ?? 0) + 1);
          } catch {
            // not an event line
          }
        }
        if (buf.length > 1 << 20) buf = "";
      });
    } catch {
      this.schedule();
    }
  }

  private schedule(): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.connect(), this.delayMs);
    this.timer.unref();
    this.delayMs = Math.min(this.delayMs * 2, 5_000);
  }
}
