/**
 * What a heartbeat reports (validator.py `_heartbeat_fields`). Pure over the marks the loops keep.
 * A weight-only validator reports its weight-setting liveness only: eval telemetry would describe
 * an evaluator this process is not running. Absent values are left out, as upstream leaves None out.
 */
import type { HeartbeatInfo } from "../platform/index.js";
import { MARK, type PlatformMarksRepo } from "../store/index.js";

export function heartbeatInfo(a: {
  evaluating: boolean;
  marks: Pick<PlatformMarksRepo, "get">;
  llm: { defaultModel: string; baseUrl: string };
}): HeartbeatInfo {
  const secs = (name: string) => {
    const at = a.marks.get(name)?.at;
    return at === undefined ? undefined : Math.floor(at / 1000);
  };
  const info = a.evaluating
    ? {
        last_set_weights_at: secs(MARK.lastSetWeightsAt),
        last_eval_at: secs(MARK.lastEvalAt),
        // The image digests of the last evaluation (as its verdict reported them), so the
        // platform can tell which validators ran the same sandbox.
        harness_image_hash: a.marks.get(MARK.lastEvalAt)?.detail ?? undefined,
        llm_model: a.llm.defaultModel,
        llm_base_url: a.llm.baseUrl,
      }
    : { last_set_weights_at: secs(MARK.lastSetWeightsAt) };
  return Object.fromEntries(Object.entries(info).filter(([, v]) => v !== undefined)) as HeartbeatInfo;
}
