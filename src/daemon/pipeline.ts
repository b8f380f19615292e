/**
 * The daemon's seam to the evaluation: the three functions it calls, as a value, so tests can hand
 * the daemon a pipeline of their own. The real one (src/environment's composition root and
 * src/evaluation's evaluatePack) is loaded lazily: it pulls in Docker, the meter and the simulator.
 */
import type { Config } from "../config.js";
import type { Environment } from "../environment/index.js";
import { InfraError } from "../errors.js";
import type { EvaluationResult, PackEvaluationRequest, Verdict } from "../evaluation/index.js";
import type { Logger } from "../log.js";
import type { ScoreVerdict } from "../platform/index.js";
import type { LiveStatus } from "../status/index.js";
import type { Db, NetworkId } from "../store/index.js";

export type { PackEvaluationRequest } from "../evaluation/index.js";

/** What the daemon itself uses of the environment (a test pipeline provides just this). */
export type EvaluationEnvironment = Pick<
  Environment,
  "config" | "log" | "db" | "live" | "priceTableHash" | "close"
>;

export type PackEvaluation = EvaluationResult;

/**
 * Method syntax on purpose: the environment evaluatePack receives is the one openEnvironment made,
 * so a pipeline with a richer environment type (the real one) fits this seam.
 */
export interface Pipeline {
  openEnvironment(
    config: Config,
    opts: { log: Logger; live?: LiveStatus; db?: Db; bench?: "builtin" | "registry"; network?: NetworkId },
  ): Promise<EvaluationEnvironment>;
  evaluatePack(env: EvaluationEnvironment, req: PackEvaluationRequest): Promise<PackEvaluation>;
  toScoreVerdict(v: Verdict): ScoreVerdict;
}

/** The real pipeline. */
export async function loadPipeline(): Promise<Pipeline> {
  try {
    const [environment, evaluation] = await Promise.all([
      import("../environment/index.js"),
      import("../evaluation/index.js"),
    ]);
    const real: Pipeline = {
      openEnvironment: environment.openEnvironment,
      // The environment handed back is the one environment.openEnvironment made: a full Environment.
      evaluatePack: (env, req) => evaluation.evaluatePack(env as Environment, req),
      toScoreVerdict: evaluation.toScoreVerdict,
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
