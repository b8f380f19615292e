/**
 * The daemon's seam to the evaluation pipeline (src/evaluation/pipeline.ts): the three functions it
 * calls, as a value, so tests can hand the daemon a pipeline of their own. The real one is loaded
 * lazily (it pulls in Docker, the meter and the simulator), and type-checked against this seam.
 */
import type { Config } from "../config.js";
import { InfraError } from "../errors.js";
import type { PackEvaluationRequest } from "../evaluation/pipeline.js";
import type { EvaluationResult, Verdict } from "../evaluation/types.js";
import type { Logger } from "../log.js";
import type { ScoreVerdict } from "../platform/index.js";
import type { LiveStatus } from "../status/live.js";
import type { Db } from "../store/index.js";

export type { PackEvaluationRequest } from "../evaluation/pipeline.js";

/** What the daemon needs of the long-lived environment (the real one has the meter, sandbox, …). */
export interface EvaluationEnvironment {
  config: Config;
  log: Logger;
  db: Db;
  live: LiveStatus;
  priceTableHash: string;
  close(): Promise<void>;
}

export type PackEvaluation = EvaluationResult;

/**
 * Method syntax on purpose: the environment evaluatePack receives is the one openEnvironment made,
 * so a pipeline with a richer environment type (the real one) fits this seam.
 */
export interface Pipeline {
  openEnvironment(
    config: Config,
    opts: { log: Logger; live?: LiveStatus; db?: Db },
  ): Promise<EvaluationEnvironment>;
  evaluatePack(env: EvaluationEnvironment, req: PackEvaluationRequest): Promise<PackEvaluation>;
  toScoreVerdict(v: Verdict): ScoreVerdict;
}

/** The real pipeline. */
export async function loadPipeline(): Promise<Pipeline> {
  try {
    const mod = await import("../evaluation/pipeline.js");
    const real: Pipeline = {
      openEnvironment: mod.openEnvironment,
      evaluatePack: mod.evaluatePack,
      toScoreVerdict: mod.toScoreVerdict,
    };
    return real;
  } catch (err) {
    throw new InfraError(
      "pipeline_unavailable",
      `cannot load the evaluation pipeline: ${(err as Error).message}`,
      {
        cause: err,
        retryable: false,
      },
    );
  }
}
