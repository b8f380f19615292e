/**
 * What a heartbeat reports (validator.py `_heartbeat_fields`). Pure over the marks the loops keep.
 * A weight-only validator reports its weight-setting liveness only: eval telemetry would describe
 * an evaluator this process is not running. Evaluating, as upstream's: `last_eval_at` (the last
 * score POST the platform accepted), the bench's digests and version ("unknown" until a bench has
 * been prepared, as upstream's harness before its first pull), `llm_model` =
 * `policy:auto (default <testee>)`, `llm_base_url`, and `health_issue` while runs are discarded.
 * Absent values are left out, as upstream's client leaves None out.
 */
import type { HeartbeatInfo } from "../platform/index.js";
import { MARK, type PlatformMarksRepo } from "../store/index.js";
import { llmModelLabel } from "../subnet.js";
import { clipChars, type HarnessMetadata, HEALTH_ISSUE_MAX, harnessMetadataOf } from "./decide.js";

/**
 * The mark holding the bench the harness last prepared (JSON, upstream's `_harness_metadata` keys),
 * so a restart still reports it: set when a bench is prepared and when a verdict is queued.
 */
export const BENCH_MARK = "eval_bench";

/** The bench facts the heartbeat and the daemon's own verdicts carry (decide.ts HarnessMetadata). */
export type BenchTelemetry = HarnessMetadata;

/** The bench facts a verdict (or a prepared bench) carried, as the mark stores them; null when none. */
export function benchTelemetryOf(v: BenchTelemetry): string | null {
  const t = harnessMetadataOf(v as Record<string, unknown>);
  return Object.keys(t).length > 0 ? JSON.stringify(t) : null;
}

/** What the mark holds: the bench the harness last prepared ({} before the first). */
export function lastHarness(marks: Pick<PlatformMarksRepo, "get">): BenchTelemetry {
  const detail = marks.get(BENCH_MARK)?.detail;
  if (!detail) return {};
  try {
    const v = JSON.parse(detail) as unknown;
    return v && typeof v === "object" ? harnessMetadataOf(v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** The heartbeat's `health_issue`: set while this validator discards its runs, cleared by a posted score. */
export class HealthIssue {
  private issue: string | null = null;
  get value(): string | null {
    return this.issue;
  }
  set(text: string): void {
    this.issue = clipChars(text, HEALTH_ISSUE_MAX);
  }
  clear(): void {
    this.issue = null;
  }
}

export function heartbeatInfo(a: {
  evaluating: boolean;
  marks: Pick<PlatformMarksRepo, "get">;
  llm: { defaultModel: string; baseUrl: string };
  healthIssue?: string | null;
}): HeartbeatInfo {
  const secs = (name: string) => {
    const at = a.marks.get(name)?.at;
    return at === undefined ? undefined : Math.floor(at / 1000);
  };
  if (!a.evaluating) return drop({ last_set_weights_at: secs(MARK.lastSetWeightsAt) });
  const bench = lastHarness(a.marks);
  return drop({
    last_set_weights_at: secs(MARK.lastSetWeightsAt),
    last_eval_at: secs(MARK.lastEvalAt),
    bench_image_hash: bench.bench_image_hash ?? "unknown",
    harness_image_hash: bench.harness_image_hash ?? "unknown",
    bench_version: bench.bench_version ?? "unknown",
    llm_model: llmModelLabel(a.llm.defaultModel),
    llm_base_url: a.llm.baseUrl,
    health_issue: a.healthIssue ? clipChars(a.healthIssue, HEALTH_ISSUE_MAX) : undefined,
  });
}

function drop(info: Record<string, string | number | undefined>): HeartbeatInfo {
  return Object.fromEntries(Object.entries(info).filter(([, v]) => v !== undefined)) as HeartbeatInfo;
}
