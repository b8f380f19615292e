/**
 * What one episode carries from step to step: its logger, the failures seen so far, the result
 * being filled in, the artifacts folder and the meter token. The steps (sidecar, agent, collect,
 * outcome) read and write it; `runEpisode` owns it.
 */
import type { Logger } from "../log.js";
import type { Receipt, UsageSummary } from "../meter/index.js";
import type { Pack } from "../pack/index.js";
import type { EpisodeEngine, EpisodeScope, Sandbox } from "../sandbox/index.js";
import type { ArtifactWriter } from "./artifacts.js";
import type {
  EpisodeFailure,
  EpisodeMeter,
  EpisodePhaseUpdate,
  EpisodeResult,
  EpisodeScenario,
} from "./types.js";

export class EpisodeRun {
  readonly failures: EpisodeFailure[] = [];
  /** Stack traces of our own errors, for error.txt. */
  readonly errors: string[] = [];
  readonly result: EpisodeResult;
  scope: EpisodeScope | undefined;
  token: string | undefined;
  private tokenClosed = false;
  private closing: Promise<UsageSummary | null> | undefined;

  constructor(
    readonly id: string,
    readonly sandbox: Sandbox,
    readonly meter: EpisodeMeter,
    readonly pack: Pack,
    readonly scenario: EpisodeScenario,
    readonly artifacts: ArtifactWriter,
    readonly log: Logger,
    private readonly onProgress: ((p: EpisodePhaseUpdate) => void) | undefined,
  ) {
    this.result = {
      episode_id: id,
      scenario: scenario.name,
      pack_hash: pack.hash,
      status: "scored",
      quality: 0,
      tests: 0,
      passed: 0,
      reward: null,
      failure: null,
      notes: [],
      cost_usd: 0,
      by_model: {},
      usage: null,
      price_table_hash: meter.priceTableHash,
      timings: {
        images_ms: 0,
        setup_ms: 0,
        agent_ms: 0,
        verify_ms: 0,
        total_ms: 0,
        policy_setup_ms: null,
        collect_ms: 0,
      },
      images: { sidecar: null, scenario: null },
      agent: {
        exit_code: null,
        end_reason: null,
        end_code: null,
        turns: 0,
        tool_calls: 0,
        killed_by: null,
        invalid_records: 0,
        disk_bytes: null,
        disk_inodes: null,
        files: {},
      },
      truncated_before_tool_call: false,
      answer_provenance: null,
      provenance: null,
      verifier: null,
      artifacts: { dir: artifacts.dir, files: {} },
    };
  }
  /** The container engine, through the one seam the episode drives containers by. */
  get engine(): EpisodeEngine {
    return this.sandbox.episodeEngine;
  }

  fail(f: EpisodeFailure): void {
    this.failures.push(f);
    this.log.warn({ class: f.class, code: f.code, err: f.message }, "episode.failure");
  }

  progress(p: EpisodePhaseUpdate): void {
    try {
      this.onProgress?.(p);
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, "episode.progress_listener_failed");
    }
  }

  /** The token's spend so far (0 once it is closed). */
  spentUsd(): number {
    if (this.token === undefined || this.tokenClosed) return this.result.usage?.cost_usd ?? 0;
    try {
      return this.meter.summary(this.token).cost_usd;
    } catch {
      return 0;
    }
  }

  /**
   * Close the meter token once: nothing is billed to this episode afterwards. The usage is the
   * meter's once the calls the close aborted have settled (their receipts included).
   */
  async closeToken(): Promise<UsageSummary | null> {
    if (this.token === undefined || this.tokenClosed) return this.closing ?? this.result.usage;
    this.tokenClosed = true;
    this.closing = this.meter.close(this.token).then(
      (usage) => {
        this.result.usage = usage;
        return usage;
      },
      (err: unknown) => {
        this.log.warn({ err: (err as Error).message }, "episode.meter.close.failed");
        return this.result.usage;
      },
    );
    return this.closing;
  }

  receipts(): Receipt[] {
    try {
      return this.meter.receiptsFor(this.id);
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, "episode.receipts.failed");
      return [];
    }
  }
}
