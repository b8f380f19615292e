/**
 * The end of an episode: answer provenance against the meter's receipts, the primary failure
 * deciding scored vs failed, and the artifacts that explain the result (meter.json,
 * evaluation.json, error.txt, policy.log).
 */
import { meterArtifact, type Receipt } from "../meter/index.js";
import { ARTIFACT_FILES } from "./artifacts.js";
import { endedByTheMeter, primaryFailure } from "./attribution.js";
import { type HermesAnswer, upstreamProvenance } from "./hermes-session.js";
import { checkProvenance, type ProvenanceTurn } from "./provenance.js";
import type { EpisodeRun } from "./run-context.js";
import type { EpisodeFailure, EpisodeResult } from "./types.js";
import type { GradeResult } from "./verifier.js";

/** What provenance reads of what was collected. */
export interface CollectedAnswers {
  turns: readonly ProvenanceTurn[] | undefined;
  /** Turn records that were not valid (the record was edited or broken): answers no one can check. */
  invalidTurns: number;
  answers: readonly HermesAnswer[];
}

/**
 * Provenance. Upstream's shadow check (every answer the agent recorded against the fingerprints the
 * meter saw) is reported with every episode and never scored. The strict rule (each answer must
 * match its own receipt, src/episode/provenance.ts; an answer no model gave, or a turn record that
 * is not valid, fails the episode with quality 0) is opt-in for local evaluation. Whatever the
 * record holds, this reports and never throws: a check that cannot be made is noted
 * (`provenance_unavailable`), and the episode keeps its result.
 */
function provenance(
  run: EpisodeRun,
  collected: CollectedAnswers | undefined,
  receipts: Receipt[],
  strict: boolean,
): void {
  if (collected === undefined) return;
  try {
    const report = upstreamProvenance(collected.answers, receipts);
    run.result.provenance = report;
    if (report.total > report.matched)
      run.log.warn(
        { total: report.total, matched: report.matched, unmatched: report.unmatched },
        "episode.provenance.unmatched",
      );
  } catch (err) {
    run.result.provenance = null;
    run.result.notes.push("provenance_unavailable");
    run.log.error({ err: (err as Error).message }, "episode.provenance.failed");
  }
  if (collected.turns === undefined) return;
  let prov: ReturnType<typeof checkProvenance> | undefined;
  try {
    prov = checkProvenance(collected.turns, receipts);
    run.result.answer_provenance = prov;
  } catch (err) {
    run.result.answer_provenance = null;
    run.result.notes.push("provenance_unavailable");
    run.log.error({ err: (err as Error).message }, "episode.provenance.failed");
  }
  if (!strict) return;
  const unmatched = prov?.unmatched ?? 0;
  const unchecked = collected.invalidTurns + (prov === undefined ? 1 : 0);
  if (unmatched === 0 && unchecked === 0) return;
  // First among the policy's faults: the rest of the episode is built on answers no model gave.
  const f: EpisodeFailure = {
    class: "policy",
    code: "unmetered_answer",
    message:
      unmatched > 0
        ? `${unmatched} of ${prov?.turns} answers the agent received match no metered model call (first: turn ${prov?.first_unmatched_turn})`
        : `${collected.invalidTurns} turn records of the agent are not valid: answers that cannot be checked against the meter`,
  };
  run.failures.unshift(f);
  run.log.warn({ class: f.class, code: f.code, err: f.message }, "episode.failure");
}

export async function finishEpisode(
  run: EpisodeRun,
  opts: {
    collected: CollectedAnswers | undefined;
    strictProvenance: boolean;
    grade: GradeResult | undefined;
    policyLog: string;
    startedAt: number;
  },
): Promise<EpisodeResult> {
  const { result, artifacts, meter } = run;
  const receipts = run.receipts();
  provenance(run, opts.collected, receipts, opts.strictProvenance);

  // Outcome: the primary failure decides scored vs failed; a policy fault keeps its quality.
  const primary = primaryFailure(run.failures);
  result.failure = primary ?? null;
  result.notes = [...run.failures.map((f) => f.code), ...result.notes];
  result.status = primary && primary.class !== "policy" ? "failed" : "scored";
  // An upstream/infra failure makes the quality untrustworthy: none is reported (the run is retried).
  if (result.status === "failed") result.quality = 0;
  // Under the strict rule, work done on forged (or uncheckable) answers earns nothing.
  if (opts.strictProvenance && run.failures[0]?.code === "unmetered_answer") result.quality = 0;
  const usage = result.usage;
  result.cost_usd = usage?.cost_usd ?? 0;
  result.by_model = usage?.by_model ?? {};
  result.timings.total_ms = performance.now() - opts.startedAt;
  // A call the meter ended (the episode's close, a client that stopped reading) is no model cut off.
  result.truncated_before_tool_call ||=
    result.agent.tool_calls === 0 && receipts.some((r) => r.truncated && !endedByTheMeter(r));

  await artifacts.write(ARTIFACT_FILES.policyLog, opts.policyLog);
  await artifacts.json(
    ARTIFACT_FILES.meter,
    meterArtifact({ episodeId: run.id, priceTableHash: meter.priceTableHash, summary: usage, receipts }),
  );
  if (primary && !artifacts.written[ARTIFACT_FILES.error]) {
    await artifacts.write(
      ARTIFACT_FILES.error,
      `${primary.class}/${primary.code}: ${primary.message}\n${run.errors.length ? `\n${run.errors.join("\n\n")}\n` : ""}`,
    );
  }
  result.artifacts.files = {
    ...artifacts.written,
    [ARTIFACT_FILES.evaluation]: `${artifacts.dir}/${ARTIFACT_FILES.evaluation}`,
  };
  const grade = opts.grade;
  await artifacts.json(ARTIFACT_FILES.evaluation, {
    ...result,
    verifier_result: grade
      ? { tests: grade.tests, passed: grade.passed, reward: grade.reward ?? null, ctrf: grade.ctrf ?? null }
      : null,
  });
  run.log.info(
    {
      status: result.status,
      quality: result.quality,
      failure: result.failure?.code,
      cost_usd: result.cost_usd,
      answers: result.answer_provenance,
      total_ms: Math.round(result.timings.total_ms),
    },
    "episode.done",
  );
  return result;
}
